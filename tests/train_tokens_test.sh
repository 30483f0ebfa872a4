#!/usr/bin/env bash
# `meshrt train` on token-id data (client/cli_train_data.h): the same 300-token-vocabulary stream
# as a generated uint16 .bin (nanoGPT's format) and an int32 .npy, trained on a local cluster of 2
# workers with --eval_fraction 0.1 --eval_every 2. The CSV keeps its columns and gains eval_loss,
# filled at steps 1, 2, 4, 6 and empty at 3, 5; the eval losses are finite, start within 1 of
# ln(300) and equal the single-process reference's; both files give the same losses; the sample
# is token ids; missing --vocab, a bad --data_format, --eval_every without --eval_fraction are
# usage errors; an id outside [0, vocab) is refused naming the file and the id.
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 4000 ids in [0, 300): mostly id + 7 after id (something to learn), a pseudo-random id otherwise.
python3 - "$tmp" <<'PY'
import array, sys
ids, state, cur = [], 99, 3
for i in range(4000):
    state = (state * 1664525 + 1013904223) % 2**32
    cur = (state >> 8) % 300 if (state >> 24) % 5 == 0 else (cur + 7) % 300
    ids.append(cur)
open(f"{sys.argv[1]}/train.bin", "wb").write(array.array("H", ids).tobytes())
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % len(ids)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(f"{sys.argv[1]}/tokens.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    f.write(array.array("i", ids).tobytes())
PY

small=(--model transformer --steps 6 --seed 3 --optimizer adam --batch 8 --length 16 --d_model 32
       --heads 4 --d_ff 64 --layers 1 --vocab 300 --eval_fraction 0.1 --eval_every 2)
for data in train.bin tokens.npy; do
  $meshrt train "${small[@]}" --data "$tmp/$data" --mesh x:2 --layout batch:x --local 2 \
    --loss_csv "$tmp/$data.csv" --sample 4 --prompt "3 10" > "$tmp/$data.out" 2>&1 ||
    { cat "$tmp/$data.out"; exit 1; }
  grep -q "step 4: eval_loss" "$tmp/$data.out" || { cat "$tmp/$data.out"; exit 1; }
  grep -q "final eval loss" "$tmp/$data.out"
  grep -A1 "greedy sample of token ids" "$tmp/$data.out" | tail -1 | grep -Eq '^[0-9]+( [0-9]+){3}$'
done
grep -q "as uint16, last 0.1 held out" "$tmp/train.bin.out"
grep -q "as npy, last 0.1 held out" "$tmp/tokens.npy.out"
$meshrt train "${small[@]}" --data "$tmp/train.bin" --reference --loss_csv "$tmp/ref.csv" \
  > "$tmp/ref.out" 2>&1 || { cat "$tmp/ref.out"; exit 1; }

python3 - "$tmp" <<'PY'
import csv, math, sys
tmp = sys.argv[1]
def rows(name):
    with open(f"{tmp}/{name}") as f:
        r = csv.DictReader(f)
        assert r.fieldnames == ["step", "loss", "learning_rate", "tokens_per_s", "elapsed_s",
                                "eval_loss"], r.fieldnames
        return list(r)
ref, bin_, npy = rows("ref.csv"), rows("train.bin.csv"), rows("tokens.npy.csv")
for got in (ref, bin_, npy):
    assert [int(r["step"]) for r in got] == [1, 2, 3, 4, 5, 6]
    filled = [int(r["step"]) for r in got if r["eval_loss"] != ""]
    assert filled == [1, 2, 4, 6], filled
    evals = [float(r["eval_loss"]) for r in got if r["eval_loss"] != ""]
    assert all(math.isfinite(e) for e in evals), evals
    assert abs(evals[0] - math.log(300)) < 1.0, (evals[0], math.log(300))
for a, b in zip(ref, bin_):
    for key in ("loss", "eval_loss"):
        if a[key]:
            x, y = float(a[key]), float(b[key])
            assert abs(x - y) <= 1e-4 * abs(x), (key, a["step"], x, y)
assert [(r["loss"], r["eval_loss"]) for r in bin_] == [(r["loss"], r["eval_loss"]) for r in npy]
print("eval losses", [r["eval_loss"] for r in bin_ if r["eval_loss"]])
PY

usage() {  # usage <message> <args...>: exit code 2 and the message
  local want=$1; shift
  set +e
  $meshrt train --model transformer --steps 1 --reference "$@" > "$tmp/usage.out" 2>&1
  local code=$?
  set -e
  test "$code" -eq 2 || { echo "exit $code for $*"; cat "$tmp/usage.out"; exit 1; }
  grep -q -- "$want" "$tmp/usage.out" || { cat "$tmp/usage.out"; exit 1; }
}
usage "needs --vocab" --data "$tmp/tokens.npy"
usage "needs --vocab" --data "$tmp/train.bin" --data_format uint16
usage "is not auto, bytes, npy or uint16" --data "$tmp/train.bin" --data_format text --vocab 300
usage "eval_every needs --eval_fraction" --data "$tmp/train.bin" --vocab 300 --eval_every 2
usage "eval_fraction needs 0 <= F < 1" --data "$tmp/train.bin" --vocab 300 --eval_fraction 1

# A vocabulary smaller than the ids: refused on the worker, naming the file and the id.
if $meshrt train "${small[@]}" --vocab 200 --data "$tmp/train.bin" --reference \
    > "$tmp/range.out" 2>&1; then
  echo "ids >= --vocab were accepted"; exit 1
fi
grep -q "train.bin' holds token id" "$tmp/range.out" || { cat "$tmp/range.out"; exit 1; }
grep -q "outside \[0, vocab 200)" "$tmp/range.out"
echo PASS
