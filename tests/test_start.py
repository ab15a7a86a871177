"""A fast start: ``xdem --help``, ``--version`` and usage errors (of the group or of a
sub-command) import none of the heavy libraries, ``import xdem`` is lazy, and every public name still resolves.

Each start runs in a fresh interpreter that prints ``sys.modules`` when it exits; wall times
are measured by ``benchmarks/bench_start.py``, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
#: Modules a start must not import (dask itself is light: ``xdem.interrupt`` uses its callbacks).
HEAVY = ("dask.array", "dask.dataframe", "distributed", "pandas", "numba", "matplotlib", "rasterio", "xarray",
         "scipy", "xdem.io", "xdem.coreg", "xdem.workflows")
#: Runs ``python -m xdem ARGV`` as the console script would; prints the modules at exit.
HARNESS = """
import atexit, json, runpy, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["xdem", *sys.argv[1:]]
runpy.run_module("xdem", run_name="__main__", alter_sys=True)
"""


def _start(code: str, *args: str) -> tuple[int, str, set[str]]:
    """Exit code, stdout and imported modules of ``python -c CODE ARGS`` in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.returncode, proc.stdout + proc.stderr, set(json.loads(proc.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(("argv", "code", "shows"), [
    (["--help"], 0, "Commands:"),
    (["--version"], 0, "version"),
    ([], 2, "Commands:"),
    (["nosuchcommand"], 2, "No such command 'nosuchcommand'"),
    (["--no-such-option"], 2, "No such option"),
    (["-h"], 0, "coreg"),
])
def test_start_of_the_command_line_imports_no_heavy_library(argv, code, shows):
    rc, out, modules = _start(HARNESS, *argv)
    assert (rc, shows in out) == (code, True), out
    assert sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)) == []
    assert not [m for m in modules if m.startswith("xdem.cli.") and m != "xdem.cli.__main__"]


#: Modules a usage error or ``--help`` of a sub-command must not import: the light command module
#: and the output journal it runs in (``xdem.io.atomic``, hence the lazy package ``xdem.io``) are
#: imported, not the command's run (``xdem.cli._<command>_run``).
HEAVY_FOR_A_COMMAND = tuple(h for h in HEAVY if h != "xdem.io") + (
    "xdem.io.open", "xdem.io.cog", "xdem.io.zarr", "xdem.cli._coreg_run", "xdem.cli._info_run", "xdem.cli._terrain_run",
    "xdem.cli._convert_run", "xdem.report", "xdem.terrain", "xdem.examples.pair", "xdem.spatialstats", "xdem.points")


@pytest.mark.parametrize(("argv", "shows"), [
    (["coreg"], "Missing argument 'REF'"),
    (["coreg", "a.tif"], "Missing argument 'TBA'"),
    (["coreg", "--nosuch"], "No such option '--nosuch'"),
    (["coreg", "a.tif", "b.tif"], "Missing option '-o'"),
    (["info"], "Missing argument 'DEM'"),
    (["info", "--nosuch"], "No such option '--nosuch'"),
    (["terrain"], "Missing argument 'DEM'"),
    (["terrain", "dem.tif"], "Missing option '-o'"),
    (["report"], "Missing argument 'REF'"),
    (["report", "a.tif", "b.tif"], "Missing option '-o'"),
    (["convert"], "Missing argument 'SOURCE'"),
    (["convert", "a.tif", "b.zarr", "--nosuch"], "No such option '--nosuch'"),
    (["methods", "--nosuch"], "No such option '--nosuch'"),
    (["examples", "nosuch"], "No such command 'nosuch'"),
    (["examples", "path", "nosuch"], "'nosuch' is not"),
    (["examples", "write-pair"], "Missing argument 'FOLDER'"),
])
def test_usage_error_of_a_sub_command_imports_no_heavy_library(argv, shows):
    rc, out, modules = _start(HARNESS, *argv)
    assert (rc, shows in out, f"xdem {argv[0]} " in out and "Usage: " in out) == (2, True, True), out
    assert sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY_FOR_A_COMMAND)) == []


@pytest.mark.parametrize("command", [["info"], ["terrain"], ["report"], ["convert"], ["methods"], ["coreg"],
                                     ["examples"], ["examples", "path"], ["examples", "write-pair"]])
def test_help_of_a_sub_command_imports_no_heavy_library(command):
    rc, out, modules = _start(HARNESS, *command, "--help")
    assert (rc, f"xdem {' '.join(command)} [OPTIONS]" in out and "Usage: " in out) == (0, True), out
    assert sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY_FOR_A_COMMAND)) == []


#: Libraries a ``xdem coreg`` run on files never uses, each a fixed cost when imported (CPU at
#: import: distributed ~0.15 s, through dask looking for a client; geoutils with
#: scipy.stats ~0.3 s, through the upstream-style DEM class): issue 28.
UNUSED_BY_A_COREG_RUN = ("distributed", "geoutils", "scipy.stats", "xdem.dem", "matplotlib",
                         "skgstat", "xdem.spatialstats")


def test_a_coreg_run_on_files_imports_none_of_the_libraries_it_does_not_use(tmp_path):
    from xdem.examples import write_example_pair

    pair = write_example_pair(tmp_path)
    out = tmp_path / "aligned.tif"
    rc, text, modules = _start(HARNESS, "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--quiet")
    assert (rc, out.is_file()) == (0, True), text
    assert {"numba", "dask.array", "rasterio"} <= modules  # the run happened in that process
    assert sorted(m for m in modules if any(m == u or m.startswith(u + ".") for u in UNUSED_BY_A_COREG_RUN)) == []


def test_names_of_the_run_resolve_from_the_coreg_command_module():
    from xdem.cli import _coreg_run
    from xdem.cli import coreg as cli_coreg

    for name in cli_coreg._RUN_NAMES:
        assert getattr(cli_coreg, name) is getattr(_coreg_run, name), name
    with pytest.raises(AttributeError, match="no attribute 'steps_summary'"):
        cli_coreg.steps_summary  # noqa: B018


def test_lazy_packages_resolve_every_name():
    import xdem.io
    import xdem.workflows
    from xdem.io import auto_chunks, open_dem, write_cog, write_zarr
    from xdem.workflows import run_coreg

    assert [f.__module__ for f in (open_dem, auto_chunks, write_cog, write_zarr, run_coreg)] == [
        "xdem.io.open", "xdem.io.open", "xdem.io.cog", "xdem.io.zarr", "xdem.workflows.coreg"]
    for package in (xdem.io, xdem.workflows):
        assert set(package.__all__) <= set(dir(package))
        assert all(getattr(package, name) is not None for name in package.__all__)
        with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
            package.no_such_name  # noqa: B018


def test_import_xdem_is_lazy():
    rc, out, modules = _start("import json, sys, xdem; print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    assert rc == 0, out
    assert sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in (*HEAVY, "numpy", "dask"))) == []


def test_every_public_name_of_xdem_resolves():
    import xdem
    from xdem import align_pair, coreg, errors, examples, open_dem, spatialstats, terrain, write_cog, write_zarr

    assert set(xdem.__all__) <= set(dir(xdem))
    for name in xdem.__all__:
        assert getattr(xdem, name) is not None
    assert (open_dem, write_cog, write_zarr) == (xdem.io.open_dem, xdem.io.write_cog, xdem.io.write_zarr)
    assert align_pair is xdem.io.grid.align_pair
    assert [m.__name__ for m in (coreg, errors, examples, spatialstats, terrain)] == [
        "xdem.coreg", "xdem.errors", "xdem.examples", "xdem.spatialstats", "xdem.terrain"]
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        xdem.no_such_name  # noqa: B018


def test_command_table_matches_the_commands():
    """The one-line help ``xdem --help`` shows without importing a sub-command is that command's own."""
    import importlib

    from xdem.cli import COMMANDS

    for name, (module, text) in COMMANDS.items():
        cmd = getattr(importlib.import_module(module), name)
        assert cmd.name == name
        for limit in (30, 45, 70, 200):
            assert click.Command(name, help=text).get_short_help_str(limit) == cmd.get_short_help_str(limit), name


def test_help_lists_the_same_commands_as_an_eager_group():
    from xdem.cli import COMMANDS, main

    fresh = click.Group("xdem", commands={}, help=main.help, params=main.params,
                        context_settings={"help_option_names": ["-h", "--help"]})
    lazy_help = CliRunner().invoke(main, ["--help"], prog_name="xdem").output
    for name in COMMANDS:
        fresh.add_command(main.get_command(click.Context(main), name))
    assert CliRunner().invoke(fresh, ["--help"], prog_name="xdem").output == lazy_help
    assert CliRunner().invoke(main, ["--help"], prog_name="xdem").output == lazy_help  # once imported: unchanged


def test_rio_plugin_offers_the_same_commands():
    from xdem.cli import main
    from xdem.cli.rio import xdem as rio_group

    assert rio_group.list_commands(click.Context(rio_group)) == main.list_commands(click.Context(main))
    result = CliRunner().invoke(rio_group, ["methods", "--help"])
    assert result.exit_code == 0 and "List the methods" in result.output
