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
	$(BIN)/xdem coreg $(DEMO_DIR)/ref.tif $(DEMO_DIR)/tba.tif -o $(DEMO_DIR)/aligned.tif --method nuthkaab --overwrite --json-out $(DEMO_DIR)/coreg.json
	@echo "Demo outputs are in $(DEMO_DIR)/: ref.tif, tba.tif, aligned.tif (COG), coreg.json"

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info
