"""The ``xdem`` command line: one click group, one module per sub-command.

Exit codes: 0 success, 1 error (an :class:`xdem.errors.XdemError` or an I/O failure,
reported on one line), 2 usage error (click's own), 143 terminated by SIGTERM (128 + 15, the
shell's convention; ``timeout``, SLURM and ``docker stop`` send it). SIGTERM unwinds the
command like Ctrl-C (:class:`Terminated`, a ``KeyboardInterrupt``), so the same clean-up runs:
temporary files are removed (an unfinished Zarr store is kept: ``--resume`` finishes it). Every
command runs in one :func:`xdem.io.atomic.output_journal`: when it fails (any exit but 0), the
outputs it had already moved into place are removed again (a file replaced with ``--overwrite``
is restored), so a failed run leaves nothing new behind.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from xdem._version import __version__
from xdem.errors import XdemError


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM (see the module notes)."""


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise Terminated(signum)


def _on_sigterm() -> Callable[[int, FrameType | None], Any] | int | None:
    """Install the SIGTERM handler (main thread only); returns the previous one, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)


class _XdemGroup(click.Group):
    """Turn xdem errors into one clear line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context):  # noqa: D102
        from xdem.io.atomic import output_journal

        previous = _on_sigterm()
        try:
            with output_journal():
                return super().invoke(ctx)
        except Terminated:
            click.echo("Error: terminated by SIGTERM; temporary files were removed and no output was left (but an "
                       "unfinished Zarr store, kept for --resume)", err=True)
            sys.exit(128 + signal.SIGTERM)
        except XdemError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


@click.group(cls=_XdemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xdem")
def main() -> None:
    """xdem: coregister digital elevation models of any size, out of core, on dask."""
    bound_process_memory()


#: GDAL block cache of the CLI's processes, in MB, unless GDAL_CACHEMAX is set. Chunks are
#: whole multiples of the files' tiles, so each tile is decoded once and a cache only holds
#: the COG pass's working set: 64 MB was measured as fast as 256 MB for that pass
#: (8000^2: 6.7-7.3 s against 7.4 s) and saves 190 MB of resident memory.
GDAL_CACHE_MB = 64
#: glibc allocations at least this large are served by mmap and returned to the system when
#: freed (glibc otherwise raises this threshold up to 32 MB after the first large free and
#: keeps freed chunk-sized arrays in its heaps: about 200 MB more resident at 8000^2). 4 MiB
#: catches chunk-sized arrays (16 MiB for 2048^2 float32) but not GDAL's tile buffers: 1 MiB
#: made `xdem coreg` at 20000^2 about 20 s slower (page faults on every tile buffer).
MMAP_THRESHOLD = 4 << 20


def bound_process_memory() -> None:
    """Bound what a CLI process keeps resident: GDAL's block cache (its default is 5 % of RAM,
    1.2 GB on 24 GB) and glibc's retention of freed chunk-sized arrays. Worker processes
    inherit ``GDAL_CACHEMAX`` from the environment."""
    os.environ.setdefault("GDAL_CACHEMAX", str(GDAL_CACHE_MB))
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD (also disables the dynamic threshold)
        except (OSError, AttributeError):  # not glibc: nothing to tune
            pass


def _register() -> None:
    """Attach the sub-commands (each lives in its own module)."""
    import importlib

    for module, name in [
        ("xdem.cli.info", "info"),
        ("xdem.cli.examples", "examples"),
        ("xdem.cli.coreg", "coreg"),
        ("xdem.cli.terrain", "terrain"),
        ("xdem.cli.report", "report"),
        ("xdem.cli.convert", "convert"),
        ("xdem.cli.methods", "methods"),
    ]:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # sub-command not written yet
                continue
            raise
        main.add_command(getattr(mod, name))


_register()
