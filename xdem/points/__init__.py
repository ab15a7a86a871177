"""Point sets as references or as data to align: reading them (:func:`read_points`), and
evaluating a DEM at them out of core (:func:`dem_at_points`, :class:`PointSampler`): the
points are bucketed by the DEM's chunks in one pass and each chunk holding points is one task.
"""

from xdem.points.bucket import PointSampler, bucket_points, dem_at_points, pixel_positions
from xdem.points.read import POINT_SUFFIXES, PointSet, is_points_source, read_points

__all__ = ["PointSet", "read_points", "is_points_source", "POINT_SUFFIXES", "dem_at_points", "bucket_points",
           "pixel_positions", "PointSampler"]
