# Two entry points for a fresh machine with Python 3.10+: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo_output

.PHONY: venv demo test lint bench docs clean chromium-check geoid-check

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	$(BIN)/python -m pip install -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m xdem examples write-pair $(DEMO_DIR) --overwrite
	$(BIN)/xdem coreg $(DEMO_DIR)/ref.tif $(DEMO_DIR)/tba.tif -o $(DEMO_DIR)/aligned.tif --method nuthkaab \
		--overwrite --json-out $(DEMO_DIR)/coreg.json --report $(DEMO_DIR)/report.html
	@echo ""
	@echo "Demo outputs in $(abspath $(DEMO_DIR))/:"
	@echo "  ref.tif, tba.tif   example pair (tba = ref moved by a known shift; truth in truth.json)"
	@echo "  aligned.tif        tba coregistered onto ref (Cloud-Optimized GeoTIFF)"
	@echo "  coreg.json         fitted shifts, 4x4 matrix, dh statistics before/after, timing, memory"
	@echo "  report.html        HTML report (open it in a browser)"

# The suite runs on PYTEST_WORKERS processes (pytest-xdist), a test module per process so that
# module fixtures are built once; the 25 slowest tests are listed at the end. CI has 2 cores: 3
# workers keep them busy while many tests wait on subprocesses, servers and browsers.
# `$(BIN)/python -m pytest -m "not slow"` is the quick loop without the end-to-end tests.
PYTEST_WORKERS ?= 3

test: $(STAMP) chromium-check geoid-check lint
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope --durations=25

# ruff (style, imports, bug patterns) and mypy (types of xdem/), configured in pyproject.toml; fast.
lint: $(STAMP)
	$(BIN)/ruff check xdem tests benchmarks examples
	$(BIN)/mypy

# tests/report/test_report.py opens the HTML report in headless Chromium (Debian: chromium, chromium-driver).
chromium-check:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			chromium chromium-driver fonts-liberation; \
	else \
		echo "WARNING: chromium is missing and cannot be installed (not root): tests/report/test_report.py will fail;" \
		     "install it with: sudo apt-get install -y chromium chromium-driver" >&2; \
	fi

# xdem.vcrs converts to EGM96 with PROJ's grid egm96_15.gtx, shipped by Debian's proj-data
# (/usr/share/proj); nothing is downloaded at run time.
geoid-check:
	@test -f /usr/share/proj/egm96_15.gtx || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends proj-data || \
		 (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends proj-data)); \
	else \
		echo "WARNING: the EGM96 grid is missing and cannot be installed (not root): tests/test_vcrs.py will fail;" \
		     "install it with: sudo apt-get install -y proj-data" >&2; \
	fi

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# Builds the documentation offline into docs/_build/html, warnings being errors; runs the
# gallery examples (add SPHINXOPTS="-D plot_gallery=0" to skip running them).
DOCS_STAMP := $(VENV)/.docs-stamp
SPHINXOPTS ?=

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	MPLBACKEND=Agg $(BIN)/sphinx-build -W -b html docs docs/_build/html $(SPHINXOPTS)
	@echo "Documentation: $(abspath docs/_build/html/index.html)"

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info docs/_build docs/auto_examples docs/sg_execution_times.rst
