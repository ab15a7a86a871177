"""Upstream xdem 0.2.3's calling conventions of ``Coreg.fit``/``apply``, mapped onto ours.

Upstream (``xdem/coreg/base.py`` at v0.2.3) takes ``fit(reference_elev, to_be_aligned_elev,
inlier_mask, bias_vars, weights, subsample, transform, crs, area_or_point, z_name,
random_state)`` positionally; 2-D arrays (plain or masked) with ``transform=``/``crs=``, and
``apply`` of an array returns ``(array, transform)``. Upstream raises ``NotImplementedError``
for ``weights``. ``Coreg.meta`` is upstream's nested ``CoregDict`` layout
(``inputs``/``outputs`` then ``random``, ``fitorbin``, ``iterative``, ``specific``, ``affine``),
here a read-only view built from the hyper-parameters and the learned attributes; as upstream,
``outputs["affine"]["matrix"]`` of a rigid fit is about ``outputs["affine"]["centroid"]``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from affine import Affine

from xdem._dem_result import is_dem
from xdem.errors import InputError

if TYPE_CHECKING:
    from xdem.coreg.base import Coreg

__all__ = ["array_dem", "wrap_inputs", "array_result", "meta_view", "overrides", "pick"]

#: Upstream's ``inputs`` sections and the hyper-parameters of ours that fill them.
_INPUT_KEYS: dict[str, tuple[str, ...]] = {
    "random": ("subsample", "random_state"),
    "fitorbin": ("fit_or_bin", "fit_func", "fit_optimizer", "bin_sizes", "bin_statistic", "bin_apply_method",
                 "bias_var_names"),
    "iterative": ("max_iterations", "tolerance"),
    "specific": ("terrain_attribute", "angle", "poly_order"),
    "affine": ("initial_shift", "vshift_reduc_func", "only_translation", "standardize"),
}


#: Upstream's (scipy's) resampling names and ours (rasterio's are the same in both).
_RESAMPLING = {"linear": "bilinear"}


def array_dem(values: np.ndarray, transform: object, crs: object, what: str) -> xr.DataArray:
    """A 2-D (masked) array with upstream's ``transform=``/``crs=`` as a georeferenced DataArray
    (masked values become NaN); a missing transform or CRS is one :class:`~xdem.errors.InputError`."""
    if transform is None or crs is None:
        raise InputError(f"{what} is an array: give its georeferencing too, transform=<affine.Affine> and crs=<CRS>")
    if not isinstance(transform, Affine):
        raise InputError(f"transform must be an affine.Affine, got {type(transform).__name__}")
    arr = np.ma.filled(np.ma.asarray(values).astype(np.float64), np.nan)
    if arr.ndim != 2:
        raise InputError(f"{what} must be a 2-D array, got {arr.ndim} dimensions")
    ny, nx = arr.shape
    x = transform.c + transform.a * (np.arange(nx) + 0.5)
    y = transform.f + transform.e * (np.arange(ny) + 0.5)
    out = xr.DataArray(arr, dims=("y", "x"), coords={"y": y, "x": x})
    geo: xr.DataArray = out.rio.write_crs(crs).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)
    return geo


def _mask_array(mask: np.ndarray, like: xr.DataArray) -> xr.DataArray:
    m = np.asarray(np.ma.filled(mask, False), dtype=bool)
    if m.shape != like.shape:
        raise InputError(f"inlier_mask has shape {m.shape} but the DEMs have {like.shape}")
    out: xr.DataArray = like.copy(data=m)
    return out


def _warn_overridden(value: object, what: str, **given: object) -> None:
    """Upstream's warning: a georeferenced DEM's own ``transform``/``crs`` win over given ones."""
    for name, v in given.items():
        if v is not None:
            warnings.warn(f"'{what}' of type {type(value).__name__} has its own georeferencing, which overrides the "
                          f"given '{name}'", UserWarning, stacklevel=4)


def wrap_inputs(ref: Any, tba: Any, inlier_mask: Any, bias_vars: Mapping[str, Any] | None,
                transform: object, crs: object) -> tuple[Any, Any, Any, dict[str, Any] | None]:
    """Upstream's array inputs as DataArrays on the reference's ``transform``/``crs``; other
    inputs as given. Arrays without georeferencing raise :class:`~xdem.errors.InputError`."""
    grid: xr.DataArray | None = None
    out = []
    for value, what in ((ref, "reference_elev"), (tba, "to_be_aligned_elev")):
        if isinstance(value, np.ndarray):
            value = array_dem(value, transform, crs, what)
            grid = value if grid is None else grid
        elif isinstance(value, xr.DataArray) or is_dem(value):
            _warn_overridden(value, what, transform=transform, crs=crs)
        out.append(value)
    if grid is None and (isinstance(out[0], xr.DataArray) or is_dem(out[0])):
        grid = out[0].to_xarray() if is_dem(out[0]) else out[0]
    mask = inlier_mask
    if isinstance(inlier_mask, np.ndarray):
        if grid is None:
            raise InputError("inlier_mask is an array: give the DEMs as arrays or DataArrays on its grid")
        mask = _mask_array(inlier_mask, grid)
    bv = None
    if bias_vars is not None:
        bv = {}
        for name, v in bias_vars.items():
            bv[name] = array_dem(v, transform, crs, f"bias_vars['{name}']") if isinstance(v, np.ndarray) else v
    return out[0], out[1], mask, bv


def array_result(aligned: xr.DataArray, given: np.ndarray) -> tuple[np.ndarray, Affine]:
    """What upstream's ``apply`` returns for an array: the values (masked where invalid when a
    masked array was given) and the output's transform."""
    values = np.asarray(aligned.values)
    arr: np.ndarray = np.ma.masked_invalid(values) if np.ma.isMaskedArray(given) else values
    return arr, aligned.rio.transform()


def pick(upstream: object, ours: object, names: str) -> object:
    """The one of upstream's and our name for an argument that was given (both: an error)."""
    if upstream is not None and ours is not None:
        raise InputError(f"give {names.replace('/', ' or ')}, not both")
    return ours if upstream is None else upstream


@contextmanager
def overrides(coreg: Coreg, **given: object) -> Iterator[None]:
    """Upstream's ``fit(subsample=..., random_state=...)`` and ``apply(resampling=...)``: those
    hyper-parameters for this call only (upstream overrides the instance's, warning when a
    non-default ``subsample`` was set); the estimator's parameters are restored afterwards.
    A name the estimator does not have is an :class:`~xdem.errors.InputError`."""
    given = {k: v for k, v in given.items() if v is not None}
    names = coreg.get_params(deep=False)
    if "resampling" in given:
        name = getattr(given["resampling"], "name", given["resampling"])  # rasterio's Resampling enum: its name
        given["resampling"] = _RESAMPLING.get(str(name), name)
        if "resampling" not in names and given["resampling"] == coreg.resampling:
            del given["resampling"]  # the method's fixed interpolation, asked for: nothing to change
    missing = [k for k in given if k not in names]
    if missing:
        raise InputError(f"{type(coreg).__name__} has no {missing[0]} parameter to set in this call")
    if not given:
        yield
        return
    before = {k: names[k] for k in given}
    if "subsample" in given:
        default = inspect.signature(type(coreg).__init__).parameters["subsample"].default
        if before["subsample"] != default:
            warnings.warn("subsample passed to fit() overrides the non-default subsample given at instantiation; give "
                          "it in only one place to silence this warning", UserWarning, stacklevel=4)
    coreg.set_params(**given)
    try:
        yield
    finally:
        coreg.set_params(**before)


def _section(pairs: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType({k: v for k, v in pairs.items() if v is not None})


def _affine_outputs(coreg: Coreg) -> dict[str, object]:
    learned: dict[str, Any] = coreg.learned()
    out: dict[str, object] = {}
    if coreg.capabilities.affine and coreg.is_fitted:
        for axis in ("x", "y", "z"):
            if f"shift_{axis}_" in learned:
                out[f"shift_{axis}"] = float(learned[f"shift_{axis}_"])
        centred = "centroid_" in learned  # upstream's matrix is about its centroid (P' = M (P - c) + c)
        try:
            out["matrix"] = coreg.to_matrix(centre="centroid") if centred else coreg.to_matrix()
        except (InputError, AttributeError):  # a step that cannot give one
            pass
        if centred:
            out["centroid"] = tuple(float(v) for v in learned["centroid_"])
    return out


def _upstream_ramp(learned: Mapping[str, Any]) -> np.ndarray:
    """A ramp's ``fit_params`` in upstream's layout (``xdem.fit.polynomial_2d``): ``c`` of
    ``numpy.polynomial.polynomial.polyval2d(col, row, c)``, flattened row-major (``c[i, j]``
    multiplies ``col^i row^j``, pixel indices of the fit's grid), of upstream's ``ref - tba``.
    Ours: ``sum c_k u^i v^j`` of ``tba - ref`` with ``u = (x - x_c) / s = a_0 + a_1 col`` (and
    ``v`` likewise), expanded binomially."""
    x0, dx, y0, dy = (float(v) for v in learned["pixel_axes_"])
    xc, yc = (float(v) for v in learned["center_"])
    s = float(learned["scale_"])
    terms = [(int(i), int(j)) for i, j in learned["terms_"]]
    n = max(max(t) for t in terms)
    a0, a1, b0, b1 = (x0 - xc) / s, dx / s, (y0 - yc) / s, dy / s
    out = np.zeros((n + 1, n + 1))
    for (i, j), c in zip(terms, np.asarray(learned["coefs_"], dtype=np.float64)):
        pu = np.polynomial.polynomial.polypow([a0, a1], i)  # coefficients of col^0..col^i
        pv = np.polynomial.polynomial.polypow([b0, b1], j)
        out[: i + 1, : j + 1] -= c * np.outer(pu, pv)
    return out.ravel()


def _upstream_fit_params(coreg: Coreg, learned: Mapping[str, Any]) -> np.ndarray | None:
    """``fit_params_`` in upstream's layout. Sums of sinusoids: ours model ``tba - ref`` as
    ``c + sum(a sin(w u) + b cos(w u))`` of the standardized variable ``u = (x - centre) / scale``;
    upstream's model ``ref - tba`` as ``sum(amplitude sin(2 pi x / wavelength + phase))`` of ``x``:
    ``(amplitude, wavelength, phase)`` per frequency, the phase shifted by pi for the sign (our
    constant ``c`` has no place there: it stays in ``fit_params_``). Deramp: :func:`_upstream_ramp`.
    Other functions: ours."""
    if "pixel_axes_" in learned and "coefs_" in learned:  # Deramp
        return _upstream_ramp(learned)
    p = learned.get("fit_params_")
    params = coreg.get_params(deep=False)  # the model, from the hyper-parameters (no probing of the estimator)
    name = "sumsin" if "nb_freq" in params else params.get("fit_func")
    if p is None or not (isinstance(name, str) and name.startswith("sumsin")):
        return p
    q = np.asarray(p, dtype=np.float64)
    centre = float(np.ravel(learned.get("var_center_", [0.0]))[0])
    scale = float(np.ravel(learned.get("var_scale_", [1.0]))[0])
    out = []
    for k in range((q.size - 1) // 3):
        a, b, lam = q[1 + 3 * k: 4 + 3 * k]
        # a sin + b cos = hypot(a, b) sin(. + atan2(b, a)); minus that: + pi
        phase = np.arctan2(b, a) + np.pi - 2.0 * np.pi / lam * centre / scale
        out += [float(np.hypot(a, b)), float(lam * scale), float(np.mod(phase, 2.0 * np.pi))]
    return np.asarray(out)


def meta_view(coreg: Coreg) -> Mapping[str, Mapping[str, Mapping[str, object]]]:
    """Upstream's ``Coreg.meta`` layout, read-only, from ``coreg``'s hyper-parameters and learned
    attributes (computed on each access: never a second state).

    Examples
    --------
    >>> import xdem
    >>> vs = xdem.coreg.VerticalShift().fit(*xdem.examples.example_pair()[:2])
    >>> round(vs.meta["outputs"]["affine"]["shift_z"], 6) == round(vs.shift_z_, 6)
    True
    """
    params = coreg.get_params(deep=False)
    if "offset_threshold" in params and params["offset_threshold"] is not None:
        params["tolerance"] = params["offset_threshold"]
    learned = coreg.learned()
    if "bias_var_names" in params:  # upstream: a list, set at fit from the keys of bias_vars if not given
        names: Any = params["bias_var_names"]
        names = learned.get("var_names_") if names is None else names
        params["bias_var_names"] = None if names is None else [str(n) for n in names]
    # a hyper-parameter the estimator has is there even when None (upstream's keys); others are not
    inputs = {sec: MappingProxyType({k: params[k] for k in keys if k in params}) for sec, keys in _INPUT_KEYS.items()}
    outputs = {
        "random": _section({"subsample_final": learned.get("count_")}),
        "fitorbin": _section({"fit_params": _upstream_fit_params(coreg, learned)}),
        "iterative": _section({"last_iteration": learned.get("n_iterations_")}),
        "affine": _section(_affine_outputs(coreg)),
    }
    return MappingProxyType({"inputs": MappingProxyType(inputs), "outputs": MappingProxyType(outputs)})
