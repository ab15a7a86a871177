"""``rio xdem ...``: the ``xdem`` commands as a plugin of rasterio's ``rio`` command line.

Declared in ``pyproject.toml`` under the ``rasterio.rio_plugins`` entry point group, which
``rio`` loads at start-up: ``rio xdem coreg REF TBA -o OUT.tif`` is ``xdem coreg REF TBA -o
OUT.tif`` (same options, output, JSON, exit codes; the clean-up of a failed run and the signal
handling of :func:`xdem.cli.main` apply). rio's own options (``--verbose``, ``--aws-profile``...)
go before ``xdem``; GDAL's configuration from ``rio --gdal-opt`` is not forwarded. Like ``xdem``,
the group imports a sub-command's module only when that command runs, so ``rio --help`` stays fast.

Examples
--------
>>> import click
>>> from xdem.cli import main
>>> xdem.list_commands(click.Context(xdem)) == main.list_commands(click.Context(main))
True
"""

from __future__ import annotations

import click

from xdem.cli import _XdemGroup, bound_process_memory

__all__ = ["xdem"]


@click.group("xdem", cls=_XdemGroup, context_settings={"help_option_names": ["-h", "--help"]})
def xdem() -> None:
    """xdem: coregister digital elevation models of any size, out of core (the xdem commands)."""
    bound_process_memory()
