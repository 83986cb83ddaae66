# gradcomp: `make bench` and `make test` are all a user types on a fresh Debian/Ubuntu.
SHELL := /bin/bash
NP ?= 4
MPIRUN ?= mpirun
CONFIG ?= bench-configs/laptop.toml
STAMP := $(shell date -u +%Y%m%d-%H%M%S)
OUT ?= results/$(STAMP)
# Open MPI refuses to run as root and to oversubscribe cores unless told; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
MPIFLAGS ?= $(shell $(MPIRUN) --version 2>&1 | grep -q 'Open MPI' && echo --oversubscribe --bind-to none)

.PHONY: setup build methods-json bench lint layers check test report paper paper-scale sim-accuracy sim-accuracy-twice planner-accuracy repeatability peer-compare netlab-bench ci-slurm ci-mpich clean

## setup: install missing Debian packages (as root or via sudo) and the analysis venv
setup:
	@bash scripts/setup.sh

## build: release build of the gradcomp binary
build: setup
	cargo build --release

## methods-json: regenerate analysis/methods.json, the committed output of `gradcomp methods --json`
## (generated documentation the analysis package reads; tests/methods_json.rs fails until it is current)
methods-json:
	cargo build --release
	target/release/gradcomp methods --json > analysis/methods.json

## bench: build, run the quick suite on $(NP) ranks, write CSV + report under results/
bench: build
	$(MPIRUN) $(MPIFLAGS) -np $(NP) target/release/gradcomp run $(CONFIG) --out $(OUT)
	if grep -q '^\[\[converge\]\]' $(CONFIG); then OPENBLAS_NUM_THREADS=1 $(MPIRUN) $(MPIFLAGS) -np $(NP) \
	  target/release/gradcomp converge --config $(CONFIG) --out $(OUT); fi
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(OUT)
	@echo "results: $(OUT)  (report: $(OUT)/report/report.md)"

## lint: the formatting, layering and clippy gate (lint levels in Cargo.toml's [lints]); `make test` runs it first
lint: setup
	cargo fmt --check
	python3 scripts/check_layers.py
	cargo clippy --all-targets -- -D warnings

## layers: every import points down the layers of docs/architecture.md ("Layers"), whose table matches the code
layers:
	python3 scripts/check_layers.py

## check: the developer's inner loop (under 2 minutes on 2 cores with a warm build cache):
## format, layers, clippy, the library's unit tests (the loopback schedule test among them:
## src/sim/tests/engine_vs_sim.rs), in cargo's test profile, no mpirun. `make test` stays the full gate.
check:
	cargo fmt --check
	python3 scripts/check_layers.py
	cargo clippy --all-targets -- -D warnings
	cargo test --lib

## test: the lint gate, unit tests, MPI integration tests (-np 2 and -np 3), analysis tests
test: lint
	cargo test --release
	cargo build --release
	.venv/bin/python -m pytest -q analysis/tests --cov=analysis/gradcomp_analysis --cov-branch --cov-report=term:skip-covered --cov-fail-under=90

## mutants: mutation testing of the change (scripts/mutants.sh; docs/mutation.md says how to read it):
## mutmut on the changed analysis modules, cargo-mutants on the changed Rust files, each survivor
## printed with its diff. BASE=REV judges what changed against REV (default: the merge base with
## origin/main); ARGS="--python-only" (or --rust-only, --all) passes options through;
## MUTMUT_MODULES="compare.py", MUTANTS_RUST_FILES="src/schedule/*.rs", MUTANTS_OUT=DIR, MUTANTS_TARGET_DIR=DIR and
## MUTMUT_CHILDREN=N reach the script too. Exit 1 when a mutant survived.
.PHONY: mutants
mutants: setup
	scripts/mutants.sh $(ARGS) $(BASE)

## report: regenerate the report of OUT=results/... (several runs or a sweep folder work too)
report: setup
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(OUT)

## paper: EXP=acpsgd-main (etc.) — the laptop variant of a paper experiment, then its report;
## NP=2,4 runs one world size after the other into OUT/np2, OUT/np4 (scaling tables)
paper: build
	@set -e; case "$(NP)" in *,*) for n in $$(echo "$(NP)" | tr , ' '); do \
	    echo "$(MPIRUN) -np $$n ... --out $(OUT)/np$$n"; \
	    $(MPIRUN) $(MPIFLAGS) -np $$n target/release/gradcomp run bench-configs/$(EXP)-laptop.toml --out $(OUT)/np$$n; done ;; \
	  *) $(MPIRUN) $(MPIFLAGS) -np $(NP) target/release/gradcomp run bench-configs/$(EXP)-laptop.toml --out $(OUT) ;; esac
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(OUT)

## paper-scale: every paper's headline setup through `gradcomp simulate` with compression on
## the host and on a GPU model (scripts/paper_scale.sh, seconds), into OUT=results/paper-scale,
## then its report (section "Paper scale (simulated)") and the verdicts with their counts. Exit 1 when a headline's simulate failed.
## PAPER_SCALE_PROFILE_DIR=docs/data/h200-2026-11-26 prices device compression by that measured GPU profile.
PAPER_SCALE_OUT ?= results/paper-scale
paper-scale: build
	@rc=0; GRADCOMP=target/release/gradcomp bash scripts/paper_scale.sh $(PAPER_SCALE_OUT) || rc=1; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(PAPER_SCALE_OUT) || rc=1; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis verdicts $(PAPER_SCALE_OUT) || rc=1; \
	echo "report: $(PAPER_SCALE_OUT)/report/report.md (section Paper scale (simulated))"; exit $$rc

## sim-accuracy: simulated vs measured iter_s at 2 and 4 ranks, fails outside 15% (issue 5's
## accuracy test, ~4.5 min on 2 cores (7 rounds); a timing measurement, so not part of `make test`)
sim-accuracy: build
	@rc=0; for n in 2 4; do d=$(OUT)/np$$n; \
	  $(MPIRUN) $(MPIFLAGS) -np $$n target/release/gradcomp run bench-configs/sim-accuracy.toml --out $$d --quiet || exit 1; \
	  target/release/gradcomp simulate --fits $$d --compare $$d/e2e.csv --out $$d/sim --tolerance 0.15 || rc=1; \
	done; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(OUT) || rc=1; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis sim-accuracy $(OUT) || rc=1; \
	echo "report: $(OUT)/report/report.md (section Simulator accuracy)"; exit $$rc

## sim-accuracy-twice: `make sim-accuracy` into OUT/a, then again into OUT/b, then whether
## every case got the same verdict both times (issue 29's acceptance on one quiet machine;
## gradcomp_analysis sim-agreement, per-case table OUT/agreement.csv; ~9 min on 2 cores);
## exit 1 when a verdict changed or a case is outside 15%
sim-accuracy-twice: build
	@rc=0; $(MAKE) --no-print-directory sim-accuracy OUT=$(OUT)/a || rc=1; \
	$(MAKE) --no-print-directory sim-accuracy OUT=$(OUT)/b || rc=1; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis sim-agreement $(OUT)/a $(OUT)/b \
	  --out $(OUT)/agreement.csv || rc=1; exit $$rc

## planner-accuracy: each planner fusion's predicted planned_s vs measured bwd_sync_s at 2
## ranks (bench-configs/planner-accuracy.toml), exit 1 outside 25% (the fidelity issue's
## item 6; a timing measurement, so not part of `make test`: run it on a quiet machine)
planner-accuracy: build setup
	$(MPIRUN) $(MPIFLAGS) -np 2 target/release/gradcomp run bench-configs/planner-accuracy.toml --out $(OUT) --quiet
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis planner-accuracy $(OUT)

## repeatability: every laptop paper config twice, each case's median within 10% and no
## significant conclusion reversed (scripts/repeatability.sh into OUT; CONFIGS="omgs marsit"
## for a subset; ~15 min on 2 cores; a timing measurement: run it on a quiet machine)
repeatability: build setup
	scripts/repeatability.sh $(OUT) $(CONFIGS)

## peer-compare: gradcomp's kernels against the same methods in PyTorch on this CPU, one thread
## each, same shape (PEER_SHAPE, a 25.56 M-element matrix): PEER_ROUNDS rounds of `micro-compress
## -np 1` and `analysis/profile_compress.py --device cpu`, alternated, into PEER_OUT; then the
## table (step times, GB/s, speed-up, share of the memory read bandwidth, roofline; docs/performance.md,
## "Compression kernels"). PyTorch lives in its own venv, TORCH_VENV (created with `pip install
## torch` when it cannot import torch; not part of `make setup`). Both sides put their large buffers on
## transparent huge pages (gradcomp always, src/measure/pages.rs; PyTorch with THP_MEM_ALLOC_ENABLE=1).
## About 10 minutes on 2 cores.
PEER_OUT ?= results/peer-$(STAMP)
PEER_METHODS ?= ssgd,signsgd,signsgd-mv,topk,dgc,powersgd,acpsgd,marsit,sketch,qsgd
PEER_SHAPE ?= 5057x5054
PEER_ROUNDS ?= 3
PEER_ITERS ?= 5
PEER_WARMUP ?= 1
TORCH_VENV ?= .venv-torch
peer-compare: build
	@if ! $(TORCH_VENV)/bin/python -c 'import torch' 2>/dev/null; then \
	  echo "creating $(TORCH_VENV) with PyTorch (pip install torch)"; \
	  python3 -m venv $(TORCH_VENV) && $(TORCH_VENV)/bin/pip install --quiet torch numpy || exit 1; fi
	@set -e; for r in $$(seq 1 $(PEER_ROUNDS)); do \
	  echo "round $$r of $(PEER_ROUNDS): gradcomp micro-compress, then PyTorch"; \
	  OPENBLAS_NUM_THREADS=1 $(MPIRUN) $(MPIFLAGS) -np 1 target/release/gradcomp micro-compress --methods $(PEER_METHODS) \
	    --shape $(PEER_SHAPE) --iters $(PEER_ITERS) --warmup $(PEER_WARMUP) --out $(PEER_OUT)/gradcomp-$$r --quiet; \
	  OMP_NUM_THREADS=1 THP_MEM_ALLOC_ENABLE=1 C10_THP_MEM_ALLOC_ENABLE=1 $(TORCH_VENV)/bin/python analysis/profile_compress.py --device cpu --cpu-threads 1 --world-size 1 \
	    --methods $(PEER_METHODS) --shapes $(PEER_SHAPE) --iters $(PEER_ITERS) --warmup $(PEER_WARMUP) \
	    --out $(PEER_OUT)/torch-$$r.csv; \
	done
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis peer-compare $(PEER_OUT)
	@echo "tables: $(PEER_OUT)/peer_compare.md, peer_compare.csv, roofline_goals.csv"

## netlab-bench: an emulated cluster on this machine (scripts/netlab.sh; root, iproute2, tbf):
## NETLAB_NODES=4 network namespaces at NETLAB_RATE=1gbit. micro-comm (ring and MPI
## all-reduce, 1-64 MiB), the ACP-SGD main and OMGS laptop configs, the sim-accuracy config at
## 2 and 4 nodes with the simulator's comparison (fitted from that run, 15%), the ACP-SGD main
## config once more over shared memory (labelled shm: the report's acpsgd_network table),
## then the report. About 7 minutes on 2 cores after the build. Exit 1 when a step or the 15% fails.
## NETLAB_DILATION=K: the lab time-dilated by K (about K times longer).
NETLAB_NODES ?= 4
NETLAB_RATE ?= 1gbit
# Time dilation K of the lab (scripts/netlab.sh up --dilate; docs/performance.md, "Time
# dilation", how to choose K). Not named NETLAB_DILATE, which gradcomp reads.
NETLAB_DILATION ?= 1
NETLAB := bash scripts/netlab.sh
netlab-bench: build
	$(NETLAB) down >/dev/null
	$(NETLAB) up $(NETLAB_NODES) --rate $(NETLAB_RATE) --dilate $(NETLAB_DILATION)
	@rc=0; \
	$(NETLAB) run -- micro-comm --collectives ring-allreduce,allreduce --min-bytes 1MiB --max-bytes 64MiB \
	  --iters 10 --warmup 2 --out $(OUT)/micro-comm || rc=1; \
	$(NETLAB) run -- run bench-configs/acpsgd-main-laptop.toml --out $(OUT)/acpsgd-main --quiet || rc=1; \
	$(NETLAB) run -- run bench-configs/omgs-laptop.toml --out $(OUT)/omgs --quiet || rc=1; \
	for n in 2 $(NETLAB_NODES); do d=$(OUT)/sim-accuracy/np$$n; \
	  $(NETLAB) run --np $$n -- run bench-configs/sim-accuracy.toml --out $$d --quiet || rc=1; \
	  target/release/gradcomp simulate --fits $$d --compare $$d/e2e.csv --out $$d/sim --tolerance 0.15 || rc=1; \
	done; \
	$(NETLAB) down; \
	mkdir -p $(OUT)/acpsgd-main-shm && echo shm > $(OUT)/acpsgd-main-shm/network.txt; \
	$(MPIRUN) $(MPIFLAGS) -np $(NETLAB_NODES) target/release/gradcomp run bench-configs/acpsgd-main-laptop.toml \
	  --out $(OUT)/acpsgd-main-shm --quiet || rc=1; \
	PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $(OUT) || rc=1; \
	echo "results: $(OUT)  (report: $(OUT)/report/report.md)"; exit $$rc

## ci-slurm: one-node Slurm cluster, sbatch slurm/gradcomp.sbatch on 2 tasks (root)
ci-slurm: build
	bash scripts/ci_slurm.sh

## ci-mpich: build against MPICH (target-mpich/) and run under mpirun.mpich
ci-mpich: setup
	CI_MPICH_TESTS=1 bash scripts/ci_mpich.sh

clean:
	cargo clean
