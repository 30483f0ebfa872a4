#!/usr/bin/env bash
# Slow is not stuck, with real daemons (a coordinator with --stuck_step_min_ms=2000 and two workers
# on loopback). Worker rank 1 busy-loops its step thread for 4 s before the first instruction of
# step 3 (--debug_spin_at_step: burning CPU, as a huge matmul would), twice the 2 s limit of a step
# (steps 1 and 2 take milliseconds). `meshrt status --session` shows rank 1's step thread using
# most of a core and rank 0, waiting in the allreduce, next to none; the coordinator logs one
# WARNING that the step is slow, not stuck; the step completes, the session stays ready, and the
# training run completes.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup slow

"$runfiles/coordinator/meshrt-coordinator" --port=0 --port_file="$work/port" \
  --heartbeat_interval_ms=200 --stuck_step_min_ms=2000 >"$logs/coordinator.log" 2>&1 &
pids+=("$!")
wait_for_port_file "$work/port" "the coordinator"
address=127.0.0.1:$(cat "$work/port")
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=0 >"$logs/worker0.log" 2>&1 &
pids+=("$!")
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=1 --debug_spin_at_step=3 \
  --debug_spin_seconds=4 >"$logs/worker1.log" 2>&1 &
pids+=("$!")
for i in 0 1; do
  for _ in $(seq 200); do grep -q "serving at" "$logs/worker$i.log" && break; sleep 0.05; done
done
w1_address=$(grep -o "serving at [0-9.:]*" "$logs/worker1.log" | cut -d' ' -f3)
[ -n "$w1_address" ] || fail "the workers did not start"

# Data parallel over both workers: every step ends in a gradient allreduce over p.
"$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" \
  --steps 6 --log_every 3 --batch 16 --d_model 16 --d_ff 32 >"$logs/train.log" 2>&1 &
train=$!
pids+=("$train")
session=$(wait_for_session "$logs/coordinator.log")

# While rank 1 spins (2.5 s into it, over the limit): the session is ready, rank 1 computes.
status_out=""
for _ in $(seq 100); do
  status_out=$("$meshrt" status --coordinator "$address" --session "$session" 2>&1) || true
  grep -q "computing on purpose" <<<"$status_out" && break
  sleep 0.05
done
grep -q "computing on purpose" <<<"$status_out" || fail "status never showed rank 1 spinning: $status_out"
sleep 2.5
status_out=$("$meshrt" status --coordinator "$address" --session "$session" 2>&1) ||
  fail "status failed: $status_out"
echo "$status_out"
grep -q "^session $session .* ready  step" <<<"$status_out" ||
  fail "the session should stay ready while a rank is slow: $status_out"
p1=$(grep "^  processor 1 " <<<"$status_out") || fail "no processor 1 in: $status_out"
p0=$(grep "^  processor 0 " <<<"$status_out") || fail "no processor 0 in: $status_out"
p1_cpu=$(grep -o "cpu [0-9]*% of the step" <<<"$p1" | grep -o "[0-9]*") ||
  fail "status should show processor 1's CPU share: $p1"
p0_cpu=$(grep -o "cpu [0-9]*% of the step" <<<"$p0" | grep -o "[0-9]*") ||
  fail "status should show processor 0's CPU share: $p0"
echo "step thread CPU over step 3 so far: spinning rank 1 ${p1_cpu}%, rank 0 waiting ${p0_cpu}%"
grep -q "step 3 .*computing on purpose" <<<"$p1" || fail "processor 1 should be spinning in step 3: $p1"
grep -q "step 3 .* in collective ALLREDUCE over \[p\]" <<<"$p0" ||
  fail "processor 0 should wait in the allreduce of step 3: $p0"
[ "$p1_cpu" -ge 25 ] || fail "a spinning step thread should show >= 25% CPU: $p1"
# Waiting in a collective accrues (next to) no CPU: no spin-wait in the step thread.
[ "$p0_cpu" -le 5 ] || fail "a step thread waiting in the allreduce should show <= 5% CPU: $p0"

wait "$train" || fail "the training run should complete: $(tail -5 "$logs/train.log")"
grep -q "step 6" "$logs/train.log" || fail "the run should reach step 6: $(tail -5 "$logs/train.log")"
warnings=$(grep -c "^W .*session $session: step 3 has run for .*but the processor the others wait for is still computing" \
  "$logs/coordinator.log" || true)
[ "$warnings" -eq 1 ] || fail "the coordinator should warn once that step 3 is slow (got $warnings)"
warning=$(grep "^W .*session $session: step 3 has run for" "$logs/coordinator.log")
echo "warning: $warning"
# A heartbeat between two bursts of the spin may find rank 1 momentarily not computing: then the
# warning also says when it was last seen computing.
for want in "over the stuck-step limit of 2.0 s" \
  "processor 1 (worker [0-9]*, $w1_address, mesh coordinate (1)) in instruction [0-9]* (source_op '[^']*', " \
  "computing on purpose" \
  "its step thread using [0-9]*% of a core\( (last seen computing [^)]* ago)\)\{0,1\}: slow, not stuck"; do
  grep -q -- "$want" <<<"$warning" || fail "the warning should say '$want': $warning"
done
if grep -q "^E .*session $session" "$logs/coordinator.log"; then
  fail "nothing should fail: $(grep "^E " "$logs/coordinator.log")"
fi
echo "PASS"
