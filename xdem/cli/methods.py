"""``xdem methods``: the coregistration methods ``xdem coreg --method`` takes, their options and defaults.

Prints :func:`xdem.coreg.describe_methods` (built from the registry, :data:`xdem.coreg.METHODS`,
as ``--method`` resolves names), so a newly registered method is listed without editing this module.
"""

from __future__ import annotations

import json

import click

__all__ = ["methods"]


@click.command("methods")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
def methods(as_json: bool) -> None:
    """List the methods of `xdem coreg --method`, their options and defaults.

    \b
    Join methods with + for a pipeline (nuthkaab+vshift); blockwise:METHODS fits METHODS per tile.
    Options without a flag are set from Python (xdem.coreg.<Class>(option=...)).
    """
    # lazy on purpose (the one of this module): --help and a usage error start without xdem.coreg
    # (dask.array, numba, scipy), which only the listing needs
    from xdem.coreg.spec import describe_methods

    table = describe_methods()
    if as_json:
        click.echo(json.dumps(table, indent=2))
        return
    for m in table:
        click.echo(f"{m['name']}  ({m['class']}): {m['summary']}")
        for o in m["options"]:
            flag = f"  [{o['flag']}]" if o["flag"] else ""
            click.echo(f"    {o['name']} = {o['default']!r}{flag}")
        click.echo("")
