"""The Sphinx documentation builds offline and without a single warning.

The build runs on a copy of ``docs/``, ``examples/`` and ``CHANGELOG.md`` in a temporary
folder (sphinx-gallery writes generated pages next to the sources) by the Makefile's ``docs``
target, with ``-W`` (warnings
are errors) and ``-D plot_gallery=0`` (gallery pages are made without running the examples,
which ``tests/test_examples_gallery.py`` runs). Network access through HTTP(S) proxies is
pointed at a closed port, so an extension reaching out would fail the build.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

# end-to-end (builds the documentation with Sphinx): `pytest -m 'not slow'` leaves them out; `make test` runs them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DOCS_PACKAGES = {
    "sphinx": "sphinx",
    "sphinx_gallery": "sphinx-gallery",
    "numpydoc": "numpydoc",
    "myst_parser": "myst-parser",
    "sphinx_click": "sphinx-click",
    "pydata_sphinx_theme": "pydata-sphinx-theme",
}
TIMEOUT_S = 300


def _missing_packages() -> list[str]:
    return [dist for module, dist in DOCS_PACKAGES.items() if importlib.util.find_spec(module) is None]


def _require_docs_packages() -> None:
    missing = _missing_packages()
    if missing:
        pytest.fail(
            f"the docs packages {', '.join(missing)} are not installed; install them with "
            "pip install -e '.[docs]' (the 'test' extra includes them, so 'make test' does)",
            pytrace=False,
        )


def test_docs_packages_are_installed():
    _require_docs_packages()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    _require_docs_packages()
    base = tmp_path_factory.mktemp("docs-build")
    ignore = shutil.ignore_patterns("_build", "auto_examples", "sg_execution_times.rst", "__pycache__", "gen_modules")
    shutil.copytree(ROOT / "docs", base / "docs", ignore=ignore)
    shutil.copytree(ROOT / "examples", base / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "CHANGELOG.md", base / "CHANGELOG.md")
    shutil.copy2(ROOT / "Makefile", base / "Makefile")
    out = base / "docs" / "_build" / "html"
    env = {**os.environ, "MPLBACKEND": "Agg", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}
    # the README's `make docs` itself (its install stamps taken as done: this venv has the packages),
    # with the gallery not executed and sphinx going on after a warning to list them all
    venv = Path(sys.executable).parent
    cmd = ["make", "-C", str(base), "-o", ".venv/.docs-stamp", "-o", ".venv/.installed-stamp", "docs", f"BIN={venv}",
           f"SPHINXOPTS=--keep-going -D plot_gallery=0 -d {base / 'doctrees'}"]
    proc = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return {"proc": proc, "out": out}


def test_build_has_no_warnings(built):
    proc = built["proc"]
    problems = [line for line in proc.stderr.splitlines() if re.search(r"WARNING|ERROR|CRITICAL", line)]
    assert proc.returncode == 0 and not problems, (
        f"sphinx-build -W failed with {proc.returncode}; {len(problems)} warning(s):\n"
        + "\n".join(problems[:30] or proc.stderr.splitlines()[-30:])
    )


def test_pages_exist(built):
    out = built["out"]
    for page in ("index", "quickstart", "how_it_works", "api", "cli_reference", "credits", "changelog",
                 "auto_examples/index"):
        assert (out / f"{page}.html").is_file(), f"{page}.html was not built"
    index = (out / "index.html").read_text(encoding="utf-8")
    for page in ("quickstart", "how_it_works", "auto_examples/index", "api", "credits", "cli_reference"):
        assert f'href="{page}.html"' in index, f"the index does not link to {page}.html"
    # every Markdown topic page of docs/ is built and linked from the index
    for md in sorted((ROOT / "docs").glob("*.md")):
        assert (out / f"{md.stem}.html").is_file(), f"{md.name} was not built"
        assert f'href="{md.stem}.html"' in index, f"the index does not link to {md.stem}.html"


def test_api_page_documents_the_public_api(built):
    api = (built["out"] / "api.html").read_text(encoding="utf-8")
    for name in ("xdem.open_dem", "xdem.write_cog", "xdem.align_pair", "xdem.coreg.NuthKaab",
                 "xdem.coreg.VerticalShift", "xdem.coreg.CoregPipeline", "xdem.coreg.Deramp",
                 "xdem.coreg.NuthKaabDeramp", "xdem.terrain.slope", "xdem.terrain.get_terrain_attribute",
                 "xdem.spatialstats.sample_empirical_variogram", "xdem.stats.robust_summary",
                 "xdem.report.write_report", "xdem.examples.example_pair", "xdem.examples.synthetic.generate_pair",
                 "xdem.errors.InputError"):
        assert f'id="{name}"' in api, f"{name} is not documented on the API page"
    # numpydoc rendered the sections (the project's "Learned attributes" as Attributes)
    start = api.index('id="xdem.coreg.NuthKaab"')
    assert "Attributes" in api[start:start + 20000] and "shift_x_" in api[start:start + 20000]


def test_gallery_pages_exist(built):
    out = built["out"]
    scripts = sorted((ROOT / "examples").glob("**/plot_*.py"))
    assert scripts
    gallery_index = (out / "auto_examples" / "index.html").read_text(encoding="utf-8")
    for script in scripts:
        rel = script.relative_to(ROOT / "examples").with_suffix(".html")
        page = out / "auto_examples" / rel
        assert page.is_file(), f"gallery page {rel} was not built"
        assert rel.name in gallery_index, f"{rel.name} is not listed on the gallery index"
        text = page.read_text(encoding="utf-8")
        assert script.with_suffix(".ipynb").name in text, f"{rel} offers no notebook download"


def test_cli_reference_lists_every_command(built):
    from xdem.cli import main

    text = (built["out"] / "cli_reference.html").read_text(encoding="utf-8")
    names = main.list_commands(click.Context(main))
    assert "coreg" in names
    for name in names:
        assert re.search(rf"xdem[- ]{name}", text), f"'xdem {name}' is missing from the CLI reference"


def test_make_docs_builds_with_warnings_as_errors(built, tmp_path):
    """The build above ran `make docs`; a warning must fail that target (sphinx -W)."""
    assert built["proc"].returncode == 0 and (built["out"] / "index.html").exists()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "conf.py").write_text('project = "warning-check"\n')  # a bare Sphinx project
    (tmp_path / "docs" / "index.rst").write_text("Title\n=====\n\n.. toctree::\n\n   missing_page\n")
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    venv = Path(sys.executable).parent
    proc = subprocess.run(["make", "-C", str(tmp_path), "-o", ".venv/.docs-stamp", "-o", ".venv/.installed-stamp",
                           "docs", f"BIN={venv}"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode != 0 and "missing_page" in proc.stdout + proc.stderr
