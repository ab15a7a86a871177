"""What the workers of a ``distributed`` cluster see: outputs whose tasks write a local folder
need that folder on every worker (a shared disk).

:func:`xdem.write_cog` never needs one (the workers send the blocks back; the client writes).
A Zarr store on a local path is written by the tasks themselves (each chunk and its record
in the store folder): on a cluster without a shared disk each worker would write its chunks
into its own folder, and the client would find an incomplete store. :func:`check_workers_see`
refuses that before anything is computed: the client puts a probe file (a random token) in
the folder, every worker reads it back, and a worker that does not find it is named in one
line. Workers only *read* here; the probe is removed on every path.

Examples
--------
Without a distributed client there is nothing to check:

>>> import tempfile
>>> check_workers_see(None, tempfile.mkdtemp(), what="the store")
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from xdem.errors import OutputError
from xdem.io.remote import is_remote

__all__ = ["check_workers_see"]


def _reads_token(path: str, token: str) -> bool:
    """On a worker: whether ``path`` holds ``token`` (a read only)."""
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read() == token
    except (OSError, UnicodeDecodeError):
        return False


def check_workers_see(client: object, folder: str | os.PathLike, *, what: str) -> None:
    """Raise a one-line :class:`~xdem.errors.OutputError` unless every worker of ``client`` (a
    ``distributed.Client``, or ``None``: nothing to check) sees the local ``folder`` (which
    exists), where the tasks of ``what`` write. Object-storage URLs are not checked."""
    if client is None or is_remote(os.fspath(folder)):
        return
    token = secrets.token_hex(16)
    probe = Path(folder) / f".xdem-probe-{os.getpid()}-{token[:8]}"
    probe.write_text(token, encoding="ascii")
    try:
        seen = client.run(_reads_token, str(probe), token)  # type: ignore[attr-defined]
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    blind = sorted(address for address, ok in seen.items() if not ok)
    if blind:
        names = ", ".join(blind[:3]) + (f" and {len(blind) - 3} more" if len(blind) > 3 else "")
        raise OutputError(
            f"{len(blind)} of the {len(seen)} dask workers ({names}) do not see '{folder}', where the tasks of {what} "
            "write (the cluster shares no disk with this process): write it to object storage (s3://...) or to a "
            "folder every worker mounts, or write a COG (.tif), which the workers send back to this process"
        )
