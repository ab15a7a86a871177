"""The ``xdem`` command line: one click group, one module per sub-command.

Exit codes: 0 success, 1 error (an :class:`xdem.errors.XdemError` or an I/O failure,
reported on one line), 2 usage error (click's own).
"""

from __future__ import annotations

import os
import sys

import click

from xdem._version import __version__
from xdem.errors import XdemError


class _XdemGroup(click.Group):
    """Turn xdem errors into one clear line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context):  # noqa: D102
        try:
            return super().invoke(ctx)
        except XdemError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=_XdemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="xdem")
def main() -> None:
    """xdem: coregister digital elevation models of any size, out of core, on dask."""
    # GDAL's block cache defaults to 5% of RAM per process (1.2 GB on 24 GB): bound it for
    # every command, unless the user chose a value (worker processes inherit it).
    os.environ.setdefault("GDAL_CACHEMAX", "256")


def _register() -> None:
    """Attach the sub-commands (each lives in its own module)."""
    import importlib

    for module, name in [
        ("xdem.cli.info", "info"),
        ("xdem.cli.examples", "examples"),
        ("xdem.cli.coreg", "coreg"),
        ("xdem.cli.terrain", "terrain"),
        ("xdem.cli.report", "report"),
    ]:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # sub-command not written yet
                continue
            raise
        main.add_command(getattr(mod, name))


_register()
