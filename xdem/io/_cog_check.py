"""Check the layout of a Cloud-Optimized GeoTIFF with rasterio alone.

:func:`cog_layout_errors` applies the rules of GDAL's ``validate_cloud_optimized_geotiff.py``
(as :func:`rio_cogeo.cogeo.cog_validate` does; the test suite compares the two): a tiled
GeoTIFF with internal overviews, its main image file directory (IFD) in the first bytes,
the IFDs in increasing offset order (main image, then overviews from the finest), the data
of the coarsest overview first and that of the main image last. Importing ``rio_cogeo``
costs about 0.2 s of CPU per process (pydantic models of ``morecantile``), more than the
check itself; every ``xdem coreg`` run pays it once, for this check only.

Examples
--------
>>> import numpy as np, rasterio, rasterio.shutil, tempfile, os
>>> from rasterio.transform import from_origin
>>> folder = tempfile.mkdtemp()
>>> profile = dict(driver="GTiff", width=1024, height=1024, count=1, dtype="float32",
...                crs="EPSG:32633", transform=from_origin(0, 0, 1, 1))
>>> with rasterio.open(os.path.join(folder, "striped.tif"), "w", **profile) as dst:
...     dst.write(np.zeros((1, 1024, 1024), np.float32))
>>> cog_layout_errors(os.path.join(folder, "striped.tif"))
['the file is larger than 512 pixels on a side but is not tiled']
>>> _ = rasterio.shutil.copy(os.path.join(folder, "striped.tif"), os.path.join(folder, "cog.tif"), driver="COG")
>>> cog_layout_errors(os.path.join(folder, "cog.tif"))
[]
"""

from __future__ import annotations

import pathlib

import rasterio

__all__ = ["cog_layout_errors"]

#: The main IFD must start within this many bytes (GDAL's ghost header is under 200 bytes).
MAX_MAIN_IFD_OFFSET = 300
#: A side above which an image (or an overview) must be tiled.
UNTILED_MAX_SIDE = 512


def _tag_int(src: rasterio.io.DatasetReader, name: str, overview: int | None) -> int:
    value = src.get_tag_item(name, "TIFF", bidx=1, ovr=overview)
    return int(value) if value is not None else 0


def _first_data_offset(src: rasterio.io.DatasetReader, shape: tuple[int, int], overview: int | None) -> int | None:
    """Offset of the first stored block (row-major) of the image or ``overview``; None if none is stored."""
    rows, cols = src.block_shapes[0]
    for y in range(-(-shape[0] // rows)):
        for x in range(-(-shape[1] // cols)):
            offset = _tag_int(src, f"BLOCK_OFFSET_{x}_{y}", overview)
            if offset > 0:
                return offset
    return None


def _ifd_errors(src: rasterio.io.DatasetReader, overviews: list[int]) -> tuple[list[str], list[int]]:
    """Errors of the IFDs' placement, and their offsets (main image first)."""
    errors = []
    offsets = [_tag_int(src, "IFD_OFFSET", None)]
    if offsets[0] > MAX_MAIN_IFD_OFFSET:
        errors.append(f"the main IFD is at byte {offsets[0]}, not within the first {MAX_MAIN_IFD_OFFSET}")
    ghost = src.get_tag_item("GDAL_STRUCTURAL_METADATA", "TIFF")
    if ghost is not None and "KNOWN_INCOMPATIBLE_EDITION=YES" in ghost:
        errors.append("the file's optimised layout was invalidated by a later edition")
    if overviews != sorted(overviews):
        errors.append("the overviews are not sorted")
    for ix, factor in enumerate(overviews):
        if not factor > 1:
            errors.append(f"overview {ix} has decimation {factor}")
        offsets.append(_tag_int(src, "IFD_OFFSET", ix))
        if offsets[-1] < offsets[-2]:
            errors.append(f"the IFD of overview {ix} (byte {offsets[-1]}) is before that of the "
                          f"{'main image' if ix == 0 else f'overview {ix - 1}'} (byte {offsets[-2]})")
    return errors, offsets


def _data_errors(src: rasterio.io.DatasetReader, overviews: list[int], ifd_offsets: list[int]) -> list[str]:
    """Errors of the data's placement: the coarsest overview's first, the main image's last."""
    found = [_first_data_offset(src, (src.height, src.width), None)]
    found += [_first_data_offset(src, (src.height // f, src.width // f), ix) for ix, f in enumerate(overviews)]
    data = [offset for offset in found if offset is not None]
    errors = []
    if data and data[-1] < ifd_offsets[-1]:
        errors.append(f"the first block of the {'smallest overview' if overviews else 'image'} is before its IFD")
    for i in range(len(data) - 2, 0, -1):
        if data[i] < data[i + 1]:
            errors.append(f"the first block of overview {i - 1} is before that of overview {i}")
    if len(data) >= 2 and data[0] < data[1]:
        errors.append(f"the first block of the main image is before that of overview {len(overviews) - 1}")
    return errors


def _untiled(width: int, height: int, block_cols: int) -> bool:
    return (width > UNTILED_MAX_SIDE or height > UNTILED_MAX_SIDE) and block_cols == width


def cog_layout_errors(path: str) -> list[str]:
    """The ways the GeoTIFF at ``path`` breaks the Cloud-Optimized GeoTIFF layout.

    Parameters
    ----------
    path
        A file rasterio opens.

    Returns
    -------
    list of str
        One sentence per broken rule; empty for a valid COG.
    """
    with rasterio.open(path) as src:
        if src.driver != "GTiff":
            return ["the file is not a GeoTIFF"]
        errors = []
        if any(pathlib.Path(f).suffix.lower() == ".ovr" for f in src.files):
            errors.append("the overviews are in an external .ovr file, not inside the file")
        if src.block_shapes and _untiled(src.width, src.height, src.block_shapes[0][1]):
            errors.append(f"the file is larger than {UNTILED_MAX_SIDE} pixels on a side but is not tiled")
        overviews = src.overviews(1)
        ifd_errors, ifd_offsets = _ifd_errors(src, overviews)
        errors += ifd_errors + _data_errors(src, overviews, ifd_offsets)
    for ix in range(len(overviews)):
        with rasterio.open(path, OVERVIEW_LEVEL=ix) as level:
            if level.block_shapes and _untiled(level.width, level.height, level.block_shapes[0][1]):
                errors.append(f"overview {ix} is not tiled")
    return errors
