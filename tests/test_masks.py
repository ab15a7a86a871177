"""Masks burnt from polygons (:mod:`xdem.masks`)."""

from __future__ import annotations

import warnings

import pytest

from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like


def test_threaded_burning_leaves_the_warning_filters_as_they_were():
    """rasterio's rasterize hides a warning inside a ``catch_warnings`` block with "ignore every
    warning"; blocks burnt by several dask threads at once used to interleave those blocks and leave
    that filter installed for the rest of the process (every pass of this test before the fix), so
    that no later warning, xdem's input checks included, was shown. :func:`xdem.masks.burn_shapes`
    burns one block at a time: the filters are as they were, and a warning is still seen."""
    g = glacier_set((400, 400), chunks=20)  # 400 blocks
    labels_like(g.outlines, g.ref).compute(scheduler="sync")  # the imports' own filters, once
    before = list(warnings.filters)
    for _ in range(5):
        labels = labels_like(g.outlines, g.ref).compute(scheduler="threads", num_workers=4)
        assert warnings.filters == before
    assert (labels == g.index.values).all()
    with pytest.warns(UserWarning, match="still shown"):
        warnings.warn("still shown", UserWarning, stacklevel=1)
