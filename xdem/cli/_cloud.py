"""The ``--anonymous`` option of the commands that read (``coreg``, ``info``, ``convert``,
``terrain``): unsigned requests to object storage for the run, as ``AWS_NO_SIGN_REQUEST=YES``
(GDAL's ``/vsis3/`` and :func:`xdem.io.remote.filesystem` both honour it). Light on purpose
(click only): the commands' modules import it before the command line has parsed.

Examples
--------
>>> import click
>>> from click.testing import CliRunner
>>> @click.command()
... @anonymous_option
... def show() -> None:
...     click.echo(os.environ.get("AWS_NO_SIGN_REQUEST", "unset"))
>>> before = os.environ.pop("AWS_NO_SIGN_REQUEST", None)
>>> CliRunner().invoke(show, ["--anonymous"]).output, os.environ.get("AWS_NO_SIGN_REQUEST", "unset")
('YES\\n', 'unset')
>>> if before is not None:
...     os.environ["AWS_NO_SIGN_REQUEST"] = before
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import click

__all__ = ["anonymous_option"]

_F = TypeVar("_F", bound=Callable[..., object])


def _set_anonymous(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """Set ``AWS_NO_SIGN_REQUEST=YES`` until the command's context closes (the end of the run;
    processes started meanwhile, local dask workers, inherit it)."""
    if not value:
        return
    before = os.environ.get("AWS_NO_SIGN_REQUEST")
    os.environ["AWS_NO_SIGN_REQUEST"] = "YES"

    def restore() -> None:
        if before is None:
            os.environ.pop("AWS_NO_SIGN_REQUEST", None)
        else:
            os.environ["AWS_NO_SIGN_REQUEST"] = before

    ctx.call_on_close(restore)


def anonymous_option(func: _F) -> _F:
    """Decorator adding ``--anonymous`` (no credentials: public buckets)."""
    return click.option(
        "--anonymous", is_flag=True, expose_value=False, is_eager=True, callback=_set_anonymous,
        help="Read object storage (s3://, /vsis3/) without credentials, for public buckets: sets "
             "AWS_NO_SIGN_REQUEST=YES for the run.",
    )(func)
