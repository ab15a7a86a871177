"""Plain numpy kernels shared by several methods (each works on one chunk or one sample).

- :mod:`xdem.kernels.interp`: NaN-local interpolation (shift a block, evaluate points in windows);
- :mod:`xdem.kernels.warp`: NaN-local interpolation of a source window for the warp;
- :mod:`xdem.kernels.surface`: polynomial surfaces of normalised coordinates;
- :mod:`xdem.kernels.nuth_kaab`: one Nuth & Kääb estimate of a horizontal shift;
- :mod:`xdem.kernels.lzd`: one least-squares step of LZD (rigid: 3 rotations, 3 translations);
- :mod:`xdem.kernels.robust`: NMAD, sort-based group-by and bin indices.
"""

from __future__ import annotations

import os
import sys
import tempfile

__all__: list[str] = []


def _writable(folder: str) -> bool:
    """Whether ``folder`` can be created and written (numba's own test of a cache folder)."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def numba_cache_fallback(package_dir: str, user_cache: str) -> str | None:
    """A folder for numba's cache when neither of its own is writable, else ``None``.

    The compiled loops are cached (``cache=True``) in ``__pycache__`` beside the sources, or, in
    a read-only install, in the user's cache folder (``~/.cache/numba``). With neither writable
    (a read-only image with a read-only home), numba refuses to define a cached function and
    importing a kernel fails: these are then cached in the temporary folder, per user.

    Examples
    --------
    >>> numba_cache_fallback(tempfile.gettempdir(), "/dev/null/numba") is None  # the sources' folder is writable
    True
    >>> numba_cache_fallback("/dev/null/xdem", "/dev/null/numba").startswith(tempfile.gettempdir())
    True
    """
    if _writable(os.path.join(package_dir, "__pycache__")) or _writable(user_cache):
        return None
    return os.path.join(tempfile.gettempdir(), f"xdem-numba-cache-{os.getuid()}")


def _use_a_writable_numba_cache() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    user_cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "numba")
    folder = numba_cache_fallback(os.path.dirname(__file__), user_cache)
    if folder is None:
        return
    os.environ["NUMBA_CACHE_DIR"] = folder  # read when numba is imported
    if "numba" in sys.modules:  # imported already: numba reads its config at each cached definition
        sys.modules["numba"].core.config.CACHE_DIR = folder


_use_a_writable_numba_cache()
