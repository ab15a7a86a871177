"""Remote DEM sources: HTTP(S) URLs and GDAL virtual paths (``/vsicurl/``, ``/vsi...``).

``http://`` and ``https://`` URLs are read through GDAL's ``/vsicurl/``; ``/vsi...`` paths
pass through; object-store URLs (``s3://``, ``gs://``, ``az://``...) are recognised and
refused with one line (not supported yet); anything else is a local path. Messages never
show a password: ``user:password@`` is removed from URLs (:func:`redact`).

Examples
--------
>>> gdal_path("https://example.org/dem.tif")
'/vsicurl/https://example.org/dem.tif'
>>> is_remote("/vsicurl/https://example.org/dem.tif"), is_remote("dem.tif")
(True, False)
>>> redact("https://me:secret@example.org/dem.tif")
'https://***@example.org/dem.tif'
"""

from __future__ import annotations

import os
import re

from xdem.errors import InputError

__all__ = ["is_remote", "gdal_path", "redact", "check_remote", "HTTP_OPTIONS"]

_HTTP = ("http://", "https://")
#: Object-store schemes recognised but not read yet (issue 25).
_LATER = ("s3://", "gs://", "gcs://", "az://", "abfs://", "abfss://", "azure://", "oss://", "swift://", "ftp://")
#: GDAL options for COGs over HTTP: no directory listing when opening a file.
HTTP_OPTIONS = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR"}


def _text(source: str | os.PathLike[str]) -> str:
    return os.fspath(source)


def is_remote(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` is a URL (``scheme://``) or a GDAL virtual path (``/vsi...``), not a local path."""
    text = _text(source)
    return re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*://", text) is not None or text.startswith("/vsi")


def redact(text: str) -> str:
    """``text`` with the ``user:password@`` (or ``user@``) of any URL in it replaced by ``***@``."""
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@", r"\1***@", text)


def gdal_path(source: str | os.PathLike[str]) -> str:
    """The path GDAL opens for ``source``: ``/vsicurl/<url>`` for an HTTP(S) URL, else unchanged.

    Raises
    ------
    xdem.errors.InputError
        ``source`` is an object-store URL (``s3://``...), not supported yet.
    """
    text = _text(source)
    low = text.lower()
    if low.startswith(_LATER) or re.match(r"[a-z][a-z0-9+.-]*://", low) and not low.startswith(_HTTP):
        raise InputError(f"'{redact(text)}': {text.split('://')[0]}:// URLs are not supported yet (issue 25); "
                         "only local paths, http(s):// URLs and GDAL /vsicurl/ paths are")
    if low.startswith(_HTTP):
        return "/vsicurl/" + text
    return text


def _answer(message: str) -> str:
    code = re.search(r"(?:HTTP (?:response )?code|HTTP error code)\s*:?\s*(\d{3})", message)
    if code:
        return f"HTTP {code.group(1)}"
    return redact(message.strip().splitlines()[0] if message.strip() else "no answer")


_FIXES = {"HTTP 404": "check the URL", "HTTP 403": "check the URL and the access rights (credentials, "
          "GDAL_HTTP_USERPWD or GDAL_HTTP_HEADERS)", "HTTP 401": "give credentials (GDAL_HTTP_USERPWD or "
          "GDAL_HTTP_HEADERS)"}


def check_remote(source: str | os.PathLike[str], *, label: str = "DEM") -> str:
    """Ask the server for ``source`` (GDAL opens its header) and return its GDAL path.

    Parameters
    ----------
    source
        An HTTP(S) URL or a ``/vsi...`` path.
    label
        What the source is, for the message (``"reference"``...).

    Raises
    ------
    xdem.errors.InputError
        The server refused or does not have it: one line naming the URL (without password) and
        the server's answer (``HTTP 404``, ``HTTP 403``...).
    """
    import rasterio  # lazy: xdem.workflows.request is imported by commands that must start fast
    from rasterio.errors import RasterioIOError

    path = gdal_path(source)
    try:
        with rasterio.Env(**HTTP_OPTIONS), rasterio.open(path):
            pass
    except RasterioIOError as exc:
        answer = _answer(str(exc))
        fix = _FIXES.get(answer, "check the URL and that the server is reachable")
        url = re.sub(r"^/vsicurl/(?=https?://)", "", _text(source))
        said = f"the server answered {answer}" if answer.startswith("HTTP ") else f"no answer: {answer}"
        raise InputError(f"{label} not readable: '{redact(url)}' ({said}); {fix}") from None
    return path
