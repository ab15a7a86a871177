"""Per-glacier tables of a dDEM, out of core: the first pass and the binned pass of hypsometric filling.

A glacier index map (0 off glacier, ``k > 0`` on glacier ``k``), the elevation change and the
reference elevation are three aligned 2-D dask arrays. :func:`glacier_stats` gives, per glacier
present, its pixel counts and elevation range (one pass); :func:`binned_stats` gives, per glacier
and elevation bin, the exact count, median and sums of the valid elevation changes (a few passes,
:func:`xdem.volume._tables.group_medians`); :func:`model_values` evaluates per-glacier curves of
elevation (a pointwise, lazy map). Tables are sized by the glaciers and bins, never the pixels.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial

import dask.array as da
import numpy as np

from xdem.volume._binning import bins_table, extrapolated, interpolate_hypsometric_bins
from xdem.volume._tables import GroupStats, group_medians, keyed_reduce, tree_table

__all__ = ["GlacierStats", "Bins", "Curves", "glacier_stats", "binned_stats", "model_values", "curves_from_bins"]

_STAT_OPS = ("sum", "sum", "sum", "min", "max", "min", "max")


@dataclass(frozen=True)
class GlacierStats:
    """Per glacier present (``labels``, sorted): pixels, pixels with a reference elevation, pixels
    with both values (``inlier``), elevation range of all and of the inlier pixels."""

    labels: np.ndarray
    n_pixels: np.ndarray
    n_zvalid: np.ndarray
    n_inlier: np.ndarray
    zmin_all: np.ndarray
    zmax_all: np.ndarray
    zmin_inlier: np.ndarray
    zmax_inlier: np.ndarray

    @property
    def coverage(self) -> np.ndarray:
        """Fraction of each glacier's pixels with a valid elevation change (and reference)."""
        return self.n_inlier / np.maximum(self.n_pixels, 1)


def _stats_kernel(labels: np.ndarray, dh: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lab = labels.ravel()
    on = lab > 0
    lab, v, zz = lab[on], dh.ravel()[on], z.ravel()[on].astype(np.float64)
    zf = np.isfinite(zz)
    inl = zf & np.isfinite(v)
    cols = np.column_stack([np.ones(lab.size), zf, inl, np.where(zf, zz, np.inf), np.where(zf, zz, -np.inf),
                            np.where(inl, zz, np.inf), np.where(inl, zz, -np.inf)])
    return keyed_reduce(lab, cols, _STAT_OPS)


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return keyed_reduce(np.concatenate([p[0] for p in parts]),
                        np.concatenate([p[1].reshape(-1, len(_STAT_OPS)) for p in parts]), _STAT_OPS)


def glacier_stats(labels: da.Array, dh: da.Array, z: da.Array) -> GlacierStats:
    """One pass: the :class:`GlacierStats` of every glacier of the index map."""
    keys, cols = tree_table(_stats_kernel, [labels, dh, z], _merge)
    n = cols.astype(np.float64)
    return GlacierStats(labels=keys, n_pixels=n[:, 0].astype(np.int64), n_zvalid=n[:, 1].astype(np.int64),
                        n_inlier=n[:, 2].astype(np.int64), zmin_all=n[:, 3], zmax_all=n[:, 4], zmin_inlier=n[:, 5],
                        zmax_inlier=n[:, 6])


@dataclass(frozen=True)
class Bins:
    """Elevation bin edges of some glaciers: glacier ``labels[i]`` has the edges
    ``edges[estart[i]:estart[i + 1]]`` and the groups ``gstart[i]`` onwards."""

    labels: np.ndarray
    edges: np.ndarray
    estart: np.ndarray
    gstart: np.ndarray

    @classmethod
    def of(cls, labels: np.ndarray, edges: list[np.ndarray]) -> Bins:
        sizes = np.array([e.size for e in edges], dtype=np.int64)
        estart = np.r_[0, np.cumsum(sizes)]
        gstart = np.r_[0, np.cumsum(sizes - 1)]
        flat = np.concatenate(edges) if edges else np.zeros(0)
        return cls(labels=np.asarray(labels, dtype=np.int64), edges=flat, estart=estart, gstart=gstart)

    def edges_of(self, i: int) -> np.ndarray:
        return self.edges[self.estart[i]:self.estart[i + 1]]

    @property
    def n_groups(self) -> int:
        return int(self.gstart[-1])


def _positions(lab: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Index in ``labels`` of each pixel's glacier (-1: not among them)."""
    if labels.size == 0:
        return np.full(lab.shape, -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(labels, lab), labels.size - 1)
    return np.where(labels[pos] == lab, pos, -1)


def _bin_groups(labels: np.ndarray, dh: np.ndarray, z: np.ndarray, *, bins: Bins) -> tuple[np.ndarray, np.ndarray]:
    """Group (glacier x bin) and value of every valid pixel of the binned glaciers (np.digitize's bins)."""
    lab, v, zz = labels.ravel(), dh.ravel().astype(np.float64), z.ravel().astype(np.float64)
    pos = _positions(lab, bins.labels)
    pick = np.flatnonzero((pos >= 0) & np.isfinite(v) & np.isfinite(zz))
    pick = pick[np.argsort(pos[pick], kind="stable")]
    p = pos[pick]
    groups, values = [], []
    for i, s, e in _runs(p):
        e_i = bins.edges_of(i)
        idx = np.digitize(zz[pick[s:e]], e_i) - 1
        ok = (idx >= 0) & (idx < e_i.size - 1)
        groups.append(bins.gstart[i] + idx[ok])
        values.append(v[pick[s:e]][ok])
    if not groups:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(groups).astype(np.int64), np.concatenate(values)


def _runs(p: np.ndarray) -> list[tuple[int, int, int]]:
    """``(value, start, end)`` of the runs of a sorted integer array."""
    if p.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    ends = np.r_[starts[1:], p.size]
    return [(int(p[s]), int(s), int(e)) for s, e in zip(starts, ends)]


def binned_stats(labels: da.Array, dh: da.Array, z: da.Array, bins: Bins) -> GroupStats:
    """Exact per glacier and bin statistics of the valid elevation changes (groups of ``bins``)."""
    return group_medians(partial(_bin_groups, bins=bins), [labels, dh, z], bins.n_groups)


@dataclass(frozen=True)
class Curves:
    """Per glacier (``labels``, sorted) a piecewise-linear curve of elevation, knots
    ``x[start[i]:start[i + 1]]``, ``y[...]`` (two or more), extended linearly beyond its ends."""

    labels: np.ndarray
    x: np.ndarray
    y: np.ndarray
    start: np.ndarray

    @classmethod
    def of(cls, curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> Curves:
        keys = sorted(curves)
        xs = [curves[k][0] for k in keys]
        ys = [curves[k][1] for k in keys]
        start = np.r_[0, np.cumsum([x.size for x in xs])].astype(np.int64)
        return cls(labels=np.asarray(keys, dtype=np.int64), x=np.concatenate(xs) if xs else np.zeros(0),
                   y=np.concatenate(ys) if ys else np.zeros(0), start=start)


def _model_block(labels: np.ndarray, z: np.ndarray, *, curves: Curves) -> np.ndarray:
    out = np.full(labels.shape, np.nan)
    flat_out = out.reshape(-1)
    lab, zz = labels.ravel(), z.ravel().astype(np.float64)
    pos = _positions(lab, curves.labels)
    pick = np.flatnonzero((pos >= 0) & np.isfinite(zz))
    pick = pick[np.argsort(pos[pick], kind="stable")]
    for i, s, e in _runs(pos[pick]):
        sl = slice(curves.start[i], curves.start[i + 1])
        flat_out[pick[s:e]] = extrapolated(zz[pick[s:e]], curves.x[sl], curves.y[sl])
    return out


def model_values(labels: da.Array, z: da.Array, curves: Curves) -> da.Array:
    """Lazy: each glacier's curve at the reference elevation (NaN off the glaciers with a curve)."""
    return da.map_blocks(_model_block, labels, z, curves=curves, dtype=np.float64, meta=np.empty((0, 0)))


def curves_from_bins(stats: GroupStats, bins: Bins, *, count_threshold: int | None = None
                     ) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], int]:
    """Upstream's curve of each binned glacier: the bins' medians, the empty ones interpolated along
    elevation (:func:`interpolate_hypsometric_bins`), through the middles of the bins with a value.
    A glacier with one bin with values gets that value at every elevation. Returns the curves
    and the number of glaciers left without one (no bin with values)."""
    curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    skipped = 0
    for i, label in enumerate(bins.labels):
        g = slice(bins.gstart[i], bins.gstart[i + 1])
        table = bins_table(stats.median[g].copy(), stats.count[g], bins.edges_of(i))
        if count_threshold is not None and count_threshold > 1:
            table.loc[table["count"] < count_threshold, "value"] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = interpolate_hypsometric_bins(table)
        x, y = np.asarray(table.index.mid, dtype=np.float64), table["value"].to_numpy(dtype=np.float64)
        ok = np.isfinite(y)
        if not ok.any():
            skipped += 1
        elif np.count_nonzero(ok) == 1:  # one bin with values: its value at every elevation
            curves[int(label)] = (np.r_[x[ok] - 1.0, x[ok] + 1.0], np.r_[y[ok], y[ok]])
        else:
            curves[int(label)] = (x[ok], y[ok])
    return curves, skipped
