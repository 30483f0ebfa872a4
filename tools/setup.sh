#!/usr/bin/env bash
# Installs exactly the Debian 12 packages meshrt needs to build, test and benchmark.
# Idempotent: does nothing (and never touches the network) when every package is present.
set -euo pipefail

PACKAGES=(
  build-essential
  bazel-bootstrap
  bazel-rules-java
  protobuf-compiler
  protobuf-compiler-grpc
  libprotobuf-dev
  libgrpc++-dev
  libabsl-dev
  libgloo-dev
  zlib1g-dev
  # HTTP for the daemons' Prometheus /metrics and the coordinator's dashboard (rpc/http_server.h)
  libcpp-httplib-dev
  # checkpoint shard checksums (XXH3, runtime/checkpoint.h)
  libxxhash-dev
  # The dashboard's test loads the page in a real browser, headless (tests/dashboard_browser_test.sh),
  # and fetches its JSON with curl.
  chromium
  curl
  libopenblas-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  # deploy/ checks (tests/deploy_*, tests/launch_*): YAML lint, test certificates, network
  # namespaces for the multi-host launch test, shell lint.
  yamllint
  openssl
  iproute2
  shellcheck
  util-linux
  # The graph fuzzer (fuzz/: libFuzzer with ASan and UBSan, built outside Bazel), run briefly by
  # `make test` and at length by `make fuzz`.
  clang-14
  libclang-rt-14-dev
  # Training data: plain English text (fortune cookies, one file per theme, under
  # /usr/share/games/fortunes/). The Transformer trains on /usr/share/games/fortunes/cookie
  # (245,093 bytes of ASCII), read by the text_windows op (core/ops/ops_dataset.h) on the workers.
  fortunes
  # The Python package (python/meshrt, issue 16): gRPC, protobuf and numpy for /usr/bin/python3,
  # pytest for its tests, pybind11 and the Python headers for its C++ core (//python:_core.so).
  python3-grpcio
  python3-protobuf
  python3-numpy
  python3-pytest
  python3-dev
  pybind11-dev
  # `pip install ./python` offline (python/pyproject.toml, //python:pip_install_test): venvs,
  # pip, and the setuptools and wheel its --no-build-isolation build uses.
  python3-venv
  python3-pip
  python3-setuptools
  python3-wheel
  # The subword vocabulary (text/vocab): SentencePiece, and its Python module to cross-check ids.
  libsentencepiece-dev
  python3-sentencepiece
  # Monitoring checks: Debian's Prometheus scrapes a local cluster as docs/operations.md says
  # (tests/prometheus_scrape_test.sh) and deploy/README.md's (tests/deploy_monitoring_test.sh);
  # promtool checks metrics and alert rules.
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Node.js and npm run the offline Kubernetes schema validator (third_party/k8s_validate). Checked by
# command, not by package: a machine may have Node.js from elsewhere, whose package conflicts with
# Debian's npm. Debian 12's Node.js 18 is new enough.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ "${#missing[@]}" -ne 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The validator's npm packages, at the versions package-lock.json pins, into the project's own
# third_party/k8s_validate/node_modules; skipped when that install is current.
validate_dir="$(cd "$(dirname "$0")/.." && pwd)/third_party/k8s_validate"
if ! cmp -s "$validate_dir/package-lock.json" "$validate_dir/node_modules/.package-lock.json.installed" 2>/dev/null; then
  echo "setup: npm ci in $validate_dir"
  (cd "$validate_dir" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$validate_dir/package-lock.json" "$validate_dir/node_modules/.package-lock.json.installed"
fi

# kubectl renders the manifests (kubectl kustomize) in the deploy tests. It is not in Debian's
# archive; these machines come with it. Say so early when it is missing (the tests fail on it too).
if ! command -v kubectl >/dev/null 2>&1; then
  echo "setup: WARNING: kubectl not found on PATH; tests/deploy_manifests_test will fail." >&2
  echo "setup: install kubectl (v1.27 or newer, e.g. from the Kubernetes project's packages)." >&2
fi
