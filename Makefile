# Every target runs the setup first (it installs missing Debian packages; a no-op when present).
BAZEL ?= bazel
BAZEL_FLAGS ?=

.PHONY: setup build test fuzz demo bench clean

setup:
	@bash tools/setup.sh

build: setup
	$(BAZEL) build $(BAZEL_FLAGS) //...

# Then a bounded run of the graph fuzzer (fuzz/README.md): its regressions, and ~30 s of fuzzing.
test: setup
	$(BAZEL) test $(BAZEL_FLAGS) //...
	@bash fuzz/run.sh bounded

# The graph fuzzer for FUZZ_SECONDS (default 600), growing out/fuzz/corpus across runs.
fuzz: setup
	@bash fuzz/run.sh long

demo: setup
	$(BAZEL) run $(BAZEL_FLAGS) //client:meshrt -- demo

# Benchmarks print tables (never timed in tests): kernels vs raw OpenBLAS, collectives vs raw Gloo
# and PyTorch+gloo, per-step overhead and feed/fetch throughput on a local cluster, training steps
# (MLP, Transformer LM) vs the PyTorch peers.
bench: setup
	@bash tools/setup_bench.sh
	$(BAZEL) build $(BAZEL_FLAGS) -c opt //bench:all
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:einsum_bench
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:collectives_bench
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:cluster_bench
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:reshard_bench
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:train_bench
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:recovery_bench

clean:
	$(BAZEL) clean
	rm -rf out/fuzz
