"""Every registered coregistration method passes the shared conformance checker
(:func:`xdem.testing.check_coreg`); a method added to ``METHODS`` without a factory here fails."""

from __future__ import annotations

import pytest

import xdem
from xdem.coreg import METHODS
from xdem.examples import example_pair
from xdem.testing import CHECKS, check_coreg

C = xdem.coreg
N = 5000
FACTORIES = {
    "verticalshift": lambda: C.VerticalShift(subsample=N),
    "nuthkaab": lambda: C.NuthKaab(subsample=N),
    "deramp": lambda: C.Deramp(subsample=N),
    "nuthkaabderamp": lambda: C.NuthKaabDeramp(subsample=N),
    "biascorr": lambda: C.BiasCorr(subsample=N),
    "directionalbias": lambda: C.DirectionalBias(subsample=N, bin_sizes=20, fit_or_bin="bin"),
    "terrainbias": lambda: C.TerrainBias(subsample=N, bin_sizes=10),
    "coregpipeline": lambda: C.CoregPipeline([C.NuthKaab(subsample=N), C.Deramp(subsample=N)]),
}


def test_every_registered_method_has_a_factory():
    assert set(FACTORIES) == set(METHODS)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_method_passes_the_conformance_checker(name):
    ref, tba, _ = example_pair(chunks=128, noise=0.05, holes=3)
    kw = {"bias_vars": {"elevation": ref}} if METHODS[name].needs_vars else {}
    assert check_coreg(FACTORIES[name], ref=ref, tba=tba, fit_kwargs=kw) == list(CHECKS)


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
