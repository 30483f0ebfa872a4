#!/usr/bin/env bash
# `pip install ./python` as python/README.md "Install" tells a user, offline (no index, no build
# isolation), from a repository laid out as `make build` leaves it (python/ beside bazel-bin/):
#   - without the Bazel outputs the install fails, naming the command that builds them;
#   - into a venv made with --system-site-packages (Debian's grpcio, protobuf, numpy, pytest), the
#     dependencies checked against Debian's packages, and with Debian's /usr/bin/python3 into a user
#     site (--user --break-system-packages --no-deps);
#   - each install reports util/version.h's version (`python -m meshrt --version`, the metadata),
#     carries its own copy of the meshrt binary, and runs the CLI through `python -m meshrt`;
#   - with the repository copy deleted and no PYTHONPATH, python/tests (graphs, a local cluster,
#     docstrings) pass against the installed package.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/pip_install.XXXXXX")
work=$tmp/work  # the directory every Python runs in: nothing importable there
mkdir -p "$work"

# pip offline and hermetic: no index (a missing dependency fails instead of downloading), no
# configuration or cache of this machine's.
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
# Nothing may reach the package but the install: no PYTHONPATH, no hints at the repository, no
# user site (a venv with system site packages would put it before its own).
unset PYTHONPATH MESHRT_BINARY MESHRT_BAZEL_BIN MESHRT_PYTHON_GENERATED
export PYTHONNOUSERSITE=1
export MESHRT_HOME=$tmp/home

version=$(sed -n 's/.*kMeshrtVersion\[\] = "\([^"]*\)";.*/\1/p' util/version.h)
[ -n "$version" ] || fail "no kMeshrtVersion in util/version.h"

# The repository after `make build`: python/ holds the sources only, bazel-bin/ the generated
# pieces (in the runfiles they sit together under python/meshrt; move them out).
repo=$tmp/repo
mkdir -p "$repo/bazel-bin/python/meshrt" "$repo/bazel-bin/client"
cp -rL python "$repo/python"
for g in _proto _core.so _version.py; do
  mv "$repo/python/meshrt/$g" "$repo/bazel-bin/python/meshrt/"
done
cp -L client/meshrt "$repo/bazel-bin/client/meshrt"
cp -rL python/tests "$tmp/tests"

venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages "$venv"
py=$venv/bin/python

echo "== without the Bazel outputs: a clear failure"
mkdir -p "$tmp/bare"
cp -r "$repo/python" "$tmp/bare/python"
if (cd "$work" && "$py" -m pip install --no-build-isolation "$tmp/bare/python") \
  >"$tmp/bare.log" 2>&1; then
  fail "pip installed a package without its generated files"
fi
grep -qF "bazel build //python:package //client:meshrt" "$tmp/bare.log" ||
  { cat "$tmp/bare.log"; fail "the failed install does not name the build command"; }
grep -qF "$tmp/bare/bazel-bin: missing python/meshrt/_proto" "$tmp/bare.log" ||
  { cat "$tmp/bare.log"; fail "the failed install does not say what it looked for"; }
if (cd "$work" && "$py" -c "import meshrt") 2>/dev/null; then
  fail "meshrt is importable after a failed install"
fi

echo "== pip install into a venv (--system-site-packages)"
(cd "$work" && "$py" -m pip install --no-build-isolation "$repo/python")

echo "== pip install --user with Debian's /usr/bin/python3"
userbase=$tmp/userbase
(cd "$work" && env -u PYTHONNOUSERSITE PYTHONUSERBASE="$userbase" \
  /usr/bin/python3 -m pip install --user --break-system-packages --no-build-isolation \
  --no-deps "$repo/python")

# Both installs stand alone from here.
rm -rf "$repo"

# check_install LABEL SITE PYTHON...: the install of PYTHON (a command) lives under SITE, reports
# util/version.h's version, and runs its own copy of the meshrt binary.
check_install() {
  local label=$1 site=$2
  shift 2
  local package out python_version expected
  package=$(cd "$work" && "$@" -c 'import os, meshrt; print(os.path.dirname(meshrt.__file__))')
  case "$package" in
    "$site"/*) ;;
    *) fail "$label: meshrt imported from $package, not from the install under $site" ;;
  esac
  out=$(cd "$work" && "$@" -m meshrt --version)
  echo "$label: $out"
  python_version=$(cd "$work" && "$@" -c 'import platform; print(platform.python_version())')
  expected="meshrt $version (Python $python_version, package $package, binary $package/bin/meshrt)"
  [ "$out" = "$expected" ] ||
    fail "$label: python -m meshrt --version printed: $out"
  out=$(cd "$work" && "$@" -c \
    'import importlib.metadata as m, meshrt; print(m.version("meshrt"), meshrt.__version__)')
  [ "$out" = "$version $version" ] ||
    fail "$label: the metadata's version and __version__ are '$out', not $version"
  [ -x "$package/bin/meshrt" ] || fail "$label: $package/bin/meshrt is not executable"
  out=$(cd "$work" && "$@" -m meshrt version)
  case "$out" in
    "meshrt $version (gRPC "*) ;;
    *) fail "$label: python -m meshrt version (the CLI) printed: $out" ;;
  esac
}

check_install venv "$venv/lib/python3.11/site-packages" "$py"
check_install user-site "$userbase/lib/python3.11/site-packages" \
  env -u PYTHONNOUSERSITE PYTHONUSERBASE="$userbase" /usr/bin/python3

echo "== python/tests against the venv's install"
# The tests' directory goes first on sys.path (pytest); it holds no meshrt. The local cluster of
# test_cluster.py runs the installed binary (MESHRT_BINARY is unset).
cd "$tmp/tests"
"$py" -m pytest -q -p no:cacheprovider -rs test_graph.py test_cluster.py test_docs.py

echo "== python/tests/test_graph.py against the user-site install"
env -u PYTHONNOUSERSITE PYTHONUSERBASE="$userbase" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider -rs test_graph.py

echo PASS
