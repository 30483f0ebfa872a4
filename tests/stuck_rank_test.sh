#!/usr/bin/env bash
# Stuck-rank diagnosis with real daemons (a coordinator and two workers on loopback).
#  1. Worker rank 1 freezes its step thread at step 12 (--debug_freeze_at_step; its heartbeats go
#     on). `meshrt status --session` shows the frozen rank's op and the other rank waiting in a
#     collective; the training run fails within 15 s with an error naming the frozen rank (its
#     worker address, mesh coordinate, instruction and op), not only what the peer waits on; it
#     and the peer waiting in the allreduce use no CPU (frozen is stuck, not slow). The daemons
#     stay up, log the failure at ERROR, and a new session runs.
#  2. Worker rank 0 is stopped (SIGSTOP) mid-run: the run fails naming it "not responding (no
#     heartbeat for N s)", not "died". After SIGCONT it registers again and a new session runs.
#  3. A session start that fails on one rank (its Gloo cannot bind) names that rank and why, at
#     once, not the lowest rank's rendezvous timeout.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup stuck

now_ms() { date +%s%3N; }

"$runfiles/coordinator/meshrt-coordinator" --port=0 --port_file="$work/port" \
  --heartbeat_interval_ms=200 >"$logs/coordinator.log" 2>&1 &
coordinator=$!
pids+=("$coordinator")
wait_for_port_file "$work/port" "the coordinator"
address=127.0.0.1:$(cat "$work/port")
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=0 >"$logs/worker0.log" 2>&1 &
worker0=$!
pids+=("$worker0")
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=1 --debug_freeze_at_step=12 \
  >"$logs/worker1.log" 2>&1 &
worker1=$!
pids+=("$worker1")
for i in 0 1; do
  for _ in $(seq 200); do grep -q "serving at" "$logs/worker$i.log" && break; sleep 0.05; done
done
w1_address=$(grep -o "serving at [0-9.:]*" "$logs/worker1.log" | cut -d' ' -f3)
w0_address=$(grep -o "serving at [0-9.:]*" "$logs/worker0.log" | cut -d' ' -f3)
if [ -z "$w1_address" ] || [ -z "$w0_address" ]; then fail "the workers did not start"; fi

# Data parallel over both workers: every step ends in a gradient allreduce over p.
train() {  # LOG
  "$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" \
    --steps 1000000 --log_every 5 --batch 16 --d_model 16 --d_ff 32 >"$1" 2>&1
}

# --- 1. a frozen step thread --------------------------------------------------------------------
train "$logs/train1.log" &
train1=$!
pids+=("$train1")
session=$(wait_for_session "$logs/coordinator.log")
frozen_at=""
status_out=""
for _ in $(seq 300); do
  status_out=$("$meshrt" status --coordinator "$address" --session "$session" 2>&1) || true
  if grep -q "frozen on purpose" <<<"$status_out"; then
    frozen_at=$(now_ms)
    break
  fi
  sleep 0.1
done
[ -n "$frozen_at" ] || fail "meshrt status never showed the frozen rank: $status_out"
echo "$status_out"
grep -q "^  processor 1  (1)  worker [0-9]* $w1_address  step 12  instruction [0-9]* '.*'.*frozen on purpose" \
  <<<"$status_out" || fail "status should show processor 1's step, instruction and op: $status_out"
# The other rank runs on to the step's allreduce and waits there (status may catch it just before).
for _ in $(seq 30); do
  grep -q "^  processor 0  (0)  worker [0-9]* $w0_address  step 12 .* in collective ALLREDUCE over \[p\]" \
    <<<"$status_out" && break
  sleep 0.1
  status_out=$("$meshrt" status --coordinator "$address" --session "$session" 2>&1) || true
done
grep -q "^  processor 0  (0)  .* in collective ALLREDUCE over \[p\]  heartbeat" <<<"$status_out" ||
  fail "status should show processor 0 waiting in the allreduce: $status_out"

if out=$("$meshrt" status --coordinator "$address" --session s-0000 2>&1); then
  fail "status of an unknown session should fail: $out"
fi
grep -q "has no session s-0000" <<<"$out" || fail "status should name the unknown session: $out"

if wait "$train1"; then fail "the training run should fail when a rank freezes"; fi
failed_at=$(now_ms)
elapsed=$((failed_at - frozen_at))
echo "frozen rank detected ${elapsed} ms after status first showed it frozen"
[ "$elapsed" -lt 15000 ] || fail "the stuck step failed only after ${elapsed} ms (limit 15 s)"
error=$(grep -i "error\|fail" "$logs/train1.log" | tail -1)
echo "error: $error"
for want in "step 12 has run for" "over the stuck-step limit" \
  "processor 1 (worker [0-9]*, $w1_address, mesh coordinate (1)) has not arrived" \
  "in instruction [0-9]* (source_op '[^']*', local op '[^']*') of step 12" "frozen on purpose" \
  "(a test fault)\], its step thread using 0% of a core" \
  "Meanwhile processor 0 (worker [0-9]*, $w0_address, mesh coordinate (0)) waits in instruction" \
  "collective ALLREDUCE over \[p\]) of step 12 for [0-9.]* [ms]*, its step thread using [0-2]% of a core"; do
  grep -q -- "$want" <<<"$error" || fail "the error should say '$want': $error"
done
if grep -q "TLS" <<<"$error"; then fail "no TLS hint on a plaintext cluster: $error"; fi
kill -0 "$coordinator" "$worker0" "$worker1" 2>/dev/null || fail "a daemon died"
grep -q "^E .*step [0-9]* of session $session failed: step 12 has run for" "$logs/coordinator.log" ||
  fail "the coordinator should log the failed step at ERROR"
# Both workers' steps end with the session, not at the collective timeout: the frozen one when its
# session closes, its peer then too, or before its own close arrives when its allreduce loses the
# frozen one (logged at ERROR).
for _ in $(seq 50); do
  grep -q "session $session was closed while step 11 ran; it stopped after 1 of 5 repetitions: step 11: (repetition 2 of 5) instruction" \
    "$logs/worker1.log" && break
  sleep 0.1
done
grep -q "session $session was closed while step 11 ran; it stopped after 1 of 5 repetitions: step 11: (repetition 2 of 5) instruction" \
  "$logs/worker1.log" || fail "the frozen worker's step should end: $(tail -3 "$logs/worker1.log")"
for _ in $(seq 50); do
  grep -Eq "session $session (was closed while step 11 ran; it stopped after [0-9]+ of 5 repetitions|failed): step" "$logs/worker0.log" && break
  sleep 0.1
done
grep -Eq "session $session (was closed while step 11 ran; it stopped after [0-9]+ of 5 repetitions|failed): step" "$logs/worker0.log" ||
  fail "worker 0's step should end with its session: $(tail -3 "$logs/worker0.log")"

out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:2 --layout batch:p \
  --coordinator "$address" --random_feeds 1 2>&1) || fail "a new session failed: $out"
grep -q "^s \[batch:8\]" <<<"$out" || fail "no fetch printed: $out"
echo "a new session ran after the stuck one"

# --- 2. a stopped process -----------------------------------------------------------------------
# Rank 1 again without the fault, so that the run goes on until rank 0 is stopped.
kill -TERM "$worker1"
wait "$worker1" || fail "worker 1 should exit 0 on SIGTERM"
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=1 >"$logs/worker1b.log" 2>&1 &
worker1=$!
pids+=("$worker1")
for _ in $(seq 200); do grep -q "serving at" "$logs/worker1b.log" && break; sleep 0.05; done
train "$logs/train2.log" &
train2=$!
pids+=("$train2")
for _ in $(seq 100); do grep -q "step" "$logs/train2.log" && break; sleep 0.1; done
sleep 0.5
kill -STOP "$worker0"
stopped_at=$(now_ms)
if wait "$train2"; then fail "the training run should fail when a worker is stopped"; fi
echo "stopped worker reported after $(($(now_ms) - stopped_at)) ms"
error=$(grep -i "error\|fail" "$logs/train2.log" | tail -1)
echo "error: $error"
grep -q "worker [0-9]* ($w0_address, mesh coordinate (0)) is not responding (no heartbeat for [0-9.]* s" \
  <<<"$error" || fail "the stopped worker should be 'not responding': $error"
if grep -Eq "died|gone|TLS" <<<"$error"; then fail "a stopped worker is not dead: $error"; fi
kill -CONT "$worker0"
for _ in $(seq 100); do grep -q "re-registered" "$logs/worker0.log" && break; sleep 0.1; done
grep -q "re-registered" "$logs/worker0.log" || fail "worker 0 did not register again after SIGCONT"
out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:2 --layout batch:p \
  --coordinator "$address" --random_feeds 1 2>&1) || fail "a new session after SIGCONT failed: $out"
grep -q "^s \[batch:8\]" <<<"$out" || fail "no fetch printed: $out"
kill -0 "$coordinator" "$worker0" "$worker1" 2>/dev/null || fail "a daemon died"

# --- 3. a session start that fails on one rank ----------------------------------------------------
# Rank 2's Gloo cannot bind its address (192.0.2.1 is no address of this machine): the error names
# it and why, within seconds; ranks 0 and 1, waiting for it in the rendezvous, are released at once
# instead of reporting their own 30 s timeout.
"$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=2 --gloo_address=192.0.2.1 \
  >"$logs/worker2.log" 2>&1 &
worker2=$!
pids+=("$worker2")
for _ in $(seq 200); do grep -q "serving at" "$logs/worker2.log" && break; sleep 0.05; done
w2_address=$(grep -o "serving at [0-9.:]*" "$logs/worker2.log" | cut -d' ' -f3)
started=$(now_ms)
if out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:3 --layout "" \
  --coordinator "$address" --random_feeds 1 2>&1); then
  fail "a session with an unusable rank should fail: $out"
fi
took=$(($(now_ms) - started))
echo "session start failed after $took ms: $out"
grep -q "loading session s-[0-9a-f]* failed first on worker [0-9]* ($w2_address, mesh coordinate (2)): .*192.0.2.1" \
  <<<"$out" || fail "the error should name rank 2 and its Gloo address first: $out"
[ "$took" -lt 10000 ] || fail "the failed start took $took ms (the others' rendezvous timeout?)"
grep -q "^E .*worker: loading session .* failed" "$logs/worker2.log" ||
  fail "worker 2 should log its failed load at ERROR"
kill -0 "$coordinator" "$worker0" "$worker1" "$worker2" 2>/dev/null || fail "a daemon died"
echo "PASS"
