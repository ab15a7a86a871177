"""Bundled example data and a synthetic DEM pair with a known misalignment.

No real pair of two epochs of one area can be shipped, so :func:`example_pair` builds one
from the bundled lidar DEM by moving it by a known horizontal and vertical shift (and,
optionally, a tilt, noise and nodata holes). The truth is then known exactly.

Conventions (see the field notes): the to-be-aligned DEM is

    tba(x, y) = ref(x - dx, y - dy) + dz   (+ tilt + noise, minus holes)

and the translation a coregistration should find, i.e. the one to APPLY to ``tba``, is
``(shift_x, shift_y, shift_z) = (-dx, -dy, -dz)``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xdem.examples._files import (
    DEFAULT_SHIFT,
    UPSTREAM_EXAMPLES,
    available,
    download_longyearbyen_examples,
    get_all_data,
    get_path,
    get_path_test,
)

if TYPE_CHECKING:  # the names as the type checker sees them; at run time: __getattr__
    from xdem.examples.pair import example_pair, write_example_pair

__all__ = ["get_path", "available", "example_pair", "write_example_pair", "DEFAULT_SHIFT", "UPSTREAM_EXAMPLES",
           "get_all_data", "get_path_test", "download_longyearbyen_examples"]


def __getattr__(name: str) -> object:
    # lazy on purpose: `xdem examples --help` and its usage errors need the names of the files only,
    # not the pair's stack (rasterio, xarray, scipy)
    if name in ("example_pair", "write_example_pair"):
        value = getattr(importlib.import_module("xdem.examples.pair"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
