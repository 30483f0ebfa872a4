#!/usr/bin/env bash
# `meshrt sample` end to end with real daemons: a tiny byte-level Transformer trained for 30 steps
# and saved; its greedy continuation of a prompt decoded on the mesh (one program, key/value
# cache) is the one `meshrt train --sample` computes in the client by rerunning the whole prefix
# per byte; greedy and top-k sampled text are the same on the reference interpreter and on 4
# worker processes under data-parallel, model-parallel and 2-D layouts; seeds matter; the speed
# goes to stderr; bad flags get a one-line error and exit code 2 before anything starts.
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$PWD/tests/training_text.sh" "$tmp"
cd "$tmp"
model=(--batch 8 --length 16 --d_model 32 --heads 4 --d_ff 64 --layers 1 --data "$text")
$meshrt train --model transformer --reference --steps 30 "${model[@]}" --save ck > train.out

sample() {  # $1 = output name, then flags; stdout to $1.txt, stderr to $1.log
  local name=$1
  shift
  $meshrt sample ck --prompt "The " "$@" > "$name.txt" 2> "$name.log" ||
    { cat "$name.log"; exit 1; }
  grep -q "tokens/s" "$name.log" || { cat "$name.log"; exit 1; }
}

# Greedy on the reference interpreter: the prompt, then 12 bytes (the model's length is 16), as
# the client-side recomputation of `meshrt train --steps 0 --restore ck --sample 12` has them.
sample greedy_ref --reference
test "$(head -c 4 greedy_ref.txt)" = "The "
test "$(wc -c < greedy_ref.txt)" -eq 17  # 16 bytes and a newline
$meshrt train --model transformer --reference --steps 0 --restore ck --sample 12 --prompt "The " \
  "${model[@]}" > recompute.out 2> /dev/null
python3 - greedy_ref.txt recompute.out <<'PY'
import sys
cached = open(sys.argv[1], "rb").read()
out = open(sys.argv[2], "rb").read()
marker = b'greedy sample (prompt "The "):\n'
assert marker in out, out
recomputed = out.split(marker, 1)[1]
assert recomputed == cached, (cached, recomputed)
PY

flags=(--temperature 1 --top_k 5 --seed 7)
sample top_ref --reference "${flags[@]}"
sample top_ref_seed8 --reference --temperature 1 --top_k 5 --seed 8
sample top_ref_again --reference "${flags[@]}"
cmp top_ref.txt top_ref_again.txt
! cmp -s top_ref.txt greedy_ref.txt || { echo "sampling gave the greedy text"; exit 1; }
! cmp -s top_ref.txt top_ref_seed8.txt || { echo "seeds 7 and 8 gave the same text"; exit 1; }
grep -q "temperature 1, top_k 5, seed 7" top_ref.log

# The same text on every layout of a 2x2 mesh.
for layout in "batch:rows" "heads:cols,d_ff:cols,vocab:cols" \
    "batch:rows,heads:cols,d_ff:cols,vocab:cols"; do
  name=$(tr -c 'a-z' _ <<<"$layout")
  sample "greedy_$name" --local 4 --mesh rows:2,cols:2 --layout "$layout" --log_dir "logs_$name"
  cmp greedy_ref.txt "greedy_$name.txt"
  sample "top_$name" --local 4 --mesh rows:2,cols:2 --layout "$layout" "${flags[@]}" \
    --log_dir "logs_$name"
  cmp top_ref.txt "top_$name.txt"
  grep -q "decoding on 4 worker processes" "top_$name.log"
done

# Several samples at once (the batch padded to the layout's split): the first is the one above.
sample three_ref --reference "${flags[@]}" --samples 3 --tokens 6
sample three_dp --local 2 --mesh rows:2 --layout batch:rows "${flags[@]}" --samples 3 --tokens 6 \
  --log_dir logs_three
cmp three_ref.txt three_dp.txt
test "$(grep -c '^--- sample' three_ref.txt)" -eq 3
test "$(sed -n 2p three_ref.txt)" = "$(head -c 10 top_ref.txt)"

# Bad input: one line, exit code 2, before anything starts.
expect_error() {  # $1 = expected exit code, $2 = text the error contains, then the command
  local code=$1 text=$2
  shift 2
  set +e
  "$@" > err.out 2> err.txt
  local got=$?
  set -e
  test "$got" -eq "$code" || { echo "exit $got, wanted $code: $*"; cat err.txt; exit 1; }
  grep -q -- "$text" err.txt || { echo "no '$text' in:"; cat err.txt; exit 1; }
  test "$(wc -l < err.txt)" -eq 1 || { cat err.txt; exit 1; }
}
expect_error 2 "exactly one of" $meshrt sample ck --prompt "The "
expect_error 2 "needs --prompt" $meshrt sample ck --reference
expect_error 2 "--temperature needs T >= 0" $meshrt sample ck --prompt "The " --reference \
  --temperature -1
expect_error 2 "--top_k needs 0 <= K <= 256" $meshrt sample ck --prompt "The " --reference \
  --top_k 257
expect_error 2 "ask at most --tokens 12" $meshrt sample ck --prompt "The " --reference --tokens 13
expect_error 2 "--samples needs N >= 1" $meshrt sample ck --prompt "The " --reference --samples 0
expect_error 2 "takes one CHECKPOINT" $meshrt sample --prompt "The " --reference
expect_error 2 "unknown flag" $meshrt sample ck --prompt "The " --reference --beam 2
$meshrt train --model mlp --steps 1 --reference --save mlp_ck > /dev/null
expect_error 1 "not a transformer checkpoint" $meshrt sample mlp_ck --prompt "The " --reference
echo "sample_cli_test: all passed"
