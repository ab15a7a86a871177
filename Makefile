# Two entry points for a fresh machine with Python 3.10+: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo_output

.PHONY: venv demo test bench docs clean

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

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info
