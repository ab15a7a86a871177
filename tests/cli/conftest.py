"""Fixtures of the command-line tests: the example pair written once per module, click's runner."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from xdem.examples import write_example_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """ref.tif, tba.tif, truth.json of the default example pair in a module-wide folder."""
    return write_example_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def runner():
    return CliRunner()
