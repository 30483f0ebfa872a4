#!/usr/bin/env bash
# Runs the Python package's tests (python/tests, Debian's python3-pytest) from Bazel's runfiles:
# the package's sources, its generated stubs and C++ core sit together under python/meshrt there;
# the tests start the `meshrt` binary's local clusters (MESHRT_BINARY). The pyenv `python3` that
# may come first on PATH has none of the Debian modules: /usr/bin/python3 explicitly.
set -euo pipefail
export MESHRT_BINARY=$PWD/client/meshrt
export PYTHONPATH=$PWD/python
export MESHRT_HOME
MESHRT_HOME=$(mktemp -d "${TEST_TMPDIR:-/tmp}/home.XXXXXX")
export MESHRT_TEST_OUTPUTS=${TEST_UNDECLARED_OUTPUTS_DIR:-$MESHRT_HOME}
cd python
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider -rs tests "$@"
