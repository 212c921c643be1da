# The two commands of the README: `make demo` and `make test`. Both create .venv if needed and
# install the CPU build of torch that this machine has on disk (a plain `pip install torch`
# would pull a multi-GB CUDA build). On a GPU machine install torch your usual way first.
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH ?= torch==2.13.0
export HF_HUB_OFFLINE ?= 1

.PHONY: install demo test test-fast docs benchmarks clean-outputs

$(BIN)/harness: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(BIN)/harness

install: $(BIN)/harness

# Three sweeps and a side-by-side report: the default demo (neutral and instruction-like prefixes
# on the default, obedient story model); the directive control on the obedient model (positive
# control) and on the plain one (negative control): story prefixes carrying a directive, against
# matched prefixes that only mention the same word. Sweeps 2 and 3 draw no figures of their own
# (the side-by-side report has them all; `harness figures DIR` draws one run's): that keeps the demo
# under five minutes on two cores. Rerunning reuses every stored result.
DEMO_OUT ?= outputs/demo
demo: install
	$(BIN)/harness sweep experiment=demo hydra.run.dir=$(DEMO_OUT)/default
	$(BIN)/harness sweep experiment=demo-directives draw_figures=false hydra.run.dir=$(DEMO_OUT)/directives
	$(BIN)/harness sweep experiment=demo-directives-plain draw_figures=false hydra.run.dir=$(DEMO_OUT)/directives-plain
	$(BIN)/harness figures $(DEMO_OUT)/directives $(DEMO_OUT)/directives-plain --out $(DEMO_OUT)/directives-both
	@echo "demo reports: $(DEMO_OUT)/default/report.md and $(DEMO_OUT)/directives-both/report.md (both models side by side)"

# Two workers: the machines this is built on have two cores (each test process uses one thread).
test: install
	$(BIN)/python -m pytest -q -n 2 tests

# Skips the tests that start real processes (CLI, kills, launchers, wheel install); CI runs them all.
test-fast: install
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

# Regenerate the README's figures and the demo reports (docs/) from a fresh demo run.
docs: install
	rm -rf outputs/docs-demo
	$(MAKE) demo DEMO_OUT=outputs/docs-demo
	cp outputs/docs-demo/default/figures/fig1_edit_distance.png outputs/docs-demo/default/figures/fig2_layer_drift.png docs/
	cp outputs/docs-demo/default/report.md docs/demo-report.md
	cp outputs/docs-demo/directives-both/report.md docs/demo-directives-report.md
	cp outputs/docs-demo/directives-both/figures/fig8_hit_rate.png docs/fig3_hit_rate.png

benchmarks: install
	$(BIN)/python benchmarks/attention_memory.py
	$(BIN)/python benchmarks/throughput.py

clean-outputs:
	rm -rf outputs multirun
