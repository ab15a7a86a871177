"""Every gallery example (``examples/**/plot_*.py``) runs as a script and exits 0.

Examples run in child processes with ``MPLBACKEND=Agg`` and ``XDEM_EXAMPLE_SIZE=512``, two at
a time (one per core) to keep the wall time down, each with its own timeout, longest first. A new
example is picked up automatically. Each must write only to temporary folders: it runs in
an empty working directory with its own ``TMPDIR``, and both are checked afterwards.

Each child is forked by a fork server of tests/forkserver.py that has imported the packages the
scripts import (numpy, matplotlib, dask, rasterio, geoutils, xdem's sub-modules: ~3 s of CPU a
script otherwise), then runs the script as ``python script.py`` does: as ``__main__``, with its
own ``sys.argv``, ``sys.path[0]``, working directory, environment, stdout, stderr and exit code,
ending with the interpreter's whole shutdown.
"""

from __future__ import annotations

import ast
import os
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from forkserver import ForkServer

# end-to-end (runs the gallery scripts): `pytest -m 'not slow'` leaves them out; `make test` runs them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(EXAMPLES.glob("**/plot_*.py"))
TIMEOUT_S = 120
#: Started first, as the longest here (the coregistration page: 20-40 s; the cluster: a LocalCluster
#: and a 512^2 pair); the others follow in name order.
LONGEST = ("upstream/plot_coregistration_page.py", "advanced/plot_out_of_core_cluster.py")

#: Topics the gallery must cover (issue 7): sub-folder/file name of the example.
REQUIRED = {
    "open and inspect DEMs": "basic/plot_open_inspect.py",
    "Nuth & Kääb on the bundled pair": "basic/plot_nuth_kaab.py",
    "pipeline with a bias correction": "basic/plot_pipeline_biascorr.py",
    "terrain attributes": "basic/plot_terrain.py",
    "dh statistics and a variogram": "basic/plot_dh_statistics.py",
    "vertical datums (ellipsoid to EGM96)": "basic/plot_vertical_datums.py",
    "out-of-core run on a LocalCluster": "advanced/plot_out_of_core_cluster.py",
    "writing COGs": "advanced/plot_write_cog.py",
    "saving and re-applying a coregistration": "advanced/plot_save_reapply.py",
    # upstream xdem 0.2.3's gallery and pages, adapted (issue 26); those of issue 27 are not here yet
    "upstream: Nuth and Kääb": "upstream/plot_nuth_kaab_glaciers.py",
    "upstream: ICP": "upstream/plot_icp_coregistration.py",
    "upstream: logging": "upstream/plot_logging_configuration.py",
    "upstream: terrain attributes": "upstream/plot_terrain_attributes.py",
    "upstream: slope methods": "upstream/plot_slope_methods.py",
    "upstream: deramp": "upstream/plot_deramp.py",
    "upstream: blockwise": "upstream/plot_blockwise_coreg.py",
    "upstream: coregistration page": "upstream/plot_coregistration_page.py",
    "upstream: bias-correction page": "upstream/plot_biascorr_page.py",
    # upstream's uncertainty gallery (issue 27), on the synthetic glacier set
    "upstream: elevation error map": "upstream/plot_infer_heterosc.py",
    "upstream: heteroscedasticity modelling": "upstream/plot_heterosc_estimation_modelling.py",
    "upstream: spatial correlation": "upstream/plot_infer_spatial_correlation.py",
    "upstream: variogram modelling": "upstream/plot_variogram_estimation_modelling.py",
    "upstream: standardization": "upstream/plot_standardization.py",
    "upstream: spatial error propagation": "upstream/plot_spatial_error_propagation.py",
    # upstream's gap-filling gallery (issue 27)
    "upstream: DEM subtraction": "upstream/plot_dem_subtraction.py",
    "upstream: normalised regional hypsometric": "upstream/plot_norm_regional_hypso.py",
    "volume and mass change with uncertainties": "basic/plot_volume_change.py",
    "upstream: DEM collection": "upstream/plot_demcollection.py",
}

_pool: ThreadPoolExecutor | None = None
_futures: dict[Path, Future] = {}
#: The fork server of the examples (one: it runs two children side by side, see ForkServer.wait_ended).
_server: list[ForkServer] = []


def _listing() -> list[str]:
    return sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if "__pycache__" not in p.parts)


#: Files of examples/ before any example ran: examples must not write there.
_BEFORE = _listing()


def _run(script: Path) -> dict:
    """Run one example in a fresh working directory and TMPDIR; return what happened."""
    with tempfile.TemporaryDirectory(prefix="xdem-gallery-test-") as base:
        cwd, tmp = Path(base, "cwd"), Path(base, "tmp")
        cwd.mkdir()
        tmp.mkdir()
        out, err = Path(base, "stdout"), Path(base, "stderr")
        server = _server[0]
        t0 = time.perf_counter()
        try:
            pid = server.run([], script=script, cwd=cwd, stdout=out, stderr=err, env={"TMPDIR": str(tmp)},
                             finalize=True)
            returncode: int | None = server.wait_ended(pid, timeout=TIMEOUT_S)
        except TimeoutError:
            returncode = None
        elapsed = time.perf_counter() - t0
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        left_in_cwd = sorted(p.name for p in cwd.iterdir())
        left_in_tmp = sorted(p.name for p in tmp.iterdir() if p.name.startswith("xdem-example-"))
    return {"returncode": returncode, "stdout": stdout, "stderr": stderr, "elapsed": elapsed,
            "left_in_cwd": left_in_cwd, "left_in_tmp": left_in_tmp}


def _result(script: Path) -> dict:
    """Start every example (two at a time, longest first) on first use, then wait for this one."""
    global _pool
    if _pool is None:
        # the environment of every example (XDEM_EXAMPLE_SIZE, MPLBACKEND before matplotlib's import)
        env = {"MPLBACKEND": "Agg", "XDEM_EXAMPLE_SIZE": "512", "PYTHONWARNINGS": "default"}
        _server.append(ForkServer(pythonpath=os.environ.get("PYTHONPATH", str(ROOT)), preload="gallery", env=env,
                                  unset=("DISPLAY",)))
        _pool = ThreadPoolExecutor(max_workers=2)
        rank = {name: i for i, name in enumerate(LONGEST)}
        for s in sorted(SCRIPTS, key=lambda p: rank.get(p.relative_to(EXAMPLES).as_posix(), len(rank))):
            _futures[s] = _pool.submit(_run, s)
    return _futures[script].result()


@pytest.fixture(scope="module", autouse=True)
def _close_servers():
    """After the module: end the fork server (every example has ended)."""
    yield
    if _pool is not None:
        _pool.shutdown(wait=True)
    while _server:
        _server.pop().close()


def test_gallery_covers_required_topics():
    found = {p.relative_to(EXAMPLES).as_posix() for p in SCRIPTS}
    missing = {topic: name for topic, name in REQUIRED.items() if name not in found}
    assert not missing, f"gallery examples missing: {missing}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.relative_to(EXAMPLES).as_posix() for p in SCRIPTS])
def test_example_is_a_gallery_script(script):
    """sphinx-gallery needs a module docstring whose first lines are a title and its underline."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree, clean=True)
    assert doc, f"{script.name} has no module docstring (the gallery title and text)"
    lines = doc.splitlines()
    assert len(lines) >= 3 and set(lines[1]) == {"="} and len(lines[1]) >= len(lines[0]), (
        f"{script.name}: the docstring must start with a title underlined with '=' at least as long"
    )
    assert "# %%" in script.read_text(encoding="utf-8"), f"{script.name} has no '# %%' cells"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.relative_to(EXAMPLES).as_posix() for p in SCRIPTS])
def test_example_runs(script):
    res = _result(script)
    tail = "\n".join(res["stderr"].splitlines()[-25:])
    assert res["returncode"] is not None, f"{script.name} did not finish within {TIMEOUT_S} s:\n{tail}"
    assert res["returncode"] == 0, f"{script.name} exited with {res['returncode']}:\n{tail}"
    assert "Traceback" not in res["stderr"], f"{script.name} printed a traceback:\n{tail}"
    assert res["stdout"].strip(), f"{script.name} printed nothing"
    assert not res["left_in_cwd"], f"{script.name} wrote into its working directory: {res['left_in_cwd']}"
    assert not res["left_in_tmp"], f"{script.name} left temporary folders behind: {res['left_in_tmp']}"
    after = _listing()
    assert after == _BEFORE, f"an example wrote into examples/: {sorted(set(after) - set(_BEFORE))}"
