"""Exception and warning hierarchy of xdem.

Every error raised on purpose by xdem derives from :class:`XdemError`, so callers can
catch them all at once. Messages say what is wrong and how to fix it, on one line.
"""

from __future__ import annotations

__all__ = [
    "XdemError",
    "InputError",
    "ReadError",
    "CRSError",
    "OverlapError",
    "NotEnoughDataError",
    "NotFittedError",
    "OutputError",
    "ConvergenceError",
    "ChunkSizeError",
    "XdemWarning",
    "ConvergenceWarning",
    "FlatTerrainWarning",
    "EmptyBinWarning",
]


class XdemError(Exception):
    """Base class of every error raised by xdem."""


class InputError(XdemError, ValueError):
    """An input (file, array, argument) is missing, unreadable or malformed."""


class ReadError(InputError):
    """Reading a file failed after it was opened: a corrupt tile, a missing VRT source."""


class CRSError(InputError):
    """A DEM has no CRS, or a geographic CRS where a projected one is required."""


class OverlapError(InputError):
    """Two DEMs (or a DEM and a mask) do not overlap."""


class NotEnoughDataError(XdemError, ValueError):
    """Too few valid pixels remain after masking to estimate something."""


class NotFittedError(XdemError, AttributeError):
    """A coregistration was applied or queried before ``fit`` was called."""


class OutputError(XdemError, OSError):
    """An output cannot be written (exists, is an input, folder not writable)."""


class ConvergenceError(XdemError, RuntimeError):
    """An iterative method diverged and the user did not accept a partial result."""


class ChunkSizeError(InputError):
    """The requested chunk size is larger than the memory available allows."""


class XdemWarning(UserWarning):
    """Base class of every warning emitted by xdem."""


class ConvergenceWarning(XdemWarning):
    """An iterative method stopped before reaching its tolerance."""


class FlatTerrainWarning(XdemWarning):
    """The terrain is too flat to constrain a horizontal shift."""


class EmptyBinWarning(XdemWarning):
    """Some bins of a binned statistic received too few valid pixels."""
