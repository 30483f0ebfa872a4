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
  libopenblas-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
