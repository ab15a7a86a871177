"""Reading point sets: a GeoDataFrame, a vector file, CSV/Parquet tables, LAS/LAZ.

Every source becomes a :class:`PointSet`: three float64 arrays ``x, y, z`` in one CRS (the
DEM's, once :meth:`PointSet.to_crs` or ``read_points(..., crs=)`` has moved them), the CRS they
came in and the file name. The elevation is a column chosen with ``z_column``, else the
geometries' z, else a column named ``z``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import geopandas as gpd
import numpy as np
import pandas as pd

from xdem.errors import CRSError, InputError, ReadError
from xdem.io import remote
from xdem.typing import CRSLike, PointsLike

__all__ = ["PointSet", "read_points", "is_points_source", "POINT_SUFFIXES"]

#: Rows read at once from large files (a batch's geometries and columns live only while it is
#: turned into coordinate arrays: memory stays about 24 bytes per point plus one batch).
BATCH_ROWS = 1_000_000

#: File suffixes read as points (any other path is opened as a raster).
VECTOR_SUFFIXES = (".gpkg", ".shp", ".geojson", ".fgb", ".gml", ".kml")
TABLE_SUFFIXES = (".csv", ".txt", ".parquet", ".geoparquet", ".pq")
LAS_SUFFIXES = (".las", ".laz")
POINT_SUFFIXES = VECTOR_SUFFIXES + TABLE_SUFFIXES + LAS_SUFFIXES


@dataclass(frozen=True)
class PointSet:
    """Points with elevations, in one CRS.

    Attributes
    ----------
    x, y, z
        float64 coordinates and elevations (``x, y`` in ``crs``).
    crs
        CRS of ``x, y`` (a string pyproj understands).
    source_crs
        CRS the points were read in.
    name
        File the points came from (``None`` for in-memory data).

    Examples
    --------
    >>> p = PointSet(np.array([500.0]), np.array([600.0]), np.array([10.0]), crs="EPSG:32633")
    >>> p.count, p.source_crs
    (1, 'EPSG:32633')
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    crs: str
    source_crs: str = ""
    name: str | None = None

    def __post_init__(self) -> None:
        if not self.source_crs:
            object.__setattr__(self, "source_crs", self.crs)

    @property
    def count(self) -> int:
        """Number of points."""
        return int(len(self.x))

    def to_crs(self, crs: CRSLike) -> PointSet:
        """The points with ``x, y`` in ``crs`` (elevations unchanged); ``self`` if already there."""
        from pyproj import CRS, Transformer

        target = CRS.from_user_input(crs)
        if CRS.from_user_input(self.crs) == target:
            return self
        tr = Transformer.from_crs(self.crs, target, always_xy=True)
        x, y = tr.transform(self.x, self.y)
        return replace(self, x=np.asarray(x, dtype=np.float64), y=np.asarray(y, dtype=np.float64),
                       crs=target.to_string())

    def take(self, index: np.ndarray) -> PointSet:
        """The points at ``index`` (an integer or boolean array)."""
        return replace(self, x=self.x[index], y=self.y[index], z=self.z[index])

    def to_geodataframe(self) -> gpd.GeoDataFrame:
        """A GeoDataFrame of 2-D points with a column ``z``, in ``crs``."""
        return gpd.GeoDataFrame({"z": self.z}, geometry=gpd.points_from_xy(self.x, self.y), crs=self.crs)


def is_points_source(source: object) -> bool:
    """Whether ``source`` is read as points: a GeoDataFrame, a :class:`PointSet`, a
    DataFrame, or a path whose suffix is one of :data:`POINT_SUFFIXES`.

    Examples
    --------
    >>> is_points_source("tracks.gpkg"), is_points_source("dem.tif")
    (True, False)
    """
    if isinstance(source, (PointSet, pd.DataFrame)):
        return True
    if isinstance(source, (str, os.PathLike)):
        return remote.suffix(source) in POINT_SUFFIXES
    return False


def read_points(
    source: PointsLike,
    *,
    z_column: str | None = None,
    crs: CRSLike | None = None,
    source_crs: CRSLike | None = None,
    x_column: str = "x",
    y_column: str = "y",
) -> PointSet:
    """Read points with elevations from a GeoDataFrame, a file or a table.

    Parameters
    ----------
    source
        A :class:`geopandas.GeoDataFrame`, a :class:`pandas.DataFrame` with x, y, z columns, a
        :class:`PointSet`, or a path: vector file (GeoPackage, shapefile, GeoJSON,
        FlatGeobuf; via pyogrio), GeoParquet or Parquet table (needs ``pyarrow``), CSV, LAS/LAZ
        (needs ``laspy``: ``pip install laspy``).
    z_column
        Column holding the elevation. Default: the geometries' z, else a column ``z`` (LAS: the
        points' ``z``).
    crs
        CRS to return the points in (e.g. the DEM's); ``None`` keeps theirs.
    source_crs
        CRS of a table without one (CSV, plain Parquet, LAS without a CRS record).
    x_column, y_column
        Coordinate columns of tables.

    Returns
    -------
    PointSet

    Examples
    --------
    >>> import geopandas as gpd
    >>> gdf = gpd.GeoDataFrame({"h": [12.5]}, geometry=gpd.points_from_xy([500.0], [600.0]), crs="EPSG:32633")
    >>> p = read_points(gdf, z_column="h", crs="EPSG:32632")
    >>> p.count, p.z.tolist(), p.crs, p.source_crs
    (1, [12.5], 'EPSG:32632', 'EPSG:32633')
    """
    if isinstance(source, PointSet):
        points = source
    elif isinstance(source, gpd.GeoDataFrame):
        points = _from_geodataframe(source, z_column, source_crs, None)
    elif isinstance(source, pd.DataFrame):
        points = _from_table(source, x_column, y_column, z_column, source_crs, None)
    elif isinstance(source, (str, os.PathLike)):
        points = _from_path(source, z_column, source_crs, x_column, y_column)
    else:
        raise InputError(f"cannot read points from a {type(source).__name__}: give a GeoDataFrame, a DataFrame "
                         "with x, y, z columns or a file path")
    if crs is not None:
        points = points.to_crs(crs)
    return points


def _crs_string(crs: Any, given: Any, what: str) -> str:
    if crs is None:
        crs = given
    if crs is None:
        raise CRSError(f"{what} has no CRS: give source_crs= (e.g. 'EPSG:4326')")
    from pyproj import CRS

    return str(CRS.from_user_input(crs).to_string())


def _from_geodataframe(gdf: gpd.GeoDataFrame, z_column: str | None, source_crs: Any, name: str | None) -> PointSet:
    what = f"the points '{name}'" if name else "the GeoDataFrame"
    if len(gdf) and not bool((gdf.geom_type == "Point").all()):
        raise InputError(f"{what} must hold Point geometries only (found {sorted(set(gdf.geom_type))})")
    crs = _crs_string(gdf.crs, source_crs, what)
    geom = gdf.geometry
    x, y = np.asarray(geom.x, dtype=np.float64), np.asarray(geom.y, dtype=np.float64)
    if z_column is not None:
        z = _column(gdf, z_column, what)
    elif len(gdf) and bool(geom.has_z.all()):
        z = np.asarray(geom.z, dtype=np.float64)
    elif "z" in gdf.columns:
        z = _column(gdf, "z", what)
    else:
        raise InputError(f"{what} have no elevation: give 3-D points or name the column with z_column= "
                         f"(columns: {', '.join(map(str, gdf.columns.drop(gdf.geometry.name)))})")
    return PointSet(x, y, z, crs=crs, name=name)


def _column(df: pd.DataFrame, column: str, what: str) -> np.ndarray:
    if column not in df.columns:
        raise InputError(f"{what} have no column '{column}' (columns: {', '.join(map(str, df.columns))})")
    try:
        return np.asarray(df[column], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"column '{column}' of {what} is not numeric ({exc})") from exc


def _from_table(df: pd.DataFrame, x_column: str, y_column: str, z_column: str | None, source_crs: Any,
                name: str | None) -> PointSet:
    what = f"the points '{name}'" if name else "the table"
    x, y = _column(df, x_column, what), _column(df, y_column, what)
    z = _column(df, z_column or "z", what)
    return PointSet(x, y, z, crs=_crs_string(None, source_crs, what), name=name)


def _needs(module: str, extra: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise InputError(f"reading {what} needs the optional package {module}: pip install {extra}")


def _from_path(source: str | os.PathLike, z_column: str | None, source_crs: Any, x_column: str,
               y_column: str) -> PointSet:
    """A points file: a local path, or a URL / ``/vsi...`` path asked for first
    (:func:`xdem.io.remote.check_object`), then read by the same reader: tables and LAS/LAZ
    through fsspec (:func:`xdem.io.remote.filesystem`), vector files through GDAL's virtual
    file systems (pyogrio)."""
    text = os.fspath(source)
    if remote.is_remote(text):
        remote.check_object(text, label="points file")
        name, suffix, where = remote.redact(text), remote.suffix(text), remote.gdal_path(text)
    else:
        path = Path(text)
        if not path.exists():
            raise ReadError(f"points file not found: '{path}'")
        name, suffix, where = str(path), path.suffix.lower(), text
    try:
        if suffix in LAS_SUFFIXES + TABLE_SUFFIXES:
            with _binary(text) as file:
                if suffix in LAS_SUFFIXES:
                    return _from_las(file, name, z_column, source_crs)
                if suffix in (".csv", ".txt"):
                    return _from_csv(file, name, x_column, y_column, z_column, source_crs)
                return _from_parquet(file, name, x_column, y_column, z_column, source_crs)
        return _from_vector_file(where, name, z_column, source_crs)
    except (InputError, CRSError):
        raise
    except Exception as exc:  # a library's own error, e.g. a corrupt file: one clear line
        raise ReadError(f"cannot read points from '{name}': {remote.redact(str(exc))}") from exc


@contextlib.contextmanager
def _binary(text: str) -> Iterator[Path | BinaryIO]:
    """A local path as it is, or a remote file opened for reading by fsspec."""
    if not remote.is_remote(text):
        yield Path(text)
        return
    url = remote.fsspec_url(remote.gdal_path(text))
    if url is None:
        raise InputError(f"'{remote.redact(text)}': tables and LAS/LAZ files are read from a local path, s3://, "
                         "gs://, az:// or http(s)://, not from this GDAL virtual path; copy the file out first")
    try:
        fs = remote.filesystem(url)
    except ImportError as exc:
        raise InputError(f"reading '{remote.redact(text)}' needs an fsspec file system: {exc}") from None
    with fs.open(url, "rb") as file:
        yield file


def _from_las(path: Path | BinaryIO, name: str, z_column: str | None, source_crs: Any) -> PointSet:
    """A LAS/LAZ file read by chunks of :data:`BATCH_ROWS` points (``laspy``'s chunk
    iterator) straight into preallocated coordinate arrays; LAZ needs a LAZ backend
    (``lazrs``: ``pip install 'laspy[lazrs]'``)."""
    _needs("laspy", "laspy", "LAS/LAZ files")
    import laspy

    if name.split("?")[0].lower().endswith(".laz") and not laspy.LazBackend.detect_available():
        raise InputError(f"reading the LAZ file '{name}' needs a LAZ backend: pip install 'laspy[lazrs]'")
    with laspy.open(path) as reader:
        header = reader.header
        n = int(header.point_count)
        dims = list(header.point_format.dimension_names)
        zc = None if z_column in (None, "z", "Z") else z_column
        if zc is not None and zc not in dims:
            raise InputError(f"the points '{name}' have no dimension '{zc}' (dimensions: {', '.join(dims)})")
        crs = _crs_string(header.parse_crs(), source_crs, f"the points '{name}'")
        x, y, z = (np.empty(n, dtype=np.float64) for _ in range(3))
        k = 0
        for chunk in reader.chunk_iterator(BATCH_ROWS):
            m = len(chunk)
            x[k:k + m], y[k:k + m] = chunk.x, chunk.y
            z[k:k + m] = chunk.z if zc is None else chunk[zc]
            k += m
    return PointSet(x[:k], y[:k], z[:k], crs=crs, name=name)


def _from_parquet(path: Path | BinaryIO, name: str, x_column: str, y_column: str, z_column: str | None,
                  source_crs: Any) -> PointSet:
    """A Parquet table (``x, y, z`` columns) or GeoParquet file (point geometries, WKB or
    GeoArrow-encoded) read by batches of :data:`BATCH_ROWS` rows
    (:meth:`pyarrow.parquet.ParquetFile.iter_batches`, only the needed columns) straight into
    preallocated coordinate arrays: no DataFrame of geometries is ever built."""
    _needs("pyarrow", "pyarrow", "Parquet files")
    import json

    import pyarrow.parquet as pq

    what = f"the points '{name}'"
    pf = pq.ParquetFile(path)
    meta = pf.schema_arrow.metadata or {}
    columns = list(pf.schema_arrow.names)
    n = int(pf.metadata.num_rows)
    x, y, z = (np.empty(n, dtype=np.float64) for _ in range(3))
    geo = json.loads(meta[b"geo"]) if b"geo" in meta else None
    if geo is None:
        zc = z_column or "z"
        for col in (x_column, y_column, zc):
            if col not in columns:
                raise InputError(f"{what} have no column '{col}' (columns: {', '.join(columns)})")
        k = 0
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=[x_column, y_column, zc]):
            m = batch.num_rows
            for out, col in zip((x, y, z), (x_column, y_column, zc)):
                out[k:k + m] = _numeric(batch.column(col), col, what)
            k += m
        return PointSet(x[:k], y[:k], z[:k], crs=_crs_string(None, source_crs, what), name=name)
    gcol = str(geo.get("primary_column", "geometry"))
    info = geo.get("columns", {}).get(gcol, {})
    if z_column is not None and z_column not in columns:
        raise InputError(f"{what} have no column '{z_column}' (columns: {', '.join(columns)})")
    crs_info = info.get("crs", "OGC:CRS84")  # GeoParquet: a missing crs means OGC:CRS84, null an unknown one
    crs = _crs_string(None if crs_info is None else _projjson(crs_info), source_crs, what)
    read = [gcol] if z_column is None else [gcol, z_column]
    k = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=read):
        m = batch.num_rows
        bx, by, bz = _point_coords(batch.column(gcol), str(info.get("encoding", "WKB")), what)
        x[k:k + m], y[k:k + m] = bx, by
        if z_column is not None:
            z[k:k + m] = _numeric(batch.column(z_column), z_column, what)
        elif bz is not None:
            z[k:k + m] = bz
        else:
            raise InputError(f"{what} have no elevation: give 3-D points or name the column with z_column= "
                             f"(columns: {', '.join(c for c in columns if c != gcol)})")
        k += m
    return PointSet(x[:k], y[:k], z[:k], crs=crs, name=name)


def _projjson(crs: Any) -> Any:
    """A GeoParquet ``crs`` value (PROJJSON object or a string) as pyproj input."""
    import json

    return json.dumps(crs) if isinstance(crs, dict) else crs


def _numeric(column: Any, name: str, what: str) -> np.ndarray:
    try:
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"column '{name}' of {what} is not numeric ({exc})") from exc


def _point_coords(column: Any, encoding: str, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``x, y`` (and ``z`` for 3-D points, else ``None``) of a batch of GeoParquet geometries."""
    import shapely

    if encoding.lower() == "wkb":
        geoms = shapely.from_wkb(column.to_numpy(zero_copy_only=False))
        types = shapely.get_type_id(geoms)
        if len(geoms) and not bool(np.all(types == 0)):
            raise InputError(f"{what} must hold Point geometries only (found type ids {sorted(set(types.tolist()))})")
        coords = shapely.get_coordinates(geoms, include_z=True)
        z = coords[:, 2] if len(coords) and bool(np.all(shapely.has_z(geoms))) else None
        return coords[:, 0], coords[:, 1], z
    if encoding.lower() == "point":  # GeoArrow: a struct of x, y(, z) per row
        fields = [column.type.field(i).name for i in range(column.type.num_fields)]
        xyz = [np.asarray(column.field(f).to_numpy(zero_copy_only=False), dtype=np.float64) for f in fields]
        return xyz[0], xyz[1], (xyz[2] if len(xyz) > 2 else None)
    raise InputError(f"{what}: GeoParquet geometry encoding '{encoding}' is not supported for points "
                     "(use WKB or GeoArrow 'point')")


def _from_csv(path: Path | BinaryIO, name: str, x_column: str, y_column: str, z_column: str | None,
              source_crs: Any) -> PointSet:
    """A CSV table read in batches of :data:`BATCH_ROWS` rows, only the three columns kept."""
    zc = z_column or "z"
    header = pd.read_csv(path, nrows=0).columns
    if not isinstance(path, Path):
        path.seek(0)
    for col in (x_column, y_column, zc):
        if col not in header:
            raise InputError(f"the points '{name}' have no column '{col}' (columns: {', '.join(map(str, header))})")
    parts = [_from_table(chunk, x_column, y_column, zc, source_crs, name)
             for chunk in pd.read_csv(path, usecols=[x_column, y_column, zc], chunksize=BATCH_ROWS)]
    return _concat(parts, _crs_string(None, source_crs, f"the points '{name}'"), name)


def _concat(parts: list[PointSet], crs: str, name: str) -> PointSet:
    if not parts:
        empty = np.empty(0, dtype=np.float64)
        return PointSet(empty, empty, empty, crs=crs, name=name)
    if len(parts) == 1:
        return parts[0]
    return PointSet(np.concatenate([p.x for p in parts]), np.concatenate([p.y for p in parts]),
                    np.concatenate([p.z for p in parts]), crs=crs, name=name)


def _from_vector_file(path: str, name: str, z_column: str | None, source_crs: Any) -> PointSet:
    """A vector file (a local path or a GDAL ``/vsi...`` path) read in batches of
    :data:`BATCH_ROWS` features (pyogrio), only the elevation column with the geometries."""
    import pyogrio

    info = pyogrio.read_info(path)
    n = int(info.get("features", -1))
    columns = [z_column] if z_column is not None and z_column in list(info["fields"]) else None
    if z_column is not None and columns is None:
        raise InputError(f"the points '{name}' have no column '{z_column}' (columns: {', '.join(info['fields'])})")
    if n < 0 or n <= BATCH_ROWS:  # unknown count (some drivers) or small: one read
        return _from_geodataframe(gpd.read_file(path), z_column, source_crs, name)
    parts = []
    for start in range(0, n, BATCH_ROWS):
        batch = pyogrio.read_dataframe(path, columns=columns, skip_features=start, max_features=BATCH_ROWS)
        parts.append(_from_geodataframe(batch, z_column, source_crs, name))
    return _concat(parts, parts[0].crs, name)
