#!/usr/bin/env bash
# `meshrt train --checkpoint_dir` end to end: a run stopped by SIGTERM saves a checkpoint and
# `--resume` continues it so that the loss curve equals the uninterrupted run's step for step —
# exactly on the same mesh and layout, within 1e-5 relative when resumed elsewhere (here: the
# single-process reference). Real daemons (--local 2), a small Transformer (text data position,
# Adam slots, the step counter and the schedule all come back from the checkpoint).
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
source "$PWD/tests/training_text.sh" "$tmp"
run=(--model transformer --steps 30 --seed 3 --optimizer adam --lr 0.01 --schedule linear_warmup
     --warmup 10 --batch 8 --length 16 --d_model 32 --heads 4 --d_ff 64 --layers 1 --data "$text"
     --checkpoint_dir ck --save_every 5)
cluster=(--mesh x:2 --layout batch:x --local 2)

# The uninterrupted run.
$meshrt train "${run[@]}" "${cluster[@]}" --checkpoint_root "$tmp/full" --loss_csv "$tmp/full.csv" \
  > "$tmp/full.out"
test "$(wc -l < "$tmp/full.csv")" -eq 31

# The same run, stopped by SIGTERM part way.
mkdir -p "$tmp/part"
$meshrt train "${run[@]}" "${cluster[@]}" --checkpoint_root "$tmp/part" --loss_csv "$tmp/part.csv" \
  > "$tmp/part.out" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  if [[ -f $tmp/part.csv ]] && (( $(wc -l < "$tmp/part.csv") >= 13 )); then break; fi
  sleep 0.05
done
kill -TERM $pid
set +e
wait $pid
rc=$?
set -e
pid=
if [[ $rc -eq 0 ]]; then echo "FAIL: a run stopped by SIGTERM exited 0"; cat "$tmp/part.out"; exit 1; fi
stopped=$(sed -n "s/^SIGTERM: saved checkpoint 'ck' at step \([0-9]*\);.*/\1/p" "$tmp/part.out")
if [[ -z $stopped ]] || (( stopped >= 30 )); then
  echo "FAIL: no SIGTERM checkpoint part way"; cat "$tmp/part.out"; exit 1
fi
grep -q "stopped by SIGTERM after step $stopped (checkpoint saved)" "$tmp/part.out"
echo "stopped by SIGTERM after step $stopped (exit $rc)"
cp -r "$tmp/part" "$tmp/elsewhere"

# --resume: --steps is the total, so it ends at step 30 too.
$meshrt train "${run[@]}" "${cluster[@]}" --checkpoint_root "$tmp/part" --loss_csv "$tmp/part.csv" \
  --resume > "$tmp/resume.out"
grep -q "resumed from checkpoint 'ck' (after step $stopped)" "$tmp/resume.out"
grep -q "final loss .* after 30 steps" "$tmp/resume.out"
# Resuming a finished run trains nothing and says so.
$meshrt train "${run[@]}" "${cluster[@]}" --checkpoint_root "$tmp/part" --resume > "$tmp/again.out"
grep -q "the run is already at step 30 of 30: nothing to train" "$tmp/again.out"
# Resumed on one processor instead (the reference), from the same checkpoint.
$meshrt train "${run[@]}" --reference --checkpoint_root "$tmp/elsewhere" \
  --loss_csv "$tmp/elsewhere.csv" --resume > "$tmp/elsewhere.out"
grep -q "resumed from checkpoint 'ck' (after step $stopped)" "$tmp/elsewhere.out"
# --resume with no checkpoint starts at step 0.
$meshrt train "${run[@]}" --reference --steps 2 --checkpoint_root "$tmp/fresh" --resume \
  > "$tmp/fresh.out"
grep -q "final loss .* after 2 steps" "$tmp/fresh.out"

python3 - "$tmp/full.csv" "$tmp/part.csv" "$tmp/elsewhere.csv" "$stopped" <<'PY'
import csv, sys
def losses(path):
    return {int(r["step"]): r["loss"] for r in csv.DictReader(open(path))}
full, part, elsewhere, stopped = losses(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[3]), int(sys.argv[4])
assert sorted(full) == list(range(1, 31)), sorted(full)
assert sorted(part) == list(range(1, 31)), sorted(part)
bad = [s for s in full if full[s] != part[s]]
assert not bad, f"resumed on the same mesh, steps {bad} differ: " + str([(s, full[s], part[s]) for s in bad])
worst = max(abs(float(full[s]) - float(elsewhere[s])) / abs(float(full[s])) for s in elsewhere)
assert sorted(elsewhere) == list(range(stopped + 1, 31)), sorted(elsewhere)
print(f"same mesh: 30/30 steps identical; resumed on the reference: max relative difference {worst:.1e}")
assert worst <= 1e-5, worst
PY
echo PASS
