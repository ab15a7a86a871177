"""Outputs to object storage (``s3://bucket/key`` or ``/vsis3/bucket/key``): COGs, JSON
documents and HTML reports.

An output is never written piece by piece into the store. It is:

1. checked before any computation (:func:`check_output_url`): the store is asked (HEAD) whether
   the key exists (refused without ``overwrite``), whether the bucket exists, whether access is
   refused (403, with :func:`xdem.io.remote.credential_source`) or nobody answers: one line;
2. written and validated locally, in a staging folder of the system's temporary folder
   (``TMPDIR``), owned by this process (:func:`xdem.io.atomic.owned_temps`: removed on any
   error and on signals, by a later run if the process was killed outright);
3. uploaded as late as possible (:func:`xdem.io.atomic.defer`: after every local output and
   check of the run), in ONE put: a single ``PutObject`` up to :func:`part_size`, else a
   multipart upload (written here with the s3fs client, one part at a time, signals deferred
   during a part and raised between parts; any failure or signal aborts the upload, so no
   multipart upload is left behind) that appears under the key only when complete. Without
   ``overwrite`` the put is conditional (``If-None-Match: *`` on ``PutObject`` and on
   ``CompleteMultipartUpload``): a key created meanwhile by someone else is never replaced.
   A store that ignores conditional puts cannot refuse that race: between the check and the
   put, another writer's object could then be replaced (docs/cli.md);
4. deleted again if the run fails after it was uploaded, only if the key still holds the
   object this run wrote (same ETag). An object replaced with ``overwrite`` cannot be restored.

The part size is :data:`DEFAULT_PART_SIZE` (64 MiB), or ``XDEM_UPLOAD_PART_SIZE`` bytes (at
least S3's minimum, 5 MiB). Test hook: the stage key ``upload`` of :mod:`xdem.interrupt`
(event 0: before the first part; event ``n``: after part ``n``).

Examples
--------
>>> object_url("/vsis3/bucket/out/aligned.tif"), object_url("s3://bucket/out/aligned.tif")
('s3://bucket/out/aligned.tif', 's3://bucket/out/aligned.tif')
>>> part_size() >= MIN_PART_SIZE
True
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from xdem import interrupt
from xdem.errors import OutputError
from xdem.io import remote
from xdem.io.atomic import defer, output_journal, owned_temps

if TYPE_CHECKING:  # annotations only: s3fs is imported when a remote output is written
    from fsspec import AbstractFileSystem

__all__ = ["object_url", "check_output_url", "stage_output", "stage_text", "upload_file", "part_size", "StagedUpload",
           "DEFAULT_PART_SIZE", "MIN_PART_SIZE", "PART_SIZE_ENV"]

#: Size of the parts of a multipart upload (and the largest single put), in bytes.
DEFAULT_PART_SIZE = 64 * 2**20
#: S3's smallest part (all but the last).
MIN_PART_SIZE = 5 * 2**20
#: Environment variable overriding :data:`DEFAULT_PART_SIZE` (bytes).
PART_SIZE_ENV = "XDEM_UPLOAD_PART_SIZE"


def part_size() -> int:
    """The part size of uploads: ``XDEM_UPLOAD_PART_SIZE`` (at least :data:`MIN_PART_SIZE`) or
    :data:`DEFAULT_PART_SIZE`."""
    text = os.environ.get(PART_SIZE_ENV, "").strip()
    return max(MIN_PART_SIZE, int(text)) if text.isdigit() else DEFAULT_PART_SIZE


def object_url(path: str | os.PathLike[str], *, what: str = "output") -> str:
    """The ``s3://bucket/key`` URL of an output given as ``s3://`` or ``/vsis3/``.

    Raises
    ------
    xdem.errors.OutputError
        Another scheme (outputs go to S3 or S3-compatible stores only), or no key.
    """
    text = os.fspath(path)
    url = remote.fsspec_url(text)
    if url is None or remote.scheme(url) != "s3":
        raise OutputError(f"{what} '{remote.redact(text)}': outputs to object storage go to s3:// (or /vsis3/) URLs, "
                          "including S3-compatible stores (AWS_ENDPOINT_URL); write locally, then copy")
    bucket, _, key = url[len("s3://"):].partition("/")
    if not bucket or not key or key.endswith("/"):
        raise OutputError(f"{what} '{url}' names no object; give s3://BUCKET/KEY (e.g. s3://{bucket or 'b'}/aligned.tif)")
    return url


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url[len("s3://"):].partition("/")
    return bucket, key


def _refused(url: str, what: str, exc: BaseException, *, doing: str) -> OutputError:
    """One line for a store's refusal of ``doing`` on ``url``."""
    bucket = _split(url)[0]
    if isinstance(exc, FileExistsError):
        return OutputError(f"{what} '{url}' was created by another writer while this run was writing it; it was left "
                           "untouched and this run's result discarded; choose another key, or pass --overwrite "
                           "(overwrite=True) to replace it")
    if isinstance(exc, PermissionError):
        return OutputError(f"cannot {doing} {what} '{url}' (the store answered 403, credentials: "
                           f"{remote.credential_source()}); check the write access to the bucket '{bucket}'")
    if isinstance(exc, FileNotFoundError):
        return OutputError(f"cannot {doing} {what} '{url}' (the bucket '{bucket}' does not exist); create it first "
                           "or check the bucket name and the endpoint (AWS_ENDPOINT_URL)")
    said = remote.redact(str(exc).splitlines()[0]) if str(exc).strip() else type(exc).__name__
    return OutputError(f"cannot {doing} {what} '{url}' (no answer: {said}); check the endpoint and the network")


def _etag_of(url: str) -> str | None:
    """The ETag of the object ``url`` (``None``: no such object); raises the store's refusals."""
    bucket, key = _split(url)
    fs = remote.filesystem(url)
    try:
        head = fs.call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        fs.call_s3("head_bucket", Bucket=bucket)  # FileNotFoundError if the bucket is missing
        return None
    return str(head.get("ETag", ""))


def check_output_url(path: str | os.PathLike[str], *, overwrite: bool, what: str = "output",
                     overwrite_hint: str = "overwrite=True",
                     inputs: Iterable[tuple[str, str | os.PathLike[str]]] = ()) -> str:
    """The guard of an output to object storage, before any computation: returns its
    ``s3://`` URL, or raises one line.

    Refused: another scheme, no key, a ``TMPDIR`` that is not a writable folder (the staging
    goes there), one of ``inputs`` (``(label, path)``), an existing object without
    ``overwrite``, a missing bucket, a 403 (with the credential source), no answer.

    Raises
    ------
    xdem.errors.OutputError
    """
    url = object_url(path, what=what)
    _temp_folder(url, what)  # where it will be staged
    for label, src in inputs:
        if remote.is_remote(src) and remote.fsspec_url(os.fspath(src)) == url:
            raise OutputError(f"{what} '{url}' is {label}; write to another key (an input is never replaced, even "
                              "with overwrite)")
    try:
        etag = _etag_of(url)
    except OSError as exc:
        raise _refused(url, what, exc, doing="check") from None
    if etag is not None and not overwrite:
        raise OutputError(f"{what} '{url}' already exists; pass {overwrite_hint} to replace it or choose another key")
    return url


def upload_file(local: str | os.PathLike[str], url: str, *, overwrite: bool, what: str = "output") -> str:
    """Upload the file ``local`` to ``url`` in one put (see the module notes); returns the ETag.

    Raises
    ------
    xdem.errors.OutputError
        The store refused it (a key that appeared meanwhile without ``overwrite``, 403, a
        missing bucket) or did not answer; nothing is left under ``url`` and no multipart
        upload is left open.
    """
    bucket, key = _split(url)
    fs = remote.filesystem(url)
    size, step = os.path.getsize(local), part_size()
    condition = {} if overwrite else {"IfNoneMatch": "*"}
    with interrupt.stage(f"the upload of {url}", key="upload"), open(local, "rb") as f:
        try:
            if size <= step:
                with interrupt.deferred():
                    answer = fs.call_s3("put_object", Bucket=bucket, Key=key, Body=f.read(), **condition)
                interrupt.checkpoint()
                return str(answer.get("ETag", ""))
            return _multipart(fs, f, bucket, key, size=size, step=step, condition=condition)
        except OSError as exc:
            raise _refused(url, what, exc, doing="upload") from None


def _multipart(fs: AbstractFileSystem, f: BinaryIO, bucket: str, key: str, *, size: int, step: int,
               condition: dict[str, str]) -> str:
    """The multipart upload of :func:`upload_file`: aborted on anything (errors, signals)."""
    call = fs.call_s3
    upload_id = call("create_multipart_upload", Bucket=bucket, Key=key)["UploadId"]
    try:
        parts = []
        for number in range(1, -(-size // step) + 1):
            interrupt.checkpoint()
            with interrupt.deferred():  # a signal during a part is raised after it: no part in flight at the abort
                answer = call("upload_part", Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                              Body=f.read(step))
            parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            interrupt.checkpoint()
            interrupt.event()
        with interrupt.deferred():
            done = call("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id,
                        MultipartUpload={"Parts": parts}, **condition)
    except BaseException:
        with contextlib.suppress(Exception):
            call("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
        raise
    interrupt.checkpoint()
    return str(done.get("ETag", ""))


@dataclass(eq=False)
class StagedUpload:
    """An output to object storage staged in a local file (:class:`xdem.io.atomic.Deferred`):
    ``local`` is uploaded to ``url`` when the run's outputs are final."""

    url: str
    local: str
    overwrite: bool
    what: str = "output"
    etag: str | None = None
    _temps: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)

    def publish(self) -> None:
        """Upload (one conditional put); the ETag is kept for :meth:`undo`."""
        self.etag = upload_file(self.local, self.url, overwrite=self.overwrite, what=self.what)

    def undo(self) -> None:
        """Delete the uploaded object if the key still holds it (same ETag)."""
        if self.etag is None:
            return
        with contextlib.suppress(OSError):
            if _etag_of(self.url) == self.etag:
                bucket, key = _split(self.url)
                remote.filesystem(self.url).call_s3("delete_object", Bucket=bucket, Key=key)
                interrupt.note_removed(self.url)
        self.etag = None

    def discard(self) -> None:
        """Remove the local staging."""
        self._temps.close()


def _temp_folder(url: str, what: str) -> str:
    """The system's temporary folder; ``TMPDIR`` if set (Python would silently fall back to
    ``/tmp`` for a ``TMPDIR`` that is missing or not writable: refused instead)."""
    asked = os.environ.get("TMPDIR")
    if asked and not (os.path.isdir(asked) and os.access(asked, os.W_OK | os.X_OK)):
        raise OutputError(f"cannot stage {what} '{url}': TMPDIR '{asked}' is not a writable folder; create it, or set "
                          "TMPDIR to a writable folder with free space")
    return tempfile.gettempdir()


def stage_output(url: str, *, overwrite: bool, what: str = "output") -> StagedUpload:
    """A staging file for ``url`` (named like the key's last part, in a staging folder of the
    system's temporary folder, ``TMPDIR``), deferred for upload (:func:`xdem.io.atomic.defer`)
    in the current output journal: the caller writes it, the journal uploads it. Call it
    inside :func:`xdem.io.atomic.output_journal` (outside one it would be uploaded at once)."""
    temps = contextlib.ExitStack()
    try:
        prefix = temps.enter_context(owned_temps(_temp_folder(url, what)))
        folder = prefix + "stage"
        os.mkdir(folder, 0o700)
    except OSError as exc:
        temps.close()
        raise OutputError(f"cannot stage {what} '{url}' in the temporary folder '{tempfile.gettempdir()}' ({exc}); "
                          "set TMPDIR to a writable folder with free space") from exc
    except BaseException:
        temps.close()
        raise
    item = StagedUpload(url=url, local=os.path.join(folder, url.rsplit("/", 1)[-1]), overwrite=overwrite, what=what,
                        _temps=temps)
    defer(item)
    return item


def stage_text(url: str | os.PathLike[str], text: str, *, overwrite: bool, what: str = "output") -> str:
    """Stage ``text`` for upload to ``url`` (a JSON document, an HTML report: one conditional
    put when the run's outputs are final); returns the URL."""
    target = object_url(url, what=what)
    with output_journal():  # outside a run's journal: uploaded when this one ends
        item = stage_output(target, overwrite=overwrite, what=what)
        try:
            with open(item.local, "w") as f:
                f.write(text)
        except OSError as exc:
            raise OutputError(f"cannot stage {what} '{target}' in the temporary folder '{tempfile.gettempdir()}' "
                              f"({exc}); free some space there or set TMPDIR to another folder") from exc
    return target
