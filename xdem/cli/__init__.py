"""The ``xdem`` command line: one click group, one module per sub-command.

Exit codes: 0 success, 1 error (an :class:`xdem.errors.XdemError` or an I/O failure,
reported on one line), 2 usage error (click's own), 128 + signum when a signal ended the run:
130 for SIGINT (Ctrl-C), 143 for SIGTERM (``timeout``, SLURM and ``docker stop`` send it), the
shell's convention.

Signals are never lost (:mod:`xdem.interrupt`): every command runs under a handler that records
SIGINT and SIGTERM and raises :class:`~xdem.interrupt.Interrupted` (a ``KeyboardInterrupt``)
only where that is safe, so the clean-up of Ctrl-C runs at any moment of any stage (the fit,
the block writes, GDAL's COG copy, which its progress callback stops, the statistics, the
report, a Zarr write): temporary files are removed, outputs already moved into place are
removed again (a file replaced with ``--overwrite`` is restored), an unfinished Zarr store is
kept for ``--resume``, and ONE line on stderr says which signal came during which stage, what
was removed and what was kept. A second signal during that clean-up is recorded and does not
interrupt it; one after it ends the process at once. A process started with SIGINT ignored (a
script's background job) keeps ignoring it; SIGTERM still stops it.

Every command runs in one :func:`xdem.io.atomic.output_journal`: when it fails (any exit but
0), the outputs it had already moved into place are removed again, so a failed run leaves
nothing new behind. Outputs to object storage are staged locally and uploaded as the command's
last step (:func:`xdem.io.atomic.publish_deferred`, still interruptible by a signal); a failure
after that deletes the objects uploaded again.

The group is lazy: ``xdem --help`` lists the sub-commands from :data:`COMMANDS` (name, module,
one-line help) without importing their modules, and ``xdem --version`` or a usage error
(``xdem nosuchcommand``, a bad top-level option) do not import them either, so these start in
well under a second without dask.array, pandas, numba or matplotlib. A sub-command's module is
imported when that command runs (or its own ``--help`` is asked).
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

import click

from xdem import interrupt
from xdem._version import __version__
from xdem.errors import XdemError
from xdem.gdal_cache import GDAL_CACHE_MB  # no imports: the environment variable's value, in MiB
from xdem.interrupt import Interrupted, Terminated

__all__ = ["main", "COMMANDS", "Interrupted", "Terminated", "bound_process_memory"]

#: The sub-commands: name -> (module defining the click command of that name, the first
#: sentence of its help, which ``xdem --help`` shows without importing the module; a test
#: checks it against the command's own help).
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("xdem.cli.info", "Print the metadata of DEM (a raster file or a Zarr store) and its exact median, "
                              "NMAD, min, max and valid fraction."),
    "examples": ("xdem.cli.examples", "Bundled example data (a 400 x 400, 1 m lidar DEM, MIT licence)."),
    "coreg": ("xdem.cli.coreg", "Coregister TBA (to be aligned) onto REF and write the aligned DEM to OUTPUT."),
    "terrain": ("xdem.cli.terrain", "Compute terrain attributes of DEM and write each as a COG, out of core."),
    "report": ("xdem.cli.report", "Write a self-contained HTML report comparing REF with TBA (and ALIGNED, if given)."),
    "convert": ("xdem.cli.convert", "Copy the DEM SOURCE (GeoTIFF, COG, VRT or Zarr store) to OUTPUT, out of core."),
    "methods": ("xdem.cli.methods", "List the methods of `xdem coreg --method`, their options and defaults."),
    "dh": ("xdem.cli.dh", "Compute volume and mass change per outline from REF and ALIGNED, with their uncertainties."),
}


def _command_name(ctx: click.Context) -> str:
    args = [a for a in (getattr(ctx, "_protected_args", None) or []) + list(ctx.args) if not a.startswith("-")]
    return f"xdem {args[0]}" if args else "xdem"


def _error_line(text: str) -> None:
    """``Error: text`` on stderr, on a line of its own (a progress bar drawn in place is cleared)."""
    clear = "\r\033[K" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    click.echo(f"{clear}Error: {text}", err=True)


class _XdemGroup(click.Group):
    """Turn xdem errors into one clear line on stderr and exit code 1, and signals into one
    line and exit code 128 + signum (see the module notes). The sub-commands of
    :data:`COMMANDS` are imported when first asked for (:meth:`get_command`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: D102
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: D102
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(COMMANDS[cmd_name][0])
            self.add_command(getattr(module, cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The ``Commands`` section of ``--help``, from :data:`COMMANDS` for the sub-commands not
        imported yet (the same text as click's own listing)."""
        names = [n for n in self.list_commands(ctx) if n not in self.commands or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, self.commands[n].get_short_help_str(limit) if n in self.commands
                 else click.Command(n, help=COMMANDS[n][1]).get_short_help_str(limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):  # noqa: D102
        args = [*(getattr(ctx, "_protected_args", None) or []), *ctx.args]
        if args and args[0] not in self.list_commands(ctx):  # a usage error, before the imports below
            self.resolve_command(ctx, args)
        # deliberately here: `xdem --help`, `--version` and usage errors import nothing of xdem.io
        from xdem.io.atomic import output_journal, publish_deferred

        _ignore_in_memory_georeferencing_warnings()
        with interrupt.handling() as run:
            try:
                with output_journal():  # outermost: whatever raises inside undoes the outputs
                    with interrupt.armed(), interrupt.stage(_command_name(ctx), key="run"):
                        result = super().invoke(ctx)
                        publish_deferred()  # outputs to object storage: uploaded last, still interruptible
                        interrupt.checkpoint()  # a signal whose exception was swallowed still ends the run
                    if run.signals:  # came as the command ended, before its outputs were final: undone
                        raise Interrupted.of(run.signals[0])
            except BaseException as exc:
                if run.signals:  # whatever the exception became on its way up
                    _end_by_signal(run)
                if isinstance(exc, (XdemError, OSError)):
                    _error_line(str(exc))
                    sys.exit(1)
                raise
            if run.signals:  # came in the instant after the outputs were final: kept, but the signal is not lost
                _end_by_signal(run, finished=True)
            return result


def _ignore_in_memory_georeferencing_warnings() -> None:
    """Never show the ``NotGeoreferencedWarning`` of rasterio's own in-memory rasters (for the
    whole process: a CLI process runs one command).

    :func:`rasterio.features.rasterize` burns polygons into a GDAL in-memory raster that it opens
    without a geotransform (then sets one); it hides the warning that open gives with
    ``warnings.catch_warnings()``, which swaps the process-wide filter list and is not thread-safe:
    when another dask thread leaves its own ``catch_warnings`` block in that instant, it puts back
    the filters it saved before rasterize's "ignore", and a stray ``Warning: Dataset has no
    geotransform, gcps, or rpcs...`` line appeared (e.g. in ``xdem dh``'s volume pass, most often
    when a signal's SIGSTOP/SIGCONT released the workers together). Installed here, in the main
    thread before any worker starts, this filter is in every list a thread saves and restores.
    It matches only that warning raised from ``rasterio.features`` (whose rasters are built from
    arrays, never a user's file)."""
    warnings.filterwarnings("ignore", message="Dataset has no geotransform", category=UserWarning,
                            module=r"rasterio\.features")


def _end_by_signal(run: interrupt.RunState, *, finished: bool = False) -> None:
    """The one line of a run a signal ended, then exit 128 + signum (see the module notes)."""
    _error_line(interrupt.describe(run, finished=finished))
    interrupt.finish()
    sys.exit(run.exit_code)


@click.group(cls=_XdemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xdem")
def main() -> None:
    """xdem: coregister digital elevation models of any size, out of core, on dask."""
    bound_process_memory()


#: glibc allocations at least this large are served by mmap and returned to the system when
#: freed (glibc otherwise raises this threshold up to 32 MB after the first large free and
#: keeps freed chunk-sized arrays in its heaps: about 200 MB more resident at 8000^2). 4 MiB
#: catches chunk-sized arrays (16 MiB for 2048^2 float32) but not GDAL's tile buffers: 1 MiB
#: made `xdem coreg` at 20000^2 about 20 s slower (page faults on every tile buffer).
MMAP_THRESHOLD = 4 << 20
#: Bytes glibc adds to each growth of a heap and keeps free at its top when trimming. Its
#: default (128 KiB) returns the memory of every freed buffer below :data:`MMAP_THRESHOLD` (GDAL's
#: 1 MiB tiles, the draw's windows) to the system at once, and the next allocation faults the
#: pages in again: about 950,000 page faults and 3-5 s of system time at 8000^2 (the floor: 0.5 s).
#: 64 MiB keeps them: 190,000 faults, about 2 s less CPU, 30-70 MB more resident (issue 28).
TOP_PAD = 64 << 20
#: Most glibc arenas (one heap per thread by default, each keeping :data:`TOP_PAD`): two bound
#: what the pads keep resident whatever the number of threads (dask's and GDAL's).
ARENA_MAX = 2


def bound_process_memory() -> None:
    """Bound what a CLI process keeps resident: GDAL's block cache (its default is 5 % of RAM,
    1.2 GB on 24 GB) and glibc's retention of freed chunk-sized arrays (:data:`MMAP_THRESHOLD`),
    while smaller buffers are reused instead of faulted in again (:data:`TOP_PAD`, :data:`ARENA_MAX`).
    Worker processes inherit ``GDAL_CACHEMAX`` (:data:`~xdem.gdal_cache.GDAL_CACHE_MB`, read by
    GDAL as MiB) from the environment."""
    os.environ.setdefault("GDAL_CACHEMAX", str(GDAL_CACHE_MB))
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD (also disables the dynamic threshold)
            libc.mallopt(-2, TOP_PAD)  # M_TOP_PAD
            libc.mallopt(-8, ARENA_MAX)  # M_ARENA_MAX
        except (OSError, AttributeError):  # not glibc: nothing to tune
            pass
