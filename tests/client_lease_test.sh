#!/usr/bin/env bash
# Session leases with real daemons (coordinator --session_lease=2s, two workers): a training run
# whose one RunSteps request runs for minutes keeps its session well past the lease (its client
# renews it meanwhile); killed with SIGKILL, it loses the session within the lease and a few
# seconds: the coordinator logs a WARNING naming the session, its owner and the silence, the
# workers stop the step in flight, `meshrt sessions` lists it as expired with why, and a new session
# runs on the same workers at once.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup lease
coordinator_bin=$runfiles/coordinator/meshrt-coordinator

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Bad leases are refused at startup, naming the flag and the fix.
for bad in "500ms:is below 1s" "10:is not a duration" "-3s:is below 1s"; do
  value=${bad%%:*}
  want=${bad#*:}
  out=$("$coordinator_bin" --port=0 --session_lease="$value" 2>&1) &&
    fail "--session_lease=$value should be refused"
  grep -q -- "--session_lease=$value $want" <<<"$out" || fail "--session_lease=$value said: $out"
done
# `meshrt local --session_lease` passes the value to its coordinator, which checks it.
out=$(cd "$work" && timeout 60 "$meshrt" local --workers 1 --session_lease 500ms 2>&1) &&
  fail "meshrt local --session_lease 500ms should be refused"
grep -q -- "--session_lease=500ms is below 1s" <<<"$out" || fail "meshrt local said: $out"

"$coordinator_bin" --port=0 --port_file="$work/port" --session_lease=2s \
  --heartbeat_interval_ms=200 --heartbeat_timeout_ms=2000 >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
address=127.0.0.1:$(cat "$work/port")
grep -q "session lease 2s" "$logs/coordinator.log" || fail "the coordinator does not log its lease"
for i in 0 1; do
  "$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=$i >"$logs/worker$i.log" 2>&1 &
  pids+=($!)
done

# One request of a million steps: minutes of work in a single RunSteps call.
"$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" \
  --steps 1000000 --log_every 1000000 >"$logs/train.log" 2>&1 &
train=$!
pids+=("$train")
listed=""
for _ in $(seq 300); do
  listed=$("$meshrt" sessions --coordinator "$address" 2>&1) || fail "meshrt sessions: $listed"
  grep -q "  ready  step 1000000" <<<"$listed" && break
  sleep 0.1
done
grep -q "  ready  step 1000000" <<<"$listed" || fail "the training session did not start: $listed"
id=$(grep -o "s-[0-9a-f]*" <<<"$listed" | head -1)

# Three leases later the request is still running and the session alive: the client renews.
sleep 6
listed=$("$meshrt" sessions --coordinator "$address" 2>&1)
grep -q "$id  owner client  mesh p:2  layout 'batch:p'  ready  step 1000000  age [0-9.]* s  lease renewed [01]\.[0-9] s ago" \
  <<<"$listed" || fail "the session of a live client should stay ready, renewed: $listed"
grep -q "expired" "$logs/coordinator.log" && fail "a session expired while its client was alive"
kill -0 "$train" 2>/dev/null || fail "the training run ended early: $(tail -3 "$logs/train.log")"
echo "session $id alive 6 s (3 leases) into one long RunSteps request"

# The client dies without a word.
kill -KILL "$train"
killed=$(now)
free=""
for _ in $(seq 100); do
  status=$("$meshrt" status --coordinator "$address" 2>&1) || fail "meshrt status: $status"
  [ "$(grep -c "  free  " <<<"$status")" = 2 ] && { free=$(elapsed "$killed"); break; }
  sleep 0.1
done
[ -n "$free" ] || fail "the workers were not freed within 10 s of the client's death: $status"
awk -v t="$free" 'BEGIN { exit !(t <= 5.0) }' ||
  fail "the workers were freed $free s after the client died; the lease is 2 s"
echo "workers free $free s after SIGKILL of the client (lease 2 s)"

grep -q "W .*coordinator: session $id of client 'client' on mesh p:2 expired: its client was silent for [0-9.]*s (> --session_lease 2s); closing it on its workers and cancelling its step in flight" \
  "$logs/coordinator.log" || fail "no WARNING naming the session, owner and silence: $(tail -3 "$logs/coordinator.log")"
listed=$("$meshrt" sessions --coordinator "$address" 2>&1)
grep -q "$id  owner client  mesh p:2  layout 'batch:p'  expired  step 1000000  age [0-9.]* s  error: session $id expired: its client (client 'client') was silent for [0-9.]*s (> --session_lease 2s)" \
  <<<"$listed" || fail "the expired session is not listed as expired with why: $listed"
for i in 0 1; do
  for _ in $(seq 100); do
    grep -q "session $id was closed while step" "$logs/worker$i.log" && break
    sleep 0.1
  done
  grep -q "worker: session $id was closed while step [0-9]* ran; it stopped after [0-9]* of 1000000 repetitions" \
    "$logs/worker$i.log" || fail "worker $i did not stop the expired session's step: $(tail -3 "$logs/worker$i.log")"
done

# A new session runs on the same workers at once.
started=$(now)
out=$("$meshrt" run examples/graphs/mlp_forward.pbtxt --mesh p:2 --layout batch:p \
  --coordinator "$address" --random_feeds 1 2>&1) || fail "a new session failed: $out"
grep -q "^s \[batch:8\]" <<<"$out" || fail "no fetch printed: $out"
took=$(elapsed "$started")
awk -v t="$took" 'BEGIN { exit !(t <= 5.0) }' || fail "the new session took $took s"
echo "a new session ran in $took s"

# Closing the expired session forgets it.
closed=$("$meshrt" sessions close "$id" --coordinator "$address" 2>&1) || fail "close: $closed"
grep -q "closed session $id" <<<"$closed" || fail "close said: $closed"
listed=$("$meshrt" sessions --coordinator "$address" 2>&1)
grep -q "^0 session(s)" <<<"$listed" || fail "the closed session is still listed: $listed"
echo "PASS"
