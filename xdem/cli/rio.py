"""``rio xdem ...``: the ``xdem`` commands as a plugin of rasterio's ``rio`` command line.

Declared in ``pyproject.toml`` under the ``rasterio.rio_plugins`` entry point group, which
``rio`` loads at start-up: ``rio xdem coreg REF TBA -o OUT.tif`` is ``xdem coreg REF TBA -o
OUT.tif`` (same options, output, JSON, exit codes; the clean-up of a failed run and the signal
handling of :func:`xdem.cli.main` apply). rio's own options (``--verbose``, ``--aws-profile``...)
go before ``xdem``; GDAL's configuration from ``rio --gdal-opt`` is not forwarded.

Examples
--------
>>> sorted(xdem.commands) == sorted(__import__("xdem.cli").cli.main.commands)
True
"""

from __future__ import annotations

import click

from xdem.cli import _XdemGroup, bound_process_memory, main

__all__ = ["xdem"]


@click.group("xdem", cls=_XdemGroup, commands=main.commands, context_settings={"help_option_names": ["-h", "--help"]})
def xdem() -> None:
    """xdem: coregister digital elevation models of any size, out of core (the xdem commands)."""
    bound_process_memory()
