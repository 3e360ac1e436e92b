# richlazy — set-up, tests and the figure pipeline.
# `make demo` and `make test` work on a fresh machine: both install first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RICHLAZY := $(BIN)/richlazy
JOBS   ?= 2

RESULTS := results
REPORTS := reports

.PHONY: install demo test test-quick test-claims test-slow lint bench clean help fig3 fig1b-small fig1a azulay-small \
	fig5a fig5b-small fig7 fig8 fig10 linear-b1 ren-sgd-dscaling ren-width \
	fig6a-small fig6b-small fig6c-small fig6d-reduced

help:
	@echo "make install   create .venv and install richlazy (editable, all extras)"
	@echo "make demo      install, then run the demo sweeps and report"
	@echo "make test      install, then run the test suite"
	@echo "make test-quick  the unit tests of numerics, models and engine (about a minute)"
	@echo "make test-claims  the papers' claims, cheapest honest versions (marker claims)"
	@echo "make lint      ruff and mypy (richlazy_cli and richlazy)"
	@echo "make bench     run the benchmark scripts in bench/"
	@echo "make fig3      single-neuron theory against simulation -> reports/fig3/index.html"
	@echo "make fig1b-small  two-layer (tau, delta) phase diagram -> reports/fig1b-small/"
	@echo "make fig1a fig5a fig5b-small fig7 fig8 fig10  Kunin et al. figures -> reports/<name>/"
	@echo "make linear-b1 azulay-small  linear and diagonal theory -> reports/<name>/"
	@echo "make ren-sgd-dscaling ren-width  Ren et al. scaling laws -> reports/<name>/"
	@echo "make fig6a-small  LeNet kernel/Hamming/parameter distance vs alpha (practice extra)"
	@echo "make fig6b-small  first-layer filter smoothness (roughness) vs alpha on digits24"
	@echo "make fig6c-small  random hierarchy model: accuracy vs training fraction and alpha"
	@echo "make fig6d-reduced  grokking of modular arithmetic: steps to grokking vs alpha"
	@echo "make paper     every paper figure from small runs -> reports/paper/index.html"
	@echo "make paper-full  the same from the paper-scale results -> reports/paper-full/"
	@echo "make paper-gpu  the six headline jobs at paper scale on one GPU -> results/gpu/ (resumable)"

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dask,dev,practice]'
	touch $(STAMP)

# -- the figure pipeline: jobs/*.toml -> results/*.h5 -> reports/<name>/index.html ----------
# Make's timestamps rebuild only what is out of date. A sweep never throws work away:
# `--continue --force` resumes an interrupted sweep of the same job (richlazy compares the
# sweep's fingerprint: model, parameters, grid, input files), does nothing when its result is
# complete (a job file touched but unchanged; `touch` then marks the result up to date), and
# starts over only when the job file changed what it computes (docs/cluster.md).
SWEEP_KEEP := --continue --force
$(RESULTS)/%.h5: jobs/%.toml | $(STAMP)
	@mkdir -p $(dir $@)
	$(RICHLAZY) sweep -c $< -o $@ $(SWEEP_KEEP) && touch $@

.PRECIOUS: $(RESULTS)/%.h5   # keep the results make would delete as intermediates

$(REPORTS)/%/index.html: $(RESULTS)/%.h5
	$(RICHLAZY) report $< -o $(REPORTS)/$* -q
	@echo "report: $@"

$(RESULTS)/fig3.h5: jobs/single-neuron-delta.toml | $(STAMP)
	$(RICHLAZY) sweep -c $< -o $@ $(SWEEP_KEEP) && touch $@

fig3: $(REPORTS)/fig3/index.html
fig1b-small: $(REPORTS)/fig1b-small/index.html
fig1a: $(REPORTS)/fig1a/index.html
fig5a: $(REPORTS)/fig5a/index.html
fig5b-small: $(REPORTS)/fig5b-small/index.html
fig7: $(REPORTS)/fig7/index.html
fig8: $(REPORTS)/fig8/index.html
fig10: $(REPORTS)/fig10-reduced/index.html
azulay-small: $(REPORTS)/azulay-diagonal-small/index.html
fig6a-small: $(REPORTS)/cnn-digits-alpha-small/index.html
fig6b-small: $(REPORTS)/filters-digits24-small/index.html
fig6c-small: $(REPORTS)/rhm-alpha-small/index.html
fig6d-reduced: $(REPORTS)/grokking-reduced/index.html
ren-sgd-dscaling: $(REPORTS)/ren-sgd-dscaling/index.html
ren-width: $(REPORTS)/ren-width/index.html

# Ren et al.'s scaling fits (report --kind scaling)
$(REPORTS)/ren-%/index.html: $(RESULTS)/ren-%.h5
	$(RICHLAZY) report $< -o $(REPORTS)/ren-$* --kind scaling -q
	@echo "report: $@"

# Theorem B.1: three network shapes, one figure
LINEAR_B1 := $(RESULTS)/linear-b1-narrowing.h5 $(RESULTS)/linear-b1-expanding.h5 \
	$(RESULTS)/linear-b1-wide.h5
$(REPORTS)/linear-b1/index.html: $(LINEAR_B1)
	$(RICHLAZY) report $^ -o $(REPORTS)/linear-b1 -q
	@echo "report: $@"
linear-b1: $(REPORTS)/linear-b1/index.html

# -- the demo: a small two-layer (tau, delta) sweep and the single-neuron delta sweep ---------
DEMO_RESULTS := $(RESULTS)/demo/two-layer.h5 $(RESULTS)/demo/single-neuron-delta.h5

$(RESULTS)/demo/two-layer.h5: jobs/demo-two-layer.toml | $(STAMP)
	@mkdir -p $(dir $@)
	$(RICHLAZY) sweep -c $< -o $@ --jobs $(JOBS) $(SWEEP_KEEP) && touch $@

$(RESULTS)/demo/single-neuron-delta.h5: jobs/single-neuron-delta.toml | $(STAMP)
	@mkdir -p $(dir $@)
	$(RICHLAZY) sweep -c $< -o $@ --jobs $(JOBS) $(SWEEP_KEEP) && touch $@

$(REPORTS)/demo/index.html: $(DEMO_RESULTS)
	$(RICHLAZY) report $^ -o $(REPORTS)/demo -q

demo: install $(REPORTS)/demo/index.html
	@echo "results: $(DEMO_RESULTS)"
	@echo "report:  $(REPORTS)/demo/index.html"

# The fast tier on TEST_WORKERS pytest-xdist workers (2: the documented machine); the tests that
# start, signal or wait on processes run one at a time on one of them (tests/conftest.py).
# Prints its wall time and its 20 slowest tests. Then the SLURM tier, alone: its jobs share
# the node's 2 CPUs with nothing else (tests/slurm/; skipped where no SLURM runs).
TEST_WORKERS ?= 2
test: install
	@start=$$(date +%s); rc=0; $(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS) --dist loadgroup \
		-m 'not slow and not claims and not slurm' --durations=20 || rc=$$?; \
		echo "fast tier: $$(( $$(date +%s) - start )) s"; \
	start=$$(date +%s); $(BIN)/python -m pytest -q -rs -m slurm || rc=$$?; \
		echo "slurm tier: $$(( $$(date +%s) - start )) s"; exit $$rc

# The inner loop: the unit tests of the numerics, the models and the engine (no process
# started, no job file run); about a minute on 2 cores.
test-quick: install
	@start=$$(date +%s); rc=0; $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m quick \
		--durations=5 || rc=$$?; echo "quick tier: $$(( $$(date +%s) - start )) s"; exit $$rc

# The claims tier (docs/claims.md): excluded from `make test` by pyproject's addopts,
# run by .ci/run on every change; prints its wall time.
test-claims: install
	@start=$$(date +%s); rc=0; $(BIN)/python -m pytest -q -m claims --durations=10 || rc=$$?; \
	echo "claims tier: $$(( $$(date +%s) - start )) s"; exit $$rc

test-slow: install
	$(BIN)/python -m pytest -q -m slow

lint: install
	$(BIN)/ruff check richlazy_cli richlazy tests bench examples scripts
	$(BIN)/mypy

bench: install
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) results/*.h5 reports

# -- the paper gallery: every registered figure in paper order (docs/figures.md) ------------
# `make paper` runs the small job files of jobs/paper/ (about 15-25 min on 2 cores) and draws
# reports/paper/index.html; `make paper-full` draws it from the paper-scale job files (days on
# 2 cores: run those sweeps on a GPU or a cluster first, then make paper-full draws them).
.PHONY: paper paper-full
PAPER_RESULTS := $(patsubst jobs/paper/%.toml,$(RESULTS)/paper/%.h5,$(wildcard jobs/paper/*.toml))
PAPER_FULL_RESULTS := $(addprefix $(RESULTS)/,fig1a.h5 fig1b.h5 single-neuron-delta.h5 \
	fig5a.h5 cnn-digits-alpha.h5 filters-digits24.h5 rhm-alpha.h5 grokking-alpha.h5 fig7.h5 \
	fig8.h5 azulay-diagonal.h5 azulay-fc.h5 ren-fig2-small.h5 ren-fig2.h5 ren-sgd-dscaling.h5 \
	paper/kunin-fig4b.h5)

$(RESULTS)/paper/%.h5: jobs/paper/%.toml | $(STAMP)
	@mkdir -p $(dir $@)
	$(RICHLAZY) sweep -c $< -o $@ --jobs $(JOBS) $(SWEEP_KEEP) -q && touch $@

paper: $(PAPER_RESULTS)
	$(RICHLAZY) figure --gallery $(RESULTS) -o $(REPORTS)/paper -q
	@echo "gallery: $(REPORTS)/paper/index.html"

paper-full: $(PAPER_FULL_RESULTS)
	$(RICHLAZY) figure --gallery $(RESULTS) --full -o $(REPORTS)/paper-full -q
	@echo "gallery: $(REPORTS)/paper-full/index.html"

# -- the paper-scale experiments on one GPU ---------------------------------------------------
# `make paper-gpu` (or `make paper-gpu-JOB`, JOB one of PAPER_GPU) runs each headline job at the
# paper's scale on one CUDA device: first its dry run (plan and estimated time; without a GPU the
# plan and size, the device said absent; the sweep then refuses in one line, exit 2), then the
# sweep, resumable: after an interruption the same
# command continues where it stopped (--continue). Results go to results/gpu/JOB.h5, apart
# from the CPU pipeline's results; `richlazy report results/gpu/JOB.h5 -o DIR` draws them.
.PHONY: paper-gpu
GPU_RESULTS := $(RESULTS)/gpu
PAPER_GPU := fig1b ren-fig2 grokking-alpha rhm-alpha cnn-digits-alpha filters-digits24
GPU_JOB_fig1b := jobs/fig1b-gpu.toml
GPU_ARGS_ren-fig2 := -p implementation=torch -p device=cuda
GPU_ARGS_grokking-alpha := -p device=cuda --chunk-size 25
GPU_ARGS_rhm-alpha := -p device=cuda --chunk-size 84
GPU_ARGS_cnn-digits-alpha := -p device=cuda --chunk-size 8
GPU_ARGS_filters-digits24 := -p device=cuda --chunk-size 5
gpu_sweep = $(RICHLAZY) sweep -c $(or $(GPU_JOB_$(1)),jobs/$(1).toml) -o $(GPU_RESULTS)/$(1).h5 \
	$(GPU_ARGS_$(1)) --jobs 1

paper-gpu-%: | $(STAMP)
	@$(call gpu_sweep,$*) --dry-run
	@mkdir -p $(GPU_RESULTS)
	$(call gpu_sweep,$*) $(SWEEP_KEEP)

paper-gpu: $(addprefix paper-gpu-,$(PAPER_GPU))
	@echo "results: $(addprefix $(GPU_RESULTS)/,$(addsuffix .h5,$(PAPER_GPU)))"
