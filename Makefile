# Every target runs the setup first (it installs missing Debian packages; a no-op when present).
BAZEL ?= bazel
BAZEL_FLAGS ?=

.PHONY: setup build test demo bench clean

setup:
	@bash tools/setup.sh

build: setup
	$(BAZEL) build $(BAZEL_FLAGS) //...

test: setup
	$(BAZEL) test $(BAZEL_FLAGS) //...

demo: setup
	$(BAZEL) run $(BAZEL_FLAGS) //client:meshrt -- demo

bench: setup
	$(BAZEL) run $(BAZEL_FLAGS) -c opt //bench:einsum_bench

clean:
	$(BAZEL) clean
