"""JSON documents: one conversion of xdem's values (numpy scalars and arrays, paths, tuples,
non-finite floats) to plain JSON, used by the estimators' ``to_json`` and by the CLI."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONValue

__all__ = ["jsonable"]


def jsonable(value: object) -> JSONValue:
    """``value`` with numpy scalars/arrays, paths and tuples made JSON-able; NaN/inf -> None
    (``null``: strict JSON has no NaN); functions by their name.

    Examples
    --------
    >>> jsonable({"a": np.float32(1.5), "b": (np.nan, 2), "c": np.arange(2)})
    {'a': 1.5, 'b': [None, 2], 'c': [0, 1]}
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return getattr(value, "__name__", repr(value))
