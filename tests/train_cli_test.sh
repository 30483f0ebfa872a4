#!/usr/bin/env bash
# `meshrt train` end to end with real daemons: 20 SGD steps of a small Transformer from one seed
# give the single-process losses (--reference) within 1e-4 relative under the paper's data-parallel,
# model-parallel and 2-D layouts on 4 worker processes; the CSV, progress line and greedy sample
# are there; the MLP trains; checkpoints move between meshes, under their root only; a bad layout
# is refused before any daemon starts.
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$PWD/tests/training_text.sh" "$tmp"
small=(--model transformer --steps 20 --seed 3 --optimizer sgd --lr 0.1 --batch 8 --length 16
       --d_model 32 --heads 4 --d_ff 64 --layers 1 --data "$text")

$meshrt train "${small[@]}" --reference --loss_csv "$tmp/ref.csv" > "$tmp/ref.out"
head -1 "$tmp/ref.csv" | grep -q '^step,loss'
test "$(wc -l < "$tmp/ref.csv")" -eq 21

compare() {  # compare CSV $1 against the reference
  python3 - "$tmp/ref.csv" "$1" <<'PY'
import csv, sys
ref = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
got = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))]
assert len(ref) == len(got) == 20, (len(ref), len(got))
worst = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
print(f"{sys.argv[2]}: max relative loss difference over 20 steps {worst:.2e}")
assert worst <= 1e-4, worst
assert ref[-1] < ref[0], "the loss did not fall"
PY
}

for layout in "batch:rows" "heads:cols,d_ff:cols,vocab:cols" "batch:rows,heads:cols,d_ff:cols,vocab:cols"; do
  name=$(tr -c 'a-z' _ <<<"$layout")
  $meshrt train "${small[@]}" --mesh rows:2,cols:2 --layout "$layout" --local 4 \
    --loss_csv "$tmp/$name.csv" --sample 20 --prompt "The " > "$tmp/$name.out" 2>&1 ||
    { cat "$tmp/$name.out"; exit 1; }
  compare "$tmp/$name.csv"
done
out="$tmp/batch_rows_heads_cols_d_ff_cols_vocab_cols_.out"
grep -q "tokens/s" "$out"
grep -q "ETA" "$out"
grep -q "greedy sample" "$out"
grep -q "final loss" "$out"

# Microbatches (4 per update): the accumulators are partial sums over rows on the workers and
# their allreduce runs once per update (core/lowering/lower_accumulate.cc); the losses are the reference's,
# and a checkpoint saved mid-cycle (after 6 steps) continues on one processor with them too.
micro=("${small[@]}" --steps 12 --microbatches 4)
$meshrt train "${micro[@]}" --reference --loss_csv "$tmp/micro_ref.csv" > /dev/null
$meshrt train "${micro[@]}" --mesh rows:2,cols:2 --layout batch:rows,heads:cols,d_ff:cols,vocab:cols \
  --local 4 --loss_csv "$tmp/micro.csv" > "$tmp/micro.out" 2>&1 || { cat "$tmp/micro.out"; exit 1; }
$meshrt train "${small[@]}" --steps 6 --microbatches 4 --mesh rows:2,cols:2 --layout batch:rows \
  --local 4 --save "$tmp/micro_ck" > "$tmp/micro_save.out" 2>&1 || { cat "$tmp/micro_save.out"; exit 1; }
$meshrt train "${small[@]}" --steps 12 --microbatches 4 --reference --restore "$tmp/micro_ck" \
  --loss_csv "$tmp/micro_resumed.csv" > "$tmp/micro_r.out" 2>&1 || { cat "$tmp/micro_r.out"; exit 1; }
python3 - "$tmp/micro_ref.csv" "$tmp/micro.csv" "$tmp/micro_resumed.csv" <<'PY'
import csv, sys
def losses(path):
    return {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(path))}
ref, got, resumed = losses(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[3])
assert sorted(ref) == sorted(got) == list(range(1, 13)), (sorted(ref), sorted(got))
assert sorted(resumed) == list(range(7, 13)), sorted(resumed)
for s, l in list(got.items()) + list(resumed.items()):
    assert abs(l - ref[s]) <= 1e-4 * abs(ref[s]), (s, l, ref[s])
print("microbatches: 12 steps on 2x2 and 6 resumed mid-cycle on one processor match the reference")
PY

# Several steps per request (the workers loop): the same losses every 5th step.
$meshrt train "${small[@]}" --mesh rows:2,cols:2 --layout batch:rows --local 4 --log_every 5 \
  --loss_csv "$tmp/every5.csv" > /dev/null 2>&1
python3 - "$tmp/ref.csv" "$tmp/every5.csv" <<'PY'
import csv, sys
ref = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))}
got = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))}
assert sorted(got) == [5, 10, 15, 20], sorted(got)
for s, l in got.items():
    assert abs(l - ref[s]) <= 1e-4 * abs(ref[s]), (s, l, ref[s])
PY

# Checkpoints move between meshes: 10 steps on the 2x2 mesh (data x model parallel), saved, then
# restored onto a 1-D mesh of 4 with another layout and onto one processor (in process): steps
# 11..20 there give the uninterrupted run's losses. An absolute --save without --checkpoint_root
# saves under its parent directory: $tmp/ck holds CURRENT and the committed version.
$meshrt train "${small[@]}" --steps 10 --mesh rows:2,cols:2 \
  --layout batch:rows,heads:cols,d_ff:cols,vocab:cols --local 4 --save "$tmp/ck" > "$tmp/save.out" 2>&1 ||
  { cat "$tmp/save.out"; exit 1; }
test -f "$tmp/ck/$(cat "$tmp/ck/CURRENT")/manifest.pbtxt"
$meshrt train "${small[@]}" --steps 20 --mesh x:4 --layout heads:x,d_ff:x,vocab:x --local 4 \
  --restore "$tmp/ck" --loss_csv "$tmp/resumed4.csv" > "$tmp/r4.out" 2>&1 || { cat "$tmp/r4.out"; exit 1; }
$meshrt train "${small[@]}" --steps 20 --reference --restore "$tmp/ck" \
  --loss_csv "$tmp/resumed1.csv" > "$tmp/r1.out" 2>&1 || { cat "$tmp/r1.out"; exit 1; }
for resumed in "$tmp/resumed4.csv" "$tmp/resumed1.csv"; do
  python3 - "$tmp/ref.csv" "$resumed" <<'PY'
import csv, sys
ref = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))}
got = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))}
assert sorted(got) == list(range(11, 21)), sorted(got)
worst = max(abs(l - ref[s]) / abs(ref[s]) for s, l in got.items())
print(f"{sys.argv[2]}: resumed steps 11..20, max relative loss difference {worst:.2e}")
assert worst <= 1e-4, worst
PY
done
# A relative name is relative to the current directory (or --checkpoint_root), in process and on a
# local cluster alike; a name leading out of the root is refused, naming the flag.
mkdir "$tmp/root"
(cd "$tmp/root" && $meshrt train "${small[@]}" --steps 2 --reference --save runs/rel > /dev/null)
$meshrt train "${small[@]}" --steps 3 --mesh x:2 --layout batch:x --local 2 \
  --checkpoint_root "$tmp/root" --restore runs/rel > "$tmp/rel.out" 2>&1 || { cat "$tmp/rel.out"; exit 1; }
grep -q "after step 2" "$tmp/rel.out" || { cat "$tmp/rel.out"; exit 1; }
# --steps is the total with --restore too: a checkpoint at step 2 with --steps 2 has nothing to
# train, which is refused naming both numbers (exit 2), and "final loss ... after 3 steps" above.
grep -q "after 3 steps" "$tmp/rel.out" || { cat "$tmp/rel.out"; exit 1; }
set +e
$meshrt train "${small[@]}" --steps 2 --reference --checkpoint_root "$tmp/root" --restore runs/rel \
  > "$tmp/total.out" 2>&1
code=$?
set -e
[[ $code == 2 ]] || { echo "--steps at the checkpoint's step: exit $code, wanted 2"; cat "$tmp/total.out"; exit 1; }
grep -q "starts at step 2; --steps 2 is the step the run ends at" "$tmp/total.out" ||
  { cat "$tmp/total.out"; exit 1; }
if $meshrt train "${small[@]}" --steps 1 --reference --checkpoint_root "$tmp/root" --save ../esc \
    > "$tmp/esc.out" 2>&1; then
  echo "a checkpoint name out of the root was accepted"; exit 1
fi
grep -q -- "--checkpoint_root" "$tmp/esc.out" || { cat "$tmp/esc.out"; exit 1; }
test ! -e "$tmp/esc"
# A corrupted shard is refused, naming it.
cp -r "$tmp/ck" "$tmp/bad_ck"
version=$(cat "$tmp/bad_ck/CURRENT")
shard=$(ls "$tmp/bad_ck/$version" | grep '^output\..*\.shard$' | head -1)
printf '\x7f' | dd of="$tmp/bad_ck/$version/$shard" bs=1 seek=3 conv=notrunc status=none
if $meshrt train "${small[@]}" --steps 1 --reference --restore "$tmp/bad_ck" > "$tmp/bad_ck.out" 2>&1; then
  echo "a corrupted checkpoint was accepted"; exit 1
fi
grep -q "$shard" "$tmp/bad_ck.out" || { cat "$tmp/bad_ck.out"; exit 1; }

# The MLP regression learns on synthetic data drawn on the workers (model parallel over d_ff).
$meshrt train --model mlp --mesh x:2 --layout d_ff:x --local 2 --steps 30 --optimizer sgd \
  --lr 0.05 --batch 16 --d_model 16 --d_ff 32 --loss_csv "$tmp/mlp.csv" > /dev/null 2>&1
python3 - "$tmp/mlp.csv" <<'PY'
import csv, sys
l = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
assert len(l) == 30 and sum(l[-5:]) < 0.9 * sum(l[:5]), l
PY

# The training graph can be written out and explained like any graph.
$meshrt train "${small[@]}" --steps 1 --reference --export_graph "$tmp/train.pbtxt" > /dev/null
$meshrt explain "$tmp/train.pbtxt" --mesh rows:2,cols:2 \
  --layout batch:rows,heads:cols,d_ff:cols,vocab:cols > "$tmp/explain.out"
grep -q "layer_0/ffn/w1" "$tmp/explain.out"

# Exactly one place to train: two are a usage error (exit 2).
set +e
$meshrt train "${small[@]}" --reference --local 4 > "$tmp/usage.out" 2>&1
code=$?
set -e
test "$code" -eq 2 || { cat "$tmp/usage.out"; exit 1; }
grep -q "exactly one of" "$tmp/usage.out"

# A layout that does not fit is refused before any daemon starts, naming the dim.
if $meshrt train "${small[@]}" --mesh rows:3 --layout heads:rows --local 3 > "$tmp/bad.out" 2>&1; then
  echo "a bad layout was accepted"; exit 1
fi
grep -q "heads" "$tmp/bad.out"
if grep -q "starting a local cluster" "$tmp/bad.out"; then echo "daemons started"; exit 1; fi

# The MLP's default learning rate (Adam at 0.001) converges: every loss of the first 8 steps stays
# below the first and the last is lower (Adam at 0.01 jumped from 0.72 to 3.68 at step 2 here).
$meshrt train --model mlp --reference --steps 8 --d_model 256 --d_ff 1024 --batch 64 \
  --loss_csv "$tmp/mlp_default.csv" > "$tmp/mlp_default.out" 2>&1 || { cat "$tmp/mlp_default.out"; exit 1; }
grep -q "with adam lr 0.001 " "$tmp/mlp_default.out" || { cat "$tmp/mlp_default.out"; exit 1; }
python3 - "$tmp/mlp_default.csv" <<'PY'
import csv, sys
l = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
assert len(l) == 8 and max(l[1:]) < l[0] and l[-1] < 0.9 * l[0], l
PY

# --steps 0 samples from a checkpoint without training it: the weights of $tmp/ck (step 10), the
# default prompt "The " for a text model, twice the same greedy text, and nothing saved.
ck_version=$(cat "$tmp/ck/CURRENT")
for i in 1 2; do
  $meshrt train "${small[@]}" --steps 0 --reference --restore "$tmp/ck" --sample 40 \
    > "$tmp/sample$i.out" 2> "$tmp/sample$i.err" || { cat "$tmp/sample$i.out" "$tmp/sample$i.err"; exit 1; }
done
grep -q "sampling from checkpoint $tmp/ck (after step 10; not trained further)" "$tmp/sample1.out" ||
  { cat "$tmp/sample1.out"; exit 1; }
grep -q 'greedy sample (prompt "The ")' "$tmp/sample1.out" || { cat "$tmp/sample1.out"; exit 1; }
grep -q "^The " "$tmp/sample1.out" || { cat "$tmp/sample1.out"; exit 1; }
if grep -q "^training\|final loss" "$tmp/sample1.out"; then cat "$tmp/sample1.out"; exit 1; fi
cmp "$tmp/sample1.out" "$tmp/sample2.out"
test "$(cat "$tmp/ck/CURRENT")" = "$ck_version"
# A model of other sizes than the checkpoint's is refused, naming the variable; --steps 0 without
# --restore and --sample is a usage error.
if $meshrt train "${small[@]}" --d_model 16 --steps 0 --reference --restore "$tmp/ck" --sample 4 \
    > "$tmp/sample_bad.out" 2>&1; then
  echo "a checkpoint of other sizes was sampled"; exit 1
fi
grep -q "holds .* this model's is" "$tmp/sample_bad.out" || { cat "$tmp/sample_bad.out"; exit 1; }
if $meshrt train "${small[@]}" --steps 0 --reference > "$tmp/steps0.out" 2>&1; then
  echo "--steps 0 without --restore was accepted"; exit 1
fi
grep -q -- "--steps 0 samples from a checkpoint" "$tmp/steps0.out" || { cat "$tmp/steps0.out"; exit 1; }
# A file the user names that cannot be read: the path as given and the OS's reason; a flag typo
# gets the flag meant.
if $meshrt train "${small[@]}" --steps 1 --reference --data "$tmp/no/such.txt" > "$tmp/nodata.out" 2>&1; then
  echo "a missing --data file was accepted"; exit 1
fi
grep -q -- "cannot read --data $tmp/no/such.txt: No such file or directory" "$tmp/nodata.out" ||
  { cat "$tmp/nodata.out"; exit 1; }
if grep -q "fortunes" "$tmp/nodata.out"; then cat "$tmp/nodata.out"; exit 1; fi
set +e
$meshrt train "${small[@]}" --steps 1 --reference --data "$tmp" > "$tmp/dirdata.out" 2>&1
code=$?
set -e
[[ $code == 2 ]] && grep -q -- "--data $tmp is a directory" "$tmp/dirdata.out" ||
  { echo "--data DIR: exit $code"; cat "$tmp/dirdata.out"; exit 1; }
if $meshrt train --step 3 --reference > "$tmp/typo.out" 2>&1; then echo "--step was accepted"; exit 1; fi
grep -q -- "unknown flag --step; did you mean --steps?" "$tmp/typo.out" || { cat "$tmp/typo.out"; exit 1; }
# The summary's window fits a run shorter than 50 steps.
grep -q "mean of the losses logged over the last 10 steps" "$tmp/save.out" || { cat "$tmp/save.out"; exit 1; }
grep -q "mean of the losses logged over the last step" "$tmp/rel.out" || { cat "$tmp/rel.out"; exit 1; }
echo PASS
