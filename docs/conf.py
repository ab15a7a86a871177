"""Sphinx configuration of the xdem documentation.

Builds offline (no intersphinx, no remote images) and without warnings:
``make docs`` runs ``sphinx-build -W -b html docs docs/_build/html``.
Add ``-D plot_gallery=0`` to build the gallery pages without running the examples.

Extensions: autodoc + autosummary (API), numpydoc (docstrings), sphinx-gallery (examples),
myst-parser (the Markdown topic pages), sphinx-click (the command-line reference).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

from docutils.statemachine import StringList
from sphinx.directives.other import TocTree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Documents the checked-out sources even when another xdem is installed.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))  # gallery_order.py
os.environ.setdefault("MPLBACKEND", "Agg")

import xdem  # noqa: E402

# -- Project -----------------------------------------------------------------------------
project = "xdem"
author = "xdem contributors"
copyright = "xdem contributors"  # noqa: A001
version = release = xdem.__version__

# -- General -----------------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "sphinx_click",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.md5", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []
language = "en"
pygments_style = "sphinx"

# -- autodoc / autosummary / numpydoc ----------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# keep the aliases of xdem.typing short in signatures (DEMLike, not the union it stands for)
autodoc_type_aliases = {"DEMLike": "xdem.typing.DEMLike", "MaskLike": "xdem.typing.MaskLike",
                        "PointsLike": "xdem.typing.PointsLike", "CRSLike": "xdem.typing.CRSLike",
                        "BiasVars": "xdem.typing.BiasVars", "PointBiasVars": "xdem.typing.PointBiasVars",
                        "BinSpec": "xdem.typing.BinSpec", "BinSizes": "xdem.typing.BinSizes",
                        "Params": "xdem.typing.Params", "JSONValue": "xdem.typing.JSONValue",
                        "JSONDict": "xdem.typing.JSONDict"}
autodoc_default_options = {"show-inheritance": True}
autosummary_generate = False  # tables only: every object is documented by hand in api.rst
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
# numpydoc also parses raw docstrings (for signatures and summaries) before the hook below
# renames the section; the content is rendered, so its "unknown section" notice is noise.
warnings.filterwarnings("ignore", message=r"Unknown section Learned Attributes", category=UserWarning)

# -- myst (Markdown topic pages) ---------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# -- sphinx-gallery ----------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"(__init__|conftest)\.py",
    "subsection_order": ["../examples/basic", "../examples/advanced", "../examples/upstream"],
    "within_subsection_order": "gallery_order.ExampleOrder",
    "plot_gallery": "True",
    "download_all_examples": True,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "first_notebook_cell": None,
    "show_memory": False,
    "min_reported_time": 1,
    "only_warn_on_example_error": False,
    "abort_on_example_error": False,
}

# -- HTML --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"xdem {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
html_copy_source = False


# -- Local additions ---------------------------------------------------------------------
_LEARNED = re.compile(r"^Learned attributes\s*$")


def _learned_attributes(app, what, name, obj, options, lines) -> None:
    """Read the project's ``Learned attributes`` docstring section as numpydoc's ``Attributes``.

    Coregistration classes list what ``fit`` learns (names ending in ``_``) under that
    heading, in the scikit-learn spirit; numpydoc only knows ``Attributes``.
    """
    for i, line in enumerate(lines[:-1]):
        if _LEARNED.match(line) and set(lines[i + 1].strip()) == {"-"}:
            lines[i] = "Attributes"
            lines[i + 1] = "----------"


def _entry_docname(entry: str) -> str:
    """Document name of a toctree entry (``page`` or ``Title <page>``)."""
    match = re.match(r"^(.*)<(.+)>\s*$", entry)
    return (match.group(2) if match else entry).strip()


class OptionalTocTree(TocTree):
    """A ``toctree`` whose entries are skipped while their page does not exist yet.

    Topic pages are written by several people (``docs/*.md``); the site builds without
    warnings whichever exist. With ``:others:``, Markdown pages of the ``docs`` folder that
    no toctree lists are appended, so a new page is never orphaned.
    """

    option_spec = {**TocTree.option_spec, "others": lambda arg: True}

    def run(self):
        env = self.state.document.settings.env
        found = env.found_docs
        listed = set()
        kept = []
        for line in self.content:
            name = _entry_docname(line)
            listed.add(name)
            if not name or name in found:
                kept.append(line)
        if "others" in self.options:
            claimed = set(LISTED_PAGES) | listed
            for doc in sorted(found):
                if "/" in doc or doc in claimed or doc == env.docname:
                    continue
                if env.doc2path(doc).suffix == ".md":
                    kept.append(doc)
        self.options.pop("others", None)
        self.content = StringList(kept, source=self.content.source(0) if self.content else "")
        return super().run()


# Pages listed by a toctree somewhere (so that ``:others:`` does not list them twice).
LISTED_PAGES = [
    "quickstart", "how_it_works", "auto_examples/index", "terrain", "biascorr", "spatialstats",
    "report", "cli", "cli_reference", "performance", "api", "credits", "changelog",
]


def setup(app):
    app.add_directive("optional-toctree", OptionalTocTree)
    app.connect("autodoc-process-docstring", _learned_attributes, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
