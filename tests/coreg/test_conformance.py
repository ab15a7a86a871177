"""Every registered coregistration method passes the shared conformance checker
(:func:`xdem.testing.check_coreg`): a method is built as ``cls(subsample=5000)`` unless
:data:`FACTORIES` says how (bins, steps, a wrapped method), so a new method is checked here
without an entry."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import xdem
from xdem.coreg import METHODS
from xdem.examples import example_pair
from xdem.testing import CHECKS, check_coreg

C = xdem.coreg
N = 5000
#: The methods that ``cls(subsample=N)`` does not build well for the 400 x 400 example pair.
FACTORIES = {
    "directionalbias": lambda: C.DirectionalBias(subsample=N, bin_sizes=20, fit_or_bin="bin"),
    "terrainbias": lambda: C.TerrainBias(subsample=N, bin_sizes=10),
    "coregpipeline": lambda: C.CoregPipeline([C.NuthKaab(subsample=N), C.Deramp(subsample=N)]),
    "blockwisecoreg": lambda: C.BlockwiseCoreg(C.NuthKaab(subsample=N), block_size=200),
    "cpd": lambda: C.CPD(subsample=300, max_iterations=10),  # every pair of points per iteration: a small cloud
}


#: Transforms that are given rather than fitted (``fit`` refuses): checked by test_given_transform.
GIVEN = {
    "rigidtransform": lambda ref: C.RigidTransform.from_rotations(
        0.01, -0.02, 0.2, translation=(1.5, -2.0, 0.3), crs=ref.rio.crs,
        centroid=(float(ref.x.mean()), float(ref.y.mean()), 100.0)),
}


def _factory(name: str) -> Callable[[], C.Coreg]:
    """How the checker builds method ``name``: its entry in :data:`FACTORIES`, else ``cls(subsample=N)``."""
    return FACTORIES.get(name) or (lambda: METHODS[name](subsample=N))


#: Every registered method but the given transforms (at import: the package's methods).
FITTED = sorted(set(METHODS) - set(GIVEN))


def test_every_registered_method_is_checked():
    assert set(FITTED) | set(GIVEN) == set(METHODS) and set(FACTORIES) <= set(FITTED)
    assert not set(FACTORIES) & set(GIVEN)
    assert all(type(_factory(name)()) is METHODS[name] for name in FITTED)


@pytest.mark.parametrize("name", sorted(GIVEN))
def test_given_transform(name):
    """A given transform: fit refuses clearly; apply is lazy, chunk-independent, and survives JSON."""
    import dask
    import numpy as np

    from xdem.errors import InputError
    from xdem.testing import _Counter

    ref, tba, _ = example_pair(chunks=128)
    t = GIVEN[name](ref)
    with pytest.raises(InputError, match="given, not fitted"):
        METHODS[name]().fit(ref, tba)
    with _Counter() as counter:
        out = t.apply(tba)
    assert counter.count == 0
    base = out.values
    assert np.isfinite(base).mean() > 0.9
    again = C.Coreg.from_json(t.to_json())
    assert type(again) is type(t)
    np.testing.assert_array_equal(again.to_matrix(), t.to_matrix())
    for chunks in (64, 150):
        with dask.config.set(scheduler="synchronous"):
            other = t.apply(tba.chunk(chunks)).values
        np.testing.assert_allclose(other, base, atol=1e-6, rtol=0, equal_nan=True)


@pytest.mark.parametrize("name", FITTED)
def test_method_passes_the_conformance_checker(name):
    ref, tba, _ = example_pair(chunks=128, noise=0.05, holes=3)
    kw = {"bias_vars": {"elevation": ref}} if METHODS[name].needs_vars else {}
    assert check_coreg(_factory(name), ref=ref, tba=tba, fit_kwargs=kw) == list(CHECKS)


def test_the_checker_catches_a_constructor_that_validates():
    class Strict(C.VerticalShift):
        def __init__(self, *, subsample: float | int = 1.0, random_state: int | None = None) -> None:
            if not isinstance(subsample, (int, float)) or subsample <= 0:
                raise ValueError("bad subsample")
            super().__init__(subsample=subsample, random_state=random_state)

    with pytest.raises(AssertionError, match="constructors must only store"):
        check_coreg(lambda: Strict(subsample=2000), chunkings=(128,))


def test_the_checker_catches_a_fit_that_rewrites_its_parameters():
    class Rewrites(C.VerticalShift):
        def _fit(self, data):
            super()._fit(data)
            self.subsample = 10

    with pytest.raises(AssertionError, match="changed the hyper-parameter subsample"):
        check_coreg(lambda: Rewrites(subsample=2000), chunkings=(128,))
