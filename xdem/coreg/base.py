"""The :class:`Coreg` base class: scikit-learn style estimators over lazy DEM pairs.

Conventions
-----------
- The constructor only stores hyper-parameters (``get_params``/``set_params``).
- ``fit(ref, tba)`` returns ``self``; learned values end with ``_``.
- ``apply(dem)`` returns a lazy DataArray and computes nothing; before ``fit`` it raises
  :class:`~xdem.errors.NotFittedError`.
- Elevation differences are ``dh = tba - ref`` everywhere.
- A fitted coregistration saves to and loads from JSON and applies to any other DEM.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, cast, overload

import geopandas as gpd
import numpy as np
import xarray as xr
from affine import Affine

from xdem._dem_result import returns_dem_for_dem
from xdem.coreg._data import FitData, PointFitData, SharedPoints, as_dem, prepare_pair, prepare_points
from xdem.coreg._describe import info_text, repr_text
from xdem.coreg._frames import apply_in_frame, frame_of, needs_frame_route
from xdem.coreg._points import apply_to_points
from xdem.coreg._upstream_args import array_dem, array_result, meta_view, overrides, pick, wrap_inputs
from xdem.coreg._upstream_params import check_upstream_fixed
from xdem.coreg.capabilities import Capabilities
from xdem.errors import InputError, NotFittedError
from xdem.io.atomic import write_text_atomic
from xdem.io.jsondoc import jsonable
from xdem.kernels.robust import nmad
from xdem.points.read import is_points_source
from xdem.typing import BiasVars, CRSLike, DEMLike, JSONDict, MaskLike, Params, PointBiasVars, PointsLike
from xdem.warp import FrameOp, Grid, crs_key

__all__ = ["Coreg", "Capabilities", "FitData", "PointFitData", "prepare_pair", "as_dem", "register", "coreg_from_dict",
           "clone", "METHODS"]

#: Registry of coregistration classes by lower-case name (used by JSON loading and the CLI).
METHODS: dict[str, type[Coreg]] = {}


def register(cls: type[Coreg]) -> type[Coreg]:
    """Class decorator adding a :class:`Coreg` subclass to :data:`METHODS`."""
    METHODS[cls.__name__.lower()] = cls
    return cls


class _Flag:
    """A read-only attribute that is one flag of the capabilities: on the class, the declared
    ``tags``; on an estimator, its :attr:`Coreg.capabilities` (on a pipeline: its steps' combined)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Coreg | None, owner: type[Coreg]) -> bool:
        caps = owner.tags if obj is None else obj.capabilities
        return bool(getattr(caps, self.name))


class Coreg:
    """Base class of every coregistration method and of pipelines.

    Subclasses implement ``_fit(data: FitData)`` (set learned attributes ending in ``_``)
    and ``_apply(dem, bias_vars, resample)``, and declare what they can do in ``tags``
    (a :class:`~xdem.coreg.Capabilities`). The hooks below have defaults for a single
    estimator: :attr:`steps` is ``[self]``, :meth:`translation_part` is ``None``,
    :meth:`fit_after` and :meth:`to_matrix` raise; the methods that can override them.
    """

    #: What the method can do, declared as data (inherited and overridden by each class):
    #: read it through :attr:`capabilities`.
    tags: ClassVar[Capabilities] = Capabilities()
    #: ``capabilities.affine``: a rigid transform, translation or rotation (consecutive ones
    #: are merged into one matrix in pipelines and resampled once).
    is_affine = _Flag("affine")
    #: ``capabilities.needs_bias_vars``: ``fit``/``apply`` need ``bias_vars``.
    needs_vars = _Flag("needs_bias_vars")
    #: The interpolation a step that moves the DEM resamples with (its hyper-parameter, when
    #: it has one; ``None``: it does not say).
    resampling: str | None = None
    #: Names of hyper-parameters that are callables (stored by name in JSON).
    _callable_params: ClassVar[tuple[str, ...]] = ()
    #: What each entry of ``history_`` holds, in order (labels of :meth:`info` and of the
    #: JSON document's ``history_columns``); empty for methods without a history.
    history_labels: ClassVar[tuple[str, ...]] = ()

    # --- capabilities and hooks -------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """What this estimator can do (:class:`~xdem.coreg.Capabilities`): its class's declared
        ``tags``; a pipeline combines its steps'.

        Examples
        --------
        >>> import xdem
        >>> xdem.coreg.BiasCorr().capabilities.needs_bias_vars
        True
        """
        return type(self).tags

    @property
    def steps(self) -> list[Coreg]:
        """The steps run in order: ``[self]`` for a single estimator (a pipeline: its steps)."""
        return [self]

    def translation_part(self) -> tuple[tuple[float, float, float], bool] | None:
        """For a step that is not affine but holds a translation plus something else, that
        translation and whether it is the whole correction (``(translation, exact)``);
        ``None`` (the default): no such part (see :func:`~xdem.coreg.merged_transform`)."""
        return None

    def fit_after(self, data: FitData, prior: np.ndarray) -> Coreg:
        """Fit starting from the 4 x 4 matrix ``prior`` of the affine steps before this one,
        on the unresampled DEM (methods declaring ``initial_shift``; the others raise)."""
        raise InputError(f"{type(self).__name__} cannot start its fit from an initial shift")

    def to_matrix(self, *, centre: Sequence[float] | Literal["centroid"] | None = None) -> np.ndarray:
        """The 4 x 4 matrix of an affine correction (methods declaring ``affine``; the others raise)."""
        raise InputError(f"{type(self).__name__} is not affine: it is not a single rigid transform")

    # --- scikit-learn style parameters -------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]

    def get_params(self, deep: bool = True) -> Params:
        """Hyper-parameters as given to the constructor (``deep`` adds those of nested
        estimators, e.g. a pipeline's steps, as ``<name>__<parameter>``)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: object) -> Coreg:
        """Set hyper-parameters; returns self. Unknown names raise a clear error. Nothing is
        validated here: values are checked when ``fit`` runs."""
        names = self._param_names()
        for key, value in params.items():
            if key not in names:
                raise InputError(f"{type(self).__name__} has no parameter '{key}'; valid ones: {', '.join(names)}")
            setattr(self, key, value)
        return self

    def clone(self) -> Coreg:
        """A new, unfitted estimator with the same hyper-parameters (deep copies of them)."""
        return clone(self)

    # --- learned state -------------------------------------------------------------------
    def learned(self) -> Params:
        """Learned attributes (names ending with ``_``)."""
        return {k: v for k, v in vars(self).items() if k.endswith("_") and not k.startswith("_")}

    @property
    def is_fitted(self) -> bool:
        """True once ``fit`` has run (or a fitted state was loaded)."""
        return bool(self.learned())

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call .fit(ref, tba) before .apply() "
                "or load a fitted one with Coreg.from_json()"
            )

    def _reset(self) -> None:
        for k in list(self.learned()):
            delattr(self, k)

    # --- public API ----------------------------------------------------------------------
    def fit(
        self,
        reference_elev: DEMLike | PointsLike | np.ndarray | None = None,
        to_be_aligned_elev: DEMLike | PointsLike | np.ndarray | None = None,
        inlier_mask: MaskLike | np.ndarray = None,
        bias_vars: BiasVars | dict[str, np.ndarray] | None = None,
        weights: np.ndarray | None = None,
        subsample: float | int | None = None,
        transform: Affine | None = None,
        crs: CRSLike | None = None,
        area_or_point: Literal["Area", "Point"] | None = None,
        z_name: str | None = None,
        random_state: int | None = None,
        *,
        ref: DEMLike | PointsLike | None = None,
        tba: DEMLike | PointsLike | None = None,
        exclude_mask: MaskLike = None,
        z_column: str | None = None,
        outlier_nmad: float | None = 4.0,
    ) -> Coreg:
        """Estimate the correction that brings ``tba`` onto ``ref``; returns ``self``.

        The arguments are upstream xdem 0.2.3's, in its order (``fit(ref_dem, tba_dem, mask)``
        runs unchanged); ``ref=``/``tba=`` and ``z_column=`` are the same as
        ``reference_elev=``/``to_be_aligned_elev=`` and ``z_name=``.

        Parameters
        ----------
        reference_elev, to_be_aligned_elev
            Reference and to-be-aligned DEMs: paths, DataArrays (numpy or dask), geoutils
            Rasters, or 2-D (masked) numpy arrays on one grid with ``transform``/``crs``.
            ``tba`` is brought onto ``ref``'s grid lazily if needed. Either one may instead
            be points (a GeoDataFrame or a points file, see :func:`xdem.points.read_points`),
            for the methods that fit on points (:class:`~xdem.coreg.VerticalShift`,
            :class:`~xdem.coreg.NuthKaab`): the DEM is evaluated at the points out of core.
        inlier_mask
            Stable terrain to USE: boolean DataArray or array (True = use), raster path
            (non-zero = use), vector file or GeoDataFrame (inside polygons = use).
        bias_vars
            Name -> DEM-like variables (or arrays on the DEMs' grid), for bias corrections.
        weights
            Not implemented (upstream 0.2.3 neither): anything but ``None`` raises.
        subsample, random_state
            For this fit only, instead of the estimator's hyper-parameters (as upstream; a
            warning when the estimator had a non-default ``subsample``).
        transform, crs
            Georeferencing of array inputs (upstream's).
        area_or_point
            Pixel interpretation of array inputs: both are accepted; shifts do not depend on it
            (both DEMs are read the same way).
        z_name, z_column
            Points only: the column holding their elevation (default: the geometries' z, else
            a column ``z``).
        ref, tba
            Our names of the two DEMs (keywords).
        exclude_mask
            Unstable terrain to EXCLUDE (e.g. glacier outlines), same types as ``inlier_mask``.
        outlier_nmad
            Points only: reject points whose ``dh`` is more than this many NMADs from the
            median, iterated (``None``: keep every point); counted in ``n_outliers_``.
        """
        if weights is not None:
            raise InputError("weights are not implemented (nor in upstream xdem 0.2.3): leave weights=None")
        if area_or_point not in (None, "Area", "Point"):
            raise InputError(f"area_or_point must be 'Area', 'Point' or None, got {area_or_point!r}")
        r = pick(reference_elev, ref, "reference_elev/ref")
        t = pick(to_be_aligned_elev, tba, "to_be_aligned_elev/tba")
        if r is None or t is None:
            raise InputError("fit needs two DEMs: fit(reference_elev, to_be_aligned_elev)")
        r, t, mask, bv = wrap_inputs(r, t, inlier_mask, bias_vars, transform, crs)
        zc = cast("str | None", pick(z_name, z_column, "z_name/z_column"))
        with overrides(self, subsample=subsample, random_state=random_state):
            if is_points_source(r) or is_points_source(t):
                pdata = prepare_points(r, t, inlier_mask=mask, exclude_mask=exclude_mask, z_column=zc,
                                       outlier_nmad=outlier_nmad, bias_vars=bv)
                return self.fit_points_prepared(pdata)
            data = prepare_pair(r, t, inlier_mask=mask, exclude_mask=exclude_mask, bias_vars=bv)
            return self.fit_prepared(data)

    @property
    def meta(self) -> Mapping[str, Mapping[str, Mapping[str, object]]]:
        """Upstream xdem's ``meta`` layout (``meta["inputs"]["iterative"]["max_iterations"]``,
        ``meta["outputs"]["affine"]["shift_x"]``...): a read-only view of the hyper-parameters
        and learned attributes, built on each access."""
        return meta_view(self)

    def fit_prepared(self, data: FitData) -> Coreg:
        """Fit on an already prepared :class:`FitData` (used by pipelines)."""
        if self.capabilities.needs_bias_vars and not data.bias_vars:
            raise InputError(f"{type(self).__name__} needs bias_vars, e.g. bias_vars={{'elevation': ref}}")
        check_upstream_fixed(self)
        self._reset()
        self._fit(data)
        self._after_fit()
        self.crs_ = crs_key(data.ref.rio.crs)
        return self

    def _after_fit(self) -> None:
        """Adjust the learned values after ``_fit`` (e.g. upstream's ``NuthKaab(vertical_shift=False)``)."""

    def fit_points_prepared(self, data: PointFitData) -> Coreg:
        """Fit on a DEM and points prepared by :func:`xdem.coreg._data.prepare_points`."""
        if not self.capabilities.fits_points:
            supported = ", ".join(sorted(n for n, c in METHODS.items() if c.tags.fits_points))
            raise InputError(f"{type(self).__name__} does not fit on points yet; methods that do: {supported}")
        if self.capabilities.needs_bias_vars and not data.bias_vars:
            raise InputError(f"{type(self).__name__} needs bias_vars on the DEM's grid, e.g. bias_vars={{'elevation': dem}}")
        check_upstream_fixed(self)
        self._reset()
        self._fit_points(data)
        self._after_fit()
        self.crs_ = crs_key(data.dem.rio.crs)
        return self

    @overload
    def apply(
        self, elev: np.ndarray, bias_vars: BiasVars | dict[str, np.ndarray] | None = None, resample: bool = True,
        resampling: str | None = None, transform: Affine | None = None, crs: CRSLike | None = None, *,
        grid: DEMLike | None = None, dem: DEMLike | None = None,
    ) -> tuple[np.ndarray, Affine]: ...

    @overload
    def apply(
        self, elev: DEMLike | None = None, bias_vars: BiasVars | dict[str, np.ndarray] | None = None,
        resample: bool = True, resampling: str | None = None, transform: Affine | None = None,
        crs: CRSLike | None = None, *, grid: DEMLike | None = None, dem: DEMLike | None = None,
    ) -> xr.DataArray: ...

    @returns_dem_for_dem
    def apply(
        self, elev: DEMLike | np.ndarray | None = None, bias_vars: BiasVars | dict[str, np.ndarray] | None = None,
        resample: bool = True, resampling: str | None = None, transform: Affine | None = None,
        crs: CRSLike | None = None, *, grid: DEMLike | None = None, dem: DEMLike | None = None,
    ) -> xr.DataArray | tuple[np.ndarray, Affine]:
        """Apply the fitted correction to ``elev``; lazy, computes nothing (but for arrays).

        The correction is defined in the reference's CRS and units (``crs_``, the *frame*):
        the result is ``elev``'s points moved by it in that CRS, then resampled. A DEM in
        another CRS (rotated grid axes, feet, degrees) is moved pixel by pixel through the
        frame (:mod:`xdem.warp`, one resampling), not along its own axes.

        Parameters
        ----------
        elev
            The DEM to correct (any ``open_dem`` input), in any CRS; or, as upstream, a 2-D
            (masked) numpy array with ``transform``/``crs``: then the result is upstream's
            ``(array, transform)``, computed.
        bias_vars
            Bias variables on ``elev``'s grid, for methods that need them.
        resample
            Translations: ``False`` returns the exact data on a translated grid instead of
            resampling onto the input grid (``elev`` in the frame's CRS only). Corrections of
            elevations only (``Deramp``, the bias corrections) never resample, so both values
            give the same result; a method that must resample (``NuthKaabDeramp``) raises
            :class:`~xdem.errors.InputError` for ``False``.
        resampling
            For this call, instead of the method's ``resampling`` hyper-parameter (upstream's
            ``"linear"`` is our ``"bilinear"``); methods without one raise for any value.
        transform, crs
            Georeferencing of an array ``elev`` (upstream's).
        grid
            Output grid: ``None`` (default) keeps ``elev``'s grid and CRS; a DEM-like
            (e.g. the reference) gives the output on that grid and CRS.
        dem
            Our former name of ``elev`` (keyword).
        """
        given = pick(elev, dem, "elev/dem")
        if given is None:
            raise InputError("apply needs a DEM: apply(elev)")
        if bias_vars is not None:
            bias_vars = {k: array_dem(v, transform, crs, f"bias_vars['{k}']") if isinstance(v, np.ndarray) else v
                         for k, v in bias_vars.items()}
        bv = cast("BiasVars | None", bias_vars)
        with overrides(self, resampling=resampling):
            if isinstance(given, np.ndarray):
                return array_result(self._apply_dem(array_dem(given, transform, crs, "elev"), bv, resample, grid), given)
            return self._apply_dem(cast(DEMLike, given), bv, resample, grid)

    def _apply_dem(self, dem: DEMLike, bias_vars: BiasVars | None, resample: bool,
                   grid: DEMLike | None) -> xr.DataArray:
        self._check_fitted()
        if isinstance(dem, gpd.GeoDataFrame):
            raise InputError("these are points, not a DEM: move them with .apply_points(points)")
        d = as_dem(dem)
        bv = {k: as_dem(v) for k, v in (bias_vars or {}).items()}
        target = None if grid is None else Grid.of(as_dem(grid))
        if needs_frame_route(self, d, target):
            if not resample:
                raise InputError(
                    f"resample=False keeps the DEM's own grid, which is only possible in the CRS the correction was "
                    f"fitted in ({frame_of(self)}); use resample=True"
                )
            return apply_in_frame(self, d, bv, target)
        return self._apply(d, bv, resample)

    def apply_points(self, points: gpd.GeoDataFrame, *, z_name: str = "z",
                     bias_vars: PointBiasVars | None = None) -> gpd.GeoDataFrame:
        """Move points (a GeoDataFrame in any CRS) by the fitted correction, exactly (no
        resampling): translations, rotations and ramps, in the correction's frame. The
        elevation is the geometries' z, or the column ``z_name`` for 2-D geometries; a moved
        copy is returned. Bias corrections subtract their bias at the points: ``bias_vars``
        gives their variables (name -> a grid, interpolated bilinearly at the points, or an
        array with one value per point); ``DirectionalBias`` takes the along-track coordinate
        of the points and ``TerrainBias("elevation")`` their own elevation.

        Examples
        --------
        >>> import geopandas as gpd, shapely, xdem
        >>> pts = gpd.GeoDataFrame(geometry=[shapely.Point(500.0, 600.0, 10.0)], crs="EPSG:32633")
        >>> t = xdem.coreg.RigidTransform.from_translations(1.0, 2.0, 3.0, crs="EPSG:32633")
        >>> t.apply_points(pts).geometry[0].coords[0]
        (501.0, 602.0, 13.0)
        """
        self._check_fitted()
        return apply_to_points(self, points, z_name=z_name, bias_vars=bias_vars)

    def pop_shared_points(self) -> SharedPoints | None:
        """The subsample this step drew in its last fit, if a pipeline asked it to keep it
        (``FitData.collect_points``), handed over once and then forgotten (it holds windows of
        both DEMs: not kept longer than needed). ``None`` for methods that draw none."""
        points: SharedPoints | None = vars(self).pop("_shared_points", None)
        return points

    def _frame_op(self) -> FrameOp | None:
        """This fitted step as a correction in its frame (horizontal motion, vertical shift,
        ramps), or ``None`` for a step that acts on elevation values and bias variables only."""
        return None

    def _frame_free(self) -> bool:
        """Whether the step gives the same result on any grid and CRS (it uses no coordinates
        or horizontal distances), so that it can be applied on a DEM in another CRS as it is."""
        return False

    def fit_and_apply(
        self,
        reference_elev: DEMLike | np.ndarray | None = None,
        to_be_aligned_elev: DEMLike | np.ndarray | None = None,
        inlier_mask: MaskLike | np.ndarray = None,
        bias_vars: BiasVars | dict[str, np.ndarray] | None = None,
        weights: np.ndarray | None = None,
        subsample: float | int | None = None,
        transform: Affine | None = None,
        crs: CRSLike | None = None,
        area_or_point: Literal["Area", "Point"] | None = None,
        z_name: str | None = None,
        resample: bool = True,
        resampling: str | None = None,
        random_state: int | None = None,
        *,
        ref: DEMLike | None = None,
        tba: DEMLike | None = None,
        exclude_mask: MaskLike = None,
        z_column: str | None = None,
        outlier_nmad: float | None = 4.0,
    ) -> xr.DataArray | tuple[np.ndarray, Affine]:
        """:meth:`fit` then :meth:`apply` of the to-be-aligned DEM (upstream's arguments, in its
        order, and ours as keywords; ``bias_vars``, ``transform``, ``crs`` are given to both);
        lazy, but for arrays: upstream's ``(array, transform)``."""
        self.fit(reference_elev, to_be_aligned_elev, inlier_mask, bias_vars, weights, subsample, transform, crs,
                 area_or_point, z_name, random_state, ref=ref, tba=tba, exclude_mask=exclude_mask,
                 z_column=z_column, outlier_nmad=outlier_nmad)
        target = pick(to_be_aligned_elev, tba, "to_be_aligned_elev/tba")
        return self.apply(cast("DEMLike | np.ndarray", target), bias_vars, resample, resampling, transform, crs)

    def __add__(self, other: Coreg) -> Coreg:
        if not isinstance(other, Coreg):
            return NotImplemented
        # the pipeline class registers itself under this name (its module imports this one)
        pipeline = cast(Callable[[list[Coreg]], Coreg], METHODS["coregpipeline"])
        return pipeline([*self.steps, *other.steps])

    # --- description and serialisation ----------------------------------------------------
    def __repr__(self) -> str:
        """The class and the hyper-parameters that differ from their defaults."""
        return repr_text(self)

    @overload
    def info(self, as_str: Literal[False] = ..., *, echo: bool | None = None) -> str | None: ...

    @overload
    def info(self, as_str: Literal[True], *, echo: bool | None = None) -> str: ...

    def info(self, as_str: bool = False, *, echo: bool | None = None) -> str | None:
        """Print a readable summary and return ``None``, as upstream (``as_str=True``: return it
        instead). Upstream's layout first (method, affine or not, fitted or not, ``meta``'s
        inputs and outputs by section), then our hyper-parameters and learned values with
        units, ``history_`` one labelled line per iteration.

        ``echo=False`` (our former keyword) is ``as_str=True``.

        Examples
        --------
        >>> from xdem.examples import example_pair
        >>> ref, tba, _ = example_pair()
        >>> import xdem
        >>> text = xdem.coreg.NuthKaab().fit(ref, tba).info(as_str=True)
        >>> text.splitlines()[1:4]
        ['  Method:       NuthKaab', '  Is affine?    True', '  Fit called?   True']
        >>> [line.strip() for line in text.splitlines() if line.strip().startswith(("shift_x_", "iteration 1"))]
        ['shift_x_ = -3.26996 m', 'iteration 1: shift_x=-3.1207, shift_y=+1.5488 (shift_x, shift_y: m)']
        """
        text = info_text(self)
        if as_str or echo is False:
            return text
        print(text)
        return None

    def to_dict(self) -> JSONDict:
        """JSON-able description: method name, parameters, learned values."""
        params = {}
        for k, v in self.get_params().items():
            if k in self._callable_params and callable(v):
                v = getattr(v, "__name__", repr(v))
            params[k] = jsonable(v)
        return {"method": type(self).__name__, "params": params, "learned": jsonable(self.learned())}

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """JSON text of :meth:`to_dict`; also written to ``path`` if given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            write_text_atomic(path, text + "\n", overwrite=True)  # never a half-written file
        return text

    @classmethod
    def from_dict(cls, doc: JSONDict) -> Coreg:
        """Rebuild a (fitted) coregistration from :meth:`to_dict` output."""
        return coreg_from_dict(doc)

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> Coreg:
        """Load from a JSON file path or JSON text written by :meth:`to_json`."""
        text = str(source)
        if not text.lstrip().startswith("{"):
            p = Path(source)
            if not p.exists():
                raise InputError(f"coregistration JSON file not found: '{p}'")
            text = p.read_text()
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not a coregistration JSON document ({exc})") from exc
        return coreg_from_dict(doc)

    # --- to implement ------------------------------------------------------------------------
    def _fit(self, data: FitData) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_points(self, data: PointFitData) -> None:
        """Fit on points (override in the methods that support them)."""
        raise NotImplementedError  # pragma: no cover - never called: fit_points_prepared checks

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _restore(self, learned: dict[str, Any]) -> None:
        """Set learned attributes from JSON values (override to convert types)."""
        for k, v in learned.items():
            setattr(self, k, v)


def clone(estimator: Coreg) -> Coreg:
    """A new, unfitted estimator of the same class with deep copies of the hyper-parameters
    (a pipeline's steps are cloned too); the original is not touched.

    Examples
    --------
    >>> import xdem
    >>> nk = xdem.coreg.NuthKaab(subsample=1000)
    >>> c = clone(nk)
    >>> c is nk, c.get_params() == nk.get_params(), c.is_fitted
    (False, True, False)
    """
    import copy

    params: dict[str, Any] = {}
    for name, value in estimator.get_params(deep=False).items():
        if isinstance(value, Coreg):
            params[name] = clone(value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Coreg) for v in value):
            params[name] = type(value)(clone(v) for v in value)
        elif callable(value):
            params[name] = value  # functions are shared, not copied
        else:
            params[name] = copy.deepcopy(value)
    steps = params.pop("steps", None)
    make: Callable[..., Coreg] = type(estimator)  # each subclass has its own constructor signature
    return make(steps, **params) if steps is not None else make(**params)


_CALLABLES = {"median": np.median, "mean": np.mean, "nanmedian": np.nanmedian, "nanmean": np.nanmean, "nmad": nmad,
              "std": np.std}


def resolve_callable(value: object) -> object:
    """Turn a stored name such as ``"median"`` back into the numpy function."""
    if isinstance(value, str):
        if value not in _CALLABLES:
            raise InputError(f"unknown function '{value}'; use one of {', '.join(_CALLABLES)}")
        return _CALLABLES[value]
    return value


def coreg_from_dict(doc: JSONDict) -> Coreg:
    """Build a coregistration from its :meth:`Coreg.to_dict` form."""
    if not isinstance(doc, dict) or "method" not in doc:
        raise InputError("not a coregistration document: expected a JSON object with a 'method' key")
    name = str(doc["method"]).lower()
    if name not in METHODS:
        raise InputError(f"unknown coregistration method '{doc['method']}'; known: {', '.join(sorted(METHODS))}")
    cls = METHODS[name]
    if cls.from_dict.__func__ is not Coreg.from_dict.__func__:  # type: ignore[attr-defined]
        return cls.from_dict(doc)  # a method with nested estimators (a pipeline, BlockwiseCoreg) builds itself
    params = dict(doc.get("params", {}))
    for k in cls._callable_params:
        if k in params:
            params[k] = resolve_callable(params[k])
    obj = cls(**params)
    obj._restore(doc.get("learned", {}))
    return obj
