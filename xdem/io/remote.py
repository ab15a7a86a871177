"""Remote sources: object-store URLs, HTTP(S) URLs and GDAL virtual paths.

One place maps what a user types to what each reader needs:

- rasters are read by GDAL: ``s3://b/k`` -> ``/vsis3/b/k``, ``gs://`` (``gcs://``) -> ``/vsigs/``,
  ``az://`` (``azure://``, ``abfs://``) -> ``/vsiaz/``, ``http(s)://`` -> ``/vsicurl/http(s)://``,
  ``/vsi...`` unchanged (:func:`gdal_path`);
- tables and object operations go through fsspec (s3fs for S3): :func:`fsspec_url` is the
  inverse mapping and :func:`filesystem` the configured file system.

Configuration comes from the standard environment variables, read by GDAL and botocore alike
(credentials: environment, profile, instance role; ``AWS_NO_SIGN_REQUEST=YES`` for anonymous
access; ``AWS_REQUEST_PAYER=requester``). A custom S3 endpoint (MinIO, on-premise, a test
server) is given once, as botocore's ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``):
:func:`configure_gdal` derives GDAL's ``AWS_S3_ENDPOINT``, ``AWS_HTTPS`` and
``AWS_VIRTUAL_HOSTING`` from it (and :func:`filesystem` the other way round), and sets GDAL's
cloud options for COGs (:data:`GDAL_CLOUD_OPTIONS`) unless the user set them. Messages never
show a password: ``user:password@`` is removed from URLs (:func:`redact`), and no credential
is ever part of a message.

Examples
--------
>>> gdal_path("https://example.org/dem.tif"), gdal_path("s3://bucket/dems/ref.tif")
('/vsicurl/https://example.org/dem.tif', '/vsis3/bucket/dems/ref.tif')
>>> fsspec_url("/vsis3/bucket/dems/ref.tif"), fsspec_url("/vsicurl/https://example.org/dem.tif")
('s3://bucket/dems/ref.tif', 'https://example.org/dem.tif')
>>> is_remote("/vsicurl/https://example.org/dem.tif"), is_remote("dem.tif")
(True, False)
>>> redact("https://me:secret@example.org/dem.tif")
'https://***@example.org/dem.tif'
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from xdem.errors import InputError

if TYPE_CHECKING:  # annotations only: fsspec is imported when a remote file is used
    from fsspec import AbstractFileSystem

__all__ = ["is_remote", "scheme", "gdal_path", "fsspec_url", "redact", "check_remote", "check_object", "configure_gdal",
           "filesystem", "credential_source", "shown", "suffix", "GDAL_CLOUD_OPTIONS", "HTTP_OPTIONS"]

#: URL scheme -> GDAL virtual file system.
_VSI = {"s3": "/vsis3/", "gs": "/vsigs/", "gcs": "/vsigs/", "az": "/vsiaz/", "azure": "/vsiaz/", "abfs": "/vsiaz/",
        "http": "/vsicurl/", "https": "/vsicurl/"}
#: GDAL virtual file system -> fsspec scheme.
_FSSPEC = {"/vsis3/": "s3", "/vsigs/": "gs", "/vsiaz/": "az"}
#: GDAL options for COGs in object storage and over HTTP, set unless the user set them: no
#: directory listing when a file is opened, the header read in one request, HTTP/2 multiplexing
#: over TLS, consecutive ranges merged, and retries of 429/5xx answers with exponential backoff.
GDAL_CLOUD_OPTIONS = {
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "GDAL_INGESTED_BYTES_AT_OPEN": "32768",
    "GDAL_HTTP_MULTIPLEX": "YES",
    "GDAL_HTTP_VERSION": "2TLS",
    "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
    "GDAL_HTTP_MAX_RETRY": "5",
    "GDAL_HTTP_RETRY_DELAY": "0.5",
}
#: Kept for callers of the first version: the options used when a file is opened to check it.
HTTP_OPTIONS = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR"}


def _text(source: str | os.PathLike[str]) -> str:
    return os.fspath(source)


def scheme(source: str | os.PathLike[str]) -> str | None:
    """The lower-case URL scheme of ``source`` (``"s3"``, ``"https"``...), ``"vsi"`` for a GDAL
    ``/vsi...`` path, ``None`` for a local path."""
    text = _text(source)
    if text.startswith("/vsi"):
        return "vsi"
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*)://", text)
    return match.group(1).lower() if match else None


def is_remote(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` is a URL (``scheme://``) or a GDAL virtual path (``/vsi...``), not a local path."""
    return scheme(source) is not None


def redact(text: str) -> str:
    """``text`` with the ``user:password@`` (or ``user@``) of any URL in it replaced by ``***@``."""
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s'\"]+@", r"\1***@", text)


def shown(source: str | os.PathLike[str]) -> str:
    """How ``source`` is written in messages, the JSON document and the report: a URL or
    ``/vsi...`` path as given without its password (:func:`redact`), a local path absolute.

    Examples
    --------
    >>> shown("s3://bucket/ref.tif"), shown("https://me:pw@example.org/dem.tif")
    ('s3://bucket/ref.tif', 'https://***@example.org/dem.tif')
    """
    text = _text(source)
    return redact(text) if is_remote(text) else os.path.abspath(text)


def suffix(source: str | os.PathLike[str]) -> str:
    """The lower-case file suffix of a local path or of a URL (its query string ignored).

    Examples
    --------
    >>> suffix("https://example.org/points.CSV?token=abc"), suffix("/vsis3/b/mask.gpkg"), suffix("dem.tif")
    ('.csv', '.gpkg', '.tif')
    """
    text = _text(source)
    if is_remote(text):
        text = text.split("?", 1)[0].split("#", 1)[0]
    name = text.rstrip("/").rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[1].lower() if "." in name.strip(".") else ""


def gdal_path(source: str | os.PathLike[str]) -> str:
    """The path GDAL opens for ``source`` (see the module docstring); a local path is unchanged.

    Raises
    ------
    xdem.errors.InputError
        ``source`` has a scheme GDAL cannot read (``ftp://``...).
    """
    text = _text(source)
    kind = scheme(text)
    if kind is None or kind == "vsi":
        if kind == "vsi":
            configure_gdal()
        return text
    if kind not in _VSI:
        raise InputError(f"'{redact(text)}': {kind}:// URLs are not supported; use a local path, s3://, gs://, az://, "
                         "http(s):// or a GDAL /vsi... path")
    configure_gdal()
    rest = text.split("://", 1)[1]
    return _VSI[kind] + (text if kind in ("http", "https") else rest)


def fsspec_url(source: str | os.PathLike[str]) -> str | None:
    """The fsspec URL of ``source`` (``s3://``, ``gs://``, ``az://``, ``http(s)://``), a local path
    unchanged, or ``None`` for a GDAL-only virtual path (``/vsizip/``...)."""
    text = _text(source)
    kind = scheme(text)
    if kind is None:
        return text
    if kind == "vsi":
        if text.startswith("/vsicurl/"):
            return text[len("/vsicurl/"):]
        for prefix, name in _FSSPEC.items():
            if text.startswith(prefix):
                return f"{name}://{text[len(prefix):]}"
        return None
    return text


def _endpoint_url() -> str | None:
    """The custom S3 endpoint as a URL, from botocore's or GDAL's variables (None: AWS)."""
    url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if url:
        return url.rstrip("/")
    host = os.environ.get("AWS_S3_ENDPOINT")
    if host:
        https = os.environ.get("AWS_HTTPS", "YES").upper() not in ("NO", "FALSE", "OFF", "0")
        return host if "://" in host else f"{'https' if https else 'http'}://{host}"
    return None


def configure_gdal() -> None:
    """Set, in ``os.environ`` and only where the user did not, GDAL's cloud options
    (:data:`GDAL_CLOUD_OPTIONS`) and GDAL's S3 endpoint variables derived from
    ``AWS_ENDPOINT_URL(_S3)``. GDAL reads its options from the environment at each request, and
    processes started later (local dask workers) inherit them. botocore's
    ``AWS_SHARED_CREDENTIALS_FILE`` becomes GDAL's ``CPL_AWS_CREDENTIALS_FILE`` (GDAL reads
    ``AWS_PROFILE`` and ``AWS_CONFIG_FILE`` itself), so that both read the same profile."""
    for key, value in GDAL_CLOUD_OPTIONS.items():
        os.environ.setdefault(key, value)
    _derive("CPL_AWS_CREDENTIALS_FILE", os.environ.get("AWS_SHARED_CREDENTIALS_FILE"))
    url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if url and "AWS_S3_ENDPOINT" not in os.environ:
        match = re.match(r"(https?)://(.+?)/*$", url)
        if match:
            os.environ["AWS_S3_ENDPOINT"] = match.group(2)
            os.environ.setdefault("AWS_HTTPS", "YES" if match.group(1) == "https" else "NO")
            os.environ.setdefault("AWS_VIRTUAL_HOSTING", "FALSE")  # custom endpoints: path-style


#: GDAL variables :func:`configure_gdal` set from botocore's, and the value it set.
_DERIVED: dict[str, str] = {}


def _derive(key: str, value: str | None) -> None:
    """Set GDAL's ``key`` to botocore's ``value`` unless the user set ``key`` (a value this
    module set earlier follows ``value`` when it changes)."""
    if value is None or (key in os.environ and os.environ[key] != _DERIVED.get(key)):
        return
    os.environ[key] = _DERIVED[key] = value


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in ("YES", "TRUE", "ON", "1")


def filesystem(url: str) -> AbstractFileSystem:
    """The fsspec file system of ``url`` (an fsspec URL, see :func:`fsspec_url`), configured from
    the environment: for S3, the endpoint (:func:`configure_gdal`'s variables), anonymous access
    (``AWS_NO_SIGN_REQUEST``) and requester-pays (``AWS_REQUEST_PAYER=requester``)."""
    import fsspec  # lazy: only remote files need it

    kind = scheme(url) or "file"
    if kind == "s3":
        options: dict[str, object] = {"anon": _flag("AWS_NO_SIGN_REQUEST")}
        endpoint = _endpoint_url()
        if endpoint:
            options["endpoint_url"] = endpoint
        if os.environ.get("AWS_REQUEST_PAYER", "").lower() == "requester":
            options["requester_pays"] = True
        return fsspec.filesystem("s3", **options)
    if kind in ("http", "https"):
        return fsspec.filesystem("http", **_http_options())
    return fsspec.filesystem(kind)


def _http_options() -> dict[str, object]:
    """fsspec's HTTP options from GDAL's variables, so that a table over HTTP is read with the
    credentials GDAL uses for rasters: ``GDAL_HTTP_HEADERS`` (``"Name: value"`` lines, or
    comma-separated) and ``GDAL_HTTP_USERPWD`` (``user:password``, basic authentication)."""
    options: dict[str, object] = {}
    text = os.environ.get("GDAL_HTTP_HEADERS", "").strip()
    if text:
        parts = re.split(r"\r?\n", text) if "\n" in text else re.split(r",\s*(?=[A-Za-z0-9_-]+\s*:)", text)
        headers: dict[str, str] = {}
        for part in parts:
            name, _, value = part.partition(":")
            if value:
                headers[name.strip()] = value.strip()
        options["headers"] = headers
    userpwd = os.environ.get("GDAL_HTTP_USERPWD")
    if userpwd and ":" in userpwd:
        import aiohttp  # fsspec's HTTP client

        user, password = userpwd.split(":", 1)
        options["auth"] = aiohttp.BasicAuth(user, password)
    return options


def credential_source() -> str:
    """Where S3 credentials come from, in words, never the credentials: ``"anonymous
    (AWS_NO_SIGN_REQUEST)"``, ``"environment variables"``, ``"profile 'NAME'"``, ``"instance
    role"``... or ``"no credentials found"``."""
    if _flag("AWS_NO_SIGN_REQUEST"):
        return "anonymous (AWS_NO_SIGN_REQUEST)"
    try:
        import botocore.session  # s3fs's dependency
    except ImportError:  # pragma: no cover - s3fs is a dependency
        return "credentials unknown (botocore missing)"
    session = botocore.session.get_session()
    try:
        creds = session.get_credentials()
    except Exception as exc:  # noqa: BLE001 - a broken profile: say which kind of problem, not its content
        return f"credentials unreadable ({type(exc).__name__})"
    if creds is None:
        return "no credentials found (environment, profile, instance role)"
    method = getattr(creds, "method", "") or ""
    names = {"env": "environment variables", "shared-credentials-file": "the shared credentials file",
             "config-file": "the config file", "iam-role": "instance role", "container-role": "container role",
             "assume-role": "an assumed role", "sso": "SSO", "web-identity": "web identity"}
    profile = os.environ.get("AWS_PROFILE")
    said = names.get(method, method or "unknown source")
    return f"profile '{profile}' ({said})" if profile and method in ("shared-credentials-file", "config-file") else said


def _answer(message: str) -> str:
    code = re.search(r"(?:HTTP (?:response )?code|HTTP error code)\s*:?\s*(\d{3})", message)
    if code:
        return f"HTTP {code.group(1)}"
    return redact(message.strip().splitlines()[0] if message.strip() else "no answer")


_FIXES = {"HTTP 404": "check the URL", "HTTP 403": "check the URL and the access rights (credentials, "
          "GDAL_HTTP_USERPWD or GDAL_HTTP_HEADERS)", "HTTP 401": "give credentials (GDAL_HTTP_USERPWD or "
          "GDAL_HTTP_HEADERS)"}


def _store_answer(url: str, label: str) -> None:
    """Ask the object store for ``url`` (HEAD) and raise one line if it is missing or refused."""
    fs = filesystem(url)
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    try:
        fs.info(url)
        return
    except FileNotFoundError:
        try:
            bucket_there = fs.exists(f"{url.split('://')[0]}://{bucket}")
        except Exception:  # noqa: BLE001 - the bucket question is only for a better message
            bucket_there = True
        if not bucket_there:
            raise InputError(f"{label} not readable: '{redact(url)}' (the bucket '{bucket}' does not exist); "
                             "check the bucket name and the endpoint (AWS_ENDPOINT_URL)") from None
        raise InputError(f"{label} not readable: '{redact(url)}' (the store answered 404: no such object); "
                         "check the URL") from None
    except PermissionError:
        raise InputError(f"{label} not readable: '{redact(url)}' (the store answered 403, credentials: "
                         f"{credential_source()}); check the access rights, or pass --anonymous for a public "
                         "bucket") from None
    except Exception as exc:  # noqa: BLE001 - OSError, botocore's EndpointConnectionError...: no answer
        raise InputError(f"{label} not readable: '{redact(url)}' (no answer: {_answer(str(exc))}); check the "
                         "endpoint (AWS_ENDPOINT_URL) and the network") from None


def _http_answer(url: str, label: str) -> None:
    """Ask the HTTP server for ``url`` (HEAD, else GET without reading the body) and raise one
    line if it is missing, refused or does not answer."""
    fs = filesystem(url)
    try:
        fs.info(url)
        return
    except FileNotFoundError as exc:
        cause = exc.__cause__
        status = getattr(cause, "status", None) or (404 if cause is None else None)
        if status is None:
            raise InputError(f"{label} not readable: '{redact(url)}' (no answer: {type(cause).__name__}); check "
                             "the URL and that the server is reachable") from None
        answer = f"HTTP {status}"
        fix = _FIXES.get(answer, "check the URL and that the server is reachable")
        raise InputError(f"{label} not readable: '{redact(url)}' (the server answered {answer}); {fix}") from None
    except OSError as exc:
        raise InputError(f"{label} not readable: '{redact(url)}' (no answer: {_answer(str(exc))}); check the "
                         "URL and that the server is reachable") from None


def check_object(source: str | os.PathLike[str], *, label: str) -> None:
    """Ask the store or server whether the object ``source`` is there and readable, before any
    computation, whatever the file is (a vector mask, a table of points...): a HEAD to the
    object store for ``s3://`` (``/vsis3/``), to the HTTP server for ``http(s)://``
    (``/vsicurl/``). Other schemes (``gs://``, ``az://``, other ``/vsi...``) are left to the
    reader's own message.

    Raises
    ------
    xdem.errors.InputError
        One line naming the URL (without password) and the answer: 404 (or a missing bucket),
        403 with the credential source, no answer.

    Examples
    --------
    >>> check_object("/vsizip/archive.zip/mask.gpkg", label="mask")  # GDAL-only: its reader says
    """
    url = fsspec_url(gdal_path(source))
    if url is None:
        return
    kind = scheme(url)
    if kind == "s3":
        _store_answer(url, label)
    elif kind in ("http", "https"):
        _http_answer(url, label)


def check_remote(source: str | os.PathLike[str], *, label: str = "DEM") -> str:
    """Ask the server for ``source`` and return its GDAL path: the object store (HEAD) for an
    ``s3://`` URL or ``/vsis3/`` path, then GDAL opens its header.

    Parameters
    ----------
    source
        A URL or a ``/vsi...`` path.
    label
        What the source is, for the message (``"reference"``...).

    Raises
    ------
    xdem.errors.InputError
        The server refused or does not have it: one line naming the URL (without password) and
        the server's answer (``HTTP 404``, ``403`` with the credential source, a missing bucket,
        no answer).
    """
    import rasterio  # lazy: xdem.workflows.request is imported by commands that must start fast
    from rasterio.errors import RasterioIOError

    path = gdal_path(source)
    url = fsspec_url(path)
    if url is not None and scheme(url) == "s3":
        _store_answer(url, label)
    try:
        with rasterio.Env(**HTTP_OPTIONS), rasterio.open(path):
            pass
    except RasterioIOError as exc:
        answer = _answer(str(exc))
        fix = _FIXES.get(answer, "check the URL and that the server is reachable")
        shown = url if url is not None else _text(source)
        said = f"the server answered {answer}" if answer.startswith("HTTP ") else f"no answer: {answer}"
        if "configuration option" in answer or "Azure CLI configuration" in answer:  # GDAL found no credentials
            said, fix = (f"no credentials: {answer}", "set the credentials GDAL names, or its *_NO_SIGN_REQUEST=YES "
                         "(--anonymous for S3) for a public container")
        raise InputError(f"{label} not readable: '{redact(shown)}' ({said}); {fix}") from None
    return path
