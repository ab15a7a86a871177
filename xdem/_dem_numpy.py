"""numpy's functions on :class:`xdem.DEM`, with upstream xdem's (geoutils') meaning, lazy where it can be.

Upstream's DEM is a geoutils ``Raster``: a numpy ufunc of DEMs (``np.minimum(a, b)``,
``np.abs(dem)``) is a DEM on the same grid, and the array functions geoutils handles
(``np.nanmean(dem)``, ``np.median(dem)``...) act on the valid values (the masked array). Here a
ufunc builds a lazy DEM (NaN where any input is nodata, as a masked operation), the reductions
run on the dask array (one pass, nothing held but the result) and the other handled functions
read the values, as upstream.

Examples
--------
>>> import numpy as np, xdem
>>> dem = xdem.DEM(xdem.examples.get_path("lidar"))
>>> type(np.minimum(dem, dem + 1)).__name__
'DEM'
>>> bool(np.isclose(float(np.nanmean(dem)), float(dem.data.mean())))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import dask.array as da
import numpy as np
from geoutils.raster import handled_array_funcs

from xdem.errors import InputError
from xdem.stats import nanmax, nanmin

if TYPE_CHECKING:
    from xdem.dem import DEM

__all__ = ["apply_ufunc", "apply_array_function", "filled_values", "index_to_mask", "HANDLED_FUNCTIONS"]

#: The numpy functions upstream's DEM (geoutils' Raster) handles; the others are not implemented on DEMs.
HANDLED_FUNCTIONS = frozenset(handled_array_funcs)

#: Reductions computed on the dask array; NaN is nodata, so the masked (upstream) and the
#: NaN-skipping results are the same.
_LAZY_REDUCTIONS: dict[str, Callable[..., da.Array]] = {
    "mean": da.nanmean, "nanmean": da.nanmean, "sum": da.nansum, "nansum": da.nansum,
    "min": nanmin, "nanmin": nanmin, "amin": nanmin, "max": nanmax, "nanmax": nanmax,
    "amax": nanmax, "std": da.nanstd, "nanstd": da.nanstd, "var": da.nanvar, "nanvar": da.nanvar,
}


def apply_ufunc(dem: DEM, ufunc: np.ufunc, method: str, inputs: Sequence[object],
                kwargs: dict[str, object]) -> DEM | tuple[DEM, ...] | object:
    """``ufunc(*inputs)`` for ``np.<ufunc>`` called with a DEM among ``inputs``: lazy DEM(s) on
    ``dem``'s grid; ``NotImplemented`` for ufunc methods other than a call and for ``out=``."""
    if method != "__call__" or "out" in kwargs:
        return NotImplemented
    operands = [dem._operand(x) for x in inputs]
    result = ufunc(*operands, **kwargs)
    if isinstance(result, tuple):
        return tuple(_as_dem(dem, r) for r in result)
    return _as_dem(dem, result)


def _as_dem(dem: DEM, values: object) -> DEM | object:
    if isinstance(values, da.Array) and values.shape == dem.shape:
        return dem._like(dem.to_xarray().copy(data=values))
    return values


def apply_array_function(dem: DEM, func: Callable[..., object], args: Sequence[object],
                         kwargs: dict[str, object]) -> object:
    """``func(*args, **kwargs)`` for a numpy function called on a DEM, with upstream's meaning:
    a DEM when the result keeps the DEM's shape, the value(s) otherwise; ``NotImplemented``
    for functions upstream does not handle."""
    name = func.__name__
    if name not in HANDLED_FUNCTIONS:
        return NotImplemented
    first = args[0]
    if name in _LAZY_REDUCTIONS and first is dem and len(args) == 1 and set(kwargs) <= {"axis", "ddof"}:
        return _reduce(dem, _LAZY_REDUCTIONS[name], kwargs)
    values = [_values(a) for a in args[:2]]
    if name in ("median", "nanmedian"):
        func, values, rest = np.ma.median, values[:1], list(args[1:])
    elif name in ("percentile", "nanpercentile", "quantile", "nanquantile"):
        values, rest = [np.ma.asarray(values[0]).compressed()], list(args[1:])
    else:
        rest = list(args[2:]) if name not in _ONE_INPUT else list(args[1:])
        if name in _ONE_INPUT:
            values = values[:1]
    out = func(*values, *rest, **kwargs)
    if isinstance(out, tuple):
        return tuple(_back(dem, o) for o in out)
    return _back(dem, out)


_ONE_INPUT = frozenset(handled_array_funcs) - {
    "logical_and", "logical_or", "logical_xor", "allclose", "isclose", "array_equal", "array_equiv", "greater",
    "greater_equal", "less", "less_equal", "equal", "not_equal"}


def _is_dem(obj: object) -> bool:
    return callable(getattr(obj, "to_xarray", None)) and callable(getattr(obj, "_like", None))


def _values(obj: object) -> object:
    """A DEM's (or geoutils Raster's) masked array; anything else as it is."""
    if _is_dem(obj) or type(obj).__name__ in ("Raster", "Mask"):
        return obj.data  # type: ignore[attr-defined]
    return obj


def _reduce(dem: DEM, reduction: Callable[..., da.Array], kwargs: dict[str, object]) -> object:
    out = np.asarray(reduction(dem.to_xarray().data, **kwargs).compute())
    return out[()] if out.ndim == 0 else np.ma.masked_invalid(out)


def _back(dem: DEM, out: object) -> object:
    """A result of the DEM's shape as a DEM (upstream recasts it to a Raster), else the value."""
    if isinstance(out, np.ndarray) and out.shape == dem.shape:
        return dem.copy(new_array=out)
    return out


def filled_values(values: np.ndarray) -> np.ndarray:
    """A (masked) array as the plain array a DEM holds: booleans with masked = False, numbers as
    floats (float32 at least) with masked = NaN; squeezed to 2-D.

    Examples
    --------
    >>> filled_values(np.ma.masked_equal(np.array([[1, 2], [3, 4]]), 2)).tolist()
    [[1.0, nan], [3.0, 4.0]]
    """
    if np.asarray(values).dtype == bool:
        return np.array(np.ma.filled(values, False)).squeeze()  # a copy, never the caller's array
    as_float = np.ma.asarray(values).astype(np.result_type(np.asarray(values).dtype, np.float32))
    return np.asarray(np.ma.filled(as_float, np.nan)).squeeze()


def index_to_mask(index: object, shape: tuple[int, int]) -> np.ndarray:
    """The boolean array of ``shape`` that is True where a numpy ``index`` (slices, integer
    arrays, ``np.where``'s tuple) selects; one :class:`~xdem.errors.InputError` line otherwise.

    Examples
    --------
    >>> index_to_mask((slice(0, 1), 1), (2, 2)).tolist()
    [[False, True], [False, False]]
    """
    chosen = np.zeros(shape, dtype=bool)
    try:
        chosen[index] = True  # type: ignore[call-overload]
    except (IndexError, TypeError, ValueError) as exc:
        raise InputError(f"cannot index a DEM with {index!r}: {exc}") from None
    return chosen
