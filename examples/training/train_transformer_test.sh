#!/usr/bin/env bash
# The example trains (20 steps on a 2x2 mesh of worker processes), the loss falls, and its
# checkpoint is written.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(examples/training/train_transformer 20 "$dir/ck" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
first=$(grep '^step 10 ' <<<"$out" | awk '{print $4}')
last=$(grep '^step 20 ' <<<"$out" | awk '{print $4}')
python3 -c "import sys; sys.exit(0 if float('$last') < float('$first') else 1)"
# The committed version: CURRENT names it, and it holds the manifest.
test -f "$dir/ck/$(cat "$dir/ck/CURRENT")/manifest.pbtxt"
