# Every target runs the setup first (it installs missing Debian packages; a no-op when present).
BAZEL ?= bazel
BAZEL_FLAGS ?=

.PHONY: setup build test fuzz demo bench clean

setup:
	@bash tools/setup.sh

build: setup
	$(BAZEL) build $(BAZEL_FLAGS) //...

# Then the layering check (core/README.md: no library depends on a higher layer), and a bounded
# run of the graph fuzzer (fuzz/README.md): its regressions, and ~30 s of fuzzing.
test: setup
	$(BAZEL) test $(BAZEL_FLAGS) //...
	@bash tools/check_layers.sh
	@python3 tools/check_code_shape.py
	@bash fuzz/run.sh bounded

# The graph fuzzer for FUZZ_SECONDS (default 600), growing out/fuzz/corpus across runs.
fuzz: setup
	@bash fuzz/run.sh long

demo: setup
	$(BAZEL) run $(BAZEL_FLAGS) //client:meshrt -- demo

# Benchmarks print tables (never timed in tests): kernels vs raw OpenBLAS, collectives vs raw Gloo
# and PyTorch+gloo, per-step overhead and feed/fetch throughput on a local cluster, training steps
# (MLP, Transformer LM at two sizes) vs the PyTorch peers, each side on its own fastest correct
# OpenBLAS core, and the cost model's predicted step times against measured ones (plan_bench).
# The core presets below are removed for the benchmark commands alone (never for tests or CI);
# MESHRT_BENCH_UNSET tells train_bench what was removed, which it prints.
BENCH_PRESETS := OPENBLAS_CORETYPE OPENBLAS_L2_SIZE MESHRT_BLAS_CORETYPE
BENCH_UNSET := $(strip $(foreach v,$(BENCH_PRESETS),$(if $(findstring environment,$(origin $(v))),$(v)=$($(v)))))
BENCH_ENV := env $(foreach v,$(BENCH_PRESETS),-u $(v)) MESHRT_BENCH_UNSET='$(BENCH_UNSET)'

bench: setup
	@bash tools/setup_bench.sh
	@echo "bench: core presets removed for the benchmarks: $(or $(BENCH_UNSET),none were set)"
	$(BAZEL) build $(BAZEL_FLAGS) -c opt //bench:all
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:einsum_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:row_kernels_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:collectives_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:cluster_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:reshard_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:train_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:plan_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:recovery_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:checksum_bench
	$(BENCH_ENV) $(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:decode_bench

clean:
	$(BAZEL) clean
	rm -rf out/fuzz
