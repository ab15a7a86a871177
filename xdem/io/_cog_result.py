"""What :func:`xdem.io.cog.write_cog` returns (:class:`CogResult`) and how it tells a full disk
(:func:`_disk_full`) in one line (:func:`_disk_full_error`)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xdem.errors import OutputError

__all__ = ["CogResult"]


def _disk_full(exc: BaseException | None, folder: Path) -> bool:
    """Whether a write failure was a full disk: ENOSPC anywhere in the exception chain (GDAL
    often only says "Write failed"/"Seek error"), or under 1 MiB left in ``folder``."""
    seen = set()
    io_error = exc is None or isinstance(exc, OSError) or type(exc).__module__.startswith("rasterio")
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    if not io_error:  # e.g. an error of the DEM's own graph: not the disk, however full
        return False
    with contextlib.suppress(OSError):
        return shutil.disk_usage(folder).free < 2**20
    return False


def _disk_full_error(out: Path, *, shape: tuple[int, int], dtype: np.dtype, free_mb: float,
                     count: int = 1, target: str | None = None) -> OutputError:
    raw = count * shape[0] * shape[1] * dtype.itemsize / 2**20
    what = f"'{out.name}'" if count == 1 else f"'{out.name}' and {count - 1} more files"
    where = f"'{out.parent}'"
    if target is not None:  # staged for an upload: the temp folder, which TMPDIR chooses
        what, where = f"'{target}'", f"the temporary folder '{out.parent.parent}' (set TMPDIR to choose another)"
    return OutputError(
        f"no space left on the disk of {where} while writing {what}: up to {raw * 2.4:.0f} MB are needed "
        f"at once (a temporary GTiff of up to {raw:.0f} MB, plus the COG with its overviews, up to {raw * 1.4:.0f} MB "
        f"for incompressible data) and {free_mb:.0f} MB were free; free some space or write to another folder "
        "(nothing was left behind)"
    )


@dataclass(frozen=True, eq=False)
class CogResult:
    """What :func:`write_cog` wrote: the absolute ``path`` and, for each of its ``also``, the
    per-block results (blocks in row-major order).

    Path-like: ``os.fspath(result)`` and ``str(result)`` give the path and ``result == path``
    compares paths, so ``rasterio.open(result)`` works; the ``Path`` itself is ``result.path``
    (e.g. ``result.path.name``).

    Examples
    --------
    >>> import os, xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> result = xdem.write_cog(dem, "/tmp/lidar_copy.tif", overwrite=True)
    >>> result.path.name, os.fspath(result) == str(result.path), result.also
    ('lidar_copy.tif', True, ())
    """

    path: Path | str  # a str: the s3:// URL of an output uploaded to object storage
    also: tuple = ()

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CogResult):
            return self.path == other.path and self.also == other.also
        if isinstance(other, (str, os.PathLike)):
            return os.fspath(self.path) == os.fspath(other) if isinstance(self.path, str) else \
                self.path == Path(os.fspath(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.path)
