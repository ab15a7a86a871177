"""A new method is one kernel, one estimator module and one test file: this file is all three.

``TrimmedShift`` (the vertical shift as a trimmed mean of ``dh``) is written here the way a
method of the package is (DESIGN.md; docs/how_it_works.rst "A method in one place"): a numpy
kernel on a 1-D sample, an estimator class declaring its capabilities, owning both fit routes
(``_fit`` on a DEM pair through :func:`xdem.sampling.sample_valid`, ``_fit_points`` through
:class:`xdem.coreg._point_sample.PointSample`) and registered with
:func:`xdem.coreg.base.register`. Nothing else of the package is edited, and the method is then
named by :func:`xdem.coreg.from_spec`, listed by :func:`xdem.coreg.describe_methods`, read by the
verdict, saved and loaded as JSON, and passes the conformance checker.

Truth: the example pair moved vertically only (``mode="transform"``, no horizontal shift) and the
analytic terrain under point tracks moved by a known vertical shift: a trimmed mean of exact
``dh`` is that shift to float precision (1e-4 m with noise-free data).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from point_tracks import shifted

import xdem
from xdem.coreg import METHODS, AffineCoreg, from_spec
from xdem.coreg._data import FitData, PointFitData
from xdem.coreg._point_sample import PointSample
from xdem.coreg.base import register
from xdem.coreg.spec import describe_methods
from xdem.sampling import sample_valid
from xdem.testing import CHECKS, check_coreg
from xdem.verdict_checks import Capability, capability


def trimmed_mean(values: np.ndarray, *, cut: float) -> float:
    """The kernel: mean of the finite values between the ``cut`` and ``1 - cut`` quantiles."""
    v = np.sort(values[np.isfinite(values)])
    k = int(cut * len(v))
    return float(v[k:len(v) - k].mean())


class TrimmedShift(AffineCoreg):
    """Vertical shift: the trimmed mean of ``dh = tba - ref`` (``cut`` off each end)."""

    tags = AffineCoreg.tags.but(fits_points=True)
    resampling = "bilinear"

    def __init__(self, *, cut: float = 0.1, subsample: float | int = 20_000, random_state: int | None = None) -> None:
        self.cut = cut
        self.subsample = subsample
        self.random_state = random_state

    def _fit(self, data: FitData) -> None:
        s = sample_valid(data.valid(), {"dh": data.tba.data - data.ref.data}, subsample=self.subsample,
                         random_state=self.random_state, min_count=10, what="TrimmedShift")
        self.shift_x_, self.shift_y_ = 0.0, 0.0
        self.shift_z_ = -trimmed_mean(s["dh"], cut=float(self.cut))

    def _fit_points(self, data: PointFitData) -> None:
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state,
                                     what="TrimmedShift")
        dh, fin = ps.dh(need=10)
        ok = ps.inliers(dh, fin)
        self.shift_x_, self.shift_y_ = 0.0, 0.0
        self.shift_z_ = -trimmed_mean(dh[ok], cut=float(self.cut))
        vars(self).update(ps.counts(fin, ok))


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    """Registered for this module only (the registry is the package's: other modules see it unchanged)."""
    register(TrimmedShift)
    yield
    METHODS.pop("trimmedshift")


def test_the_kernel_trims_both_ends():
    assert trimmed_mean(np.array([-100.0, 1.0, 2.0, 3.0, np.nan, 100.0]), cut=0.2) == 2.0


def test_the_new_method_is_named_listed_and_read_by_the_verdict():
    model = from_spec("trimmedshift", subsample=5000)
    assert type(model) is TrimmedShift and model.subsample == 5000
    assert "TrimmedShift" in {m["class"] for m in describe_methods()}
    assert capability({"method": "TrimmedShift"}) == Capability(horizontal=False, median=False)
    pipe = from_spec("nuthkaab+trimmedshift")
    assert [type(s).__name__ for s in pipe.steps] == ["NuthKaab", "TrimmedShift"]


def test_the_new_method_fits_a_pair_and_points_to_truth(track_points):
    ref, tba, truth = xdem.examples.example_pair(mode="transform", shift_x=0.0, shift_y=0.0, chunks=128)
    fitted = TrimmedShift().fit(ref, tba)
    assert fitted.shift_z_ == pytest.approx(truth["shift_z"], abs=1e-4)
    dem = shifted((0.0, 0.0, 2.5))
    on_points = TrimmedShift().fit(track_points, dem, z_column="h")
    assert on_points.to_translations() == pytest.approx((0.0, 0.0, -2.5), abs=1e-3)
    assert on_points.n_points_ == len(track_points) and on_points.n_outside_ == 0
    again = xdem.coreg.Coreg.from_json(fitted.to_json())
    assert type(again) is TrimmedShift and again.shift_z_ == fitted.shift_z_


def test_the_new_method_passes_the_conformance_checker():
    assert check_coreg(lambda: TrimmedShift(subsample=5000), chunkings=(128,)) == list(CHECKS)
