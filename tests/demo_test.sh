#!/usr/bin/env bash
# `make demo` runs `meshrt demo`: it must pass and report both layouts.
set -euo pipefail
out=$(client/meshrt demo 2>&1) || { echo "$out"; echo "meshrt demo failed"; exit 1; }
echo "$out"
grep -q "demo: PASS" <<<"$out"
test "$(grep -c '  ok$' <<<"$out")" -eq 4
grep -q "allreduce sum      over rows" <<<"$out"
