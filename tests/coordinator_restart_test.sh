#!/usr/bin/env bash
# A coordinator killed (SIGKILL) while a session is loaded, then started again on the same port:
# it keeps its generated tokens, the workers register again, see a new coordinator incarnation and
# drop the session of the dead one (nobody could run or close it any more), and a new session on
# the same workers runs. Session ids are random, so the new one never collides with the old. Then
# `meshrt sessions` lists a running session and `meshrt sessions close ID` frees its workers.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup restart

start_coordinator() {  # PORT LOG
  rm -f "$work/port"
  "$runfiles/coordinator/meshrt-coordinator" --port="$1" --port_file="$work/port" \
    --heartbeat_interval_ms=200 --heartbeat_timeout_ms=2000 >>"$2" 2>&1 &
  coordinator=$!
  pids+=("$coordinator")
  wait_for_port_file "$work/port" "the coordinator (see $2)"
}

start_coordinator 0 "$logs/coordinator.log"
port=$(cat "$work/port")
address=127.0.0.1:$port
for i in 0 1; do
  "$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=$i >"$logs/worker$i.log" 2>&1 &
  pids+=($!)
done

# A training run holds a session on both workers; the coordinator dies under it.
"$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" --steps 100000 \
  >"$logs/train.log" 2>&1 &
train=$!
pids+=("$train")
for _ in $(seq 300); do grep -q "session s-" "$logs/coordinator.log" && break; sleep 0.1; done
old=$(grep -o "session s-[0-9a-f]*" "$logs/coordinator.log" | head -1 | cut -d' ' -f2)
[ -n "$old" ] || fail "no session started"
kill -KILL "$coordinator"
wait "$coordinator" 2>/dev/null || true
wait "$train" 2>/dev/null && fail "the training run should fail when its coordinator dies"

start_coordinator "$port" "$logs/coordinator2.log"
grep -q "generated credentials in $MESHRT_HOME/$port" "$logs/coordinator2.log" ||
  fail "the restarted coordinator should reuse $MESHRT_HOME/$port"
for i in 0 1; do
  for _ in $(seq 100); do grep -q "dropped session $old" "$logs/worker$i.log" && break; sleep 0.1; done
  grep -q "dropped session $old of an earlier coordinator incarnation" "$logs/worker$i.log" ||
    fail "worker $i kept session $old of the dead coordinator: $(tail -3 "$logs/worker$i.log")"
done
echo "both workers dropped $old"

out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:2 --layout batch:p \
  --coordinator "$address" --random_feeds 1 2>&1) || fail "a new session failed: $out"
grep -q "^s \[batch:8\]" <<<"$out" || fail "no fetch printed: $out"
new=$(grep -o "session s-[0-9a-f]*" "$logs/coordinator2.log" | head -1 | cut -d' ' -f2)
{ [ -n "$new" ] && [ "$new" != "$old" ]; } || fail "the new session id '$new' should differ from '$old'"
echo "new session $new ran on the workers of the dead coordinator's $old"

# A client that hangs on to its session (here: a long training run) can have it closed by the
# operator: `meshrt sessions` lists it, `meshrt sessions close ID` frees its workers.
"$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" --steps 100000 \
  >"$logs/train2.log" 2>&1 &
train=$!
pids+=("$train")
listed=""
for _ in $(seq 300); do
  listed=$("$meshrt" sessions --coordinator "$address" 2>&1) || fail "meshrt sessions: $listed"
  grep -q "owner client  mesh p:2  layout 'batch:p'  ready  step [1-9]" <<<"$listed" && break
  sleep 0.1
done
grep -q "owner client  mesh p:2  layout 'batch:p'  ready  step [1-9]" <<<"$listed" ||
  fail "the training session is not listed with its owner, mesh, layout, state and step: $listed"
id=$(grep -o "s-[0-9a-f]*" <<<"$listed" | head -1)
closed=$("$meshrt" sessions close "$id" --coordinator "$address" 2>&1) || fail "close: $closed"
grep -q "closed session $id" <<<"$closed" || fail "close said: $closed"
wait "$train" 2>/dev/null && fail "the training run should fail once its session is closed"
listed=$("$meshrt" sessions --coordinator "$address" 2>&1)
grep -q "^0 session(s)" <<<"$listed" || fail "the closed session is still listed: $listed"
unknown=$("$meshrt" sessions close "$id" --coordinator "$address" 2>&1) &&
  fail "closing it twice should fail"
grep -q "no session '$id'" <<<"$unknown" || fail "second close said: $unknown"
# Its workers are free again: a new session runs at once.
out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:2 --layout batch:p \
  --coordinator "$address" --random_feeds 1 2>&1) || fail "after close: $out"
echo "PASS"
