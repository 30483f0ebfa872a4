#!/usr/bin/env bash
# What an operator reads: every binary answers --version; daemons started with --log_format json
# write one JSON object per line (time in UTC, level, program, message; session and step on the
# lines that concern one), a failed step included; the text format carries the same dated
# prefix; `meshrt status` shows a running session with its owner, mesh, layout and step.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup logs
coordinator_bin=$runfiles/coordinator/meshrt-coordinator
worker_bin=$runfiles/worker/meshrt-worker

for bin in "$meshrt" "$coordinator_bin" "$worker_bin"; do
  out=$("$bin" --version) || fail "$bin --version failed: $out"
  grep -Eq "^meshrt(-coordinator|-worker)? [0-9]+\.[0-9]+\.[0-9]+ \(gRPC [0-9.]+, protobuf [0-9.]+\)$" \
    <<<"$out" || fail "$bin --version said: $out"
done
out=$("$meshrt" train --version) || fail "meshrt train --version: $out"
grep -q "^meshrt [0-9]" <<<"$out" || fail "meshrt train --version said: $out"
out=$("$coordinator_bin" --log_format=xml 2>&1) && fail "--log_format=xml should be refused"
grep -q -- "--log_format 'xml' is not text or json" <<<"$out" || fail "bad --log_format said: $out"

"$coordinator_bin" --port=0 --port_file="$work/port" --log_format=json \
  >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
address=127.0.0.1:$(cat "$work/port")
"$worker_bin" --coordinator="$address" --rank=0 --log_format=json >"$logs/worker0.log" 2>&1 &
pids+=($!)
"$worker_bin" --coordinator="$address" --rank=1 >"$logs/worker1.log" 2>&1 &  # text
pids+=($!)

# A session that runs while `meshrt status` looks at it.
"$meshrt" train --model mlp --mesh p:2 --layout batch:p --coordinator "$address" \
  --steps 1000000 --log_every 1000000 >"$logs/train.log" 2>&1 &
train=$!
pids+=("$train")
status=""
for _ in $(seq 300); do
  status=$("$meshrt" status --coordinator "$address" 2>&1) || fail "meshrt status: $status"
  grep -q "^  session s-[0-9a-f]*  owner client  mesh p:2  layout 'batch:p'  ready  step 1000000" \
    <<<"$status" && break
  sleep 0.1
done
grep -q "^  session s-[0-9a-f]*  owner client  mesh p:2  layout 'batch:p'  ready  step 1000000" \
  <<<"$status" || fail "meshrt status should show the session's owner, mesh, layout, step: $status"
kill -TERM "$train"
wait "$train" 2>/dev/null || true

# The workers choose overlap by measurement (--overlap_comm=auto, the default) on a session's
# first 8 steps, and say what they chose with the figures.
out=$("$meshrt" train --model mlp --mesh p:2 --layout batch:p --batch 8 --d_model 16 --d_ff 32 \
  --coordinator "$address" --steps 12 2>&1) || fail "a 12-step run failed: $out"
for _ in $(seq 50); do
  grep -q "overlap of collectives with compute" "$logs/worker1.log" && break
  sleep 0.1
done
grep -Eq "meshrt-worker: session s-[0-9a-f]+: overlap of collectives with compute o(n|ff) \(step medians: on [0-9.]+ ms, off [0-9.]+ ms, 3 steps each;" \
  "$logs/worker1.log" || fail "the worker should log its overlap choice: $(cat "$logs/worker1.log")"
out=$("$worker_bin" --coordinator="$address" --overlap_comm=sometimes 2>&1) &&
  fail "--overlap_comm=sometimes should be refused"
grep -q -- "--overlap_comm=sometimes: expected auto, true or false" <<<"$out" ||
  fail "bad --overlap_comm said: $out"

# A step that fails on the workers: they read no data files (no --data_dir).
echo "some text to train on, long enough for a window or two of sixteen bytes" >"$work/text.txt"
if out=$("$meshrt" train --model transformer --mesh p:2 --layout batch:p --length 16 --batch 2 \
  --d_model 16 --heads 2 --d_ff 32 --layers 1 --data "$work/text.txt" --coordinator "$address" --steps 2 2>&1); then
  fail "training on a file the workers may not read should fail: $out"
fi
grep -q "step 1 of session s-[0-9a-f]* failed" <<<"$out" || fail "the failed run said: $out"

# Give the daemons a moment to write their last lines, then check every JSON line.
sleep 0.5
/usr/bin/python3 - "$logs/coordinator.log" "$logs/worker0.log" <<'PY' || fail "JSON logs are wrong"
import json, re, sys
coordinator, worker = sys.argv[1], sys.argv[2]
def lines(path):
    out = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        obj = json.loads(line)  # every line is one JSON object
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", obj["time"]), (path, n, line)
        assert obj["level"] in ("info", "warning", "error", "fatal"), (path, n, line)
        assert isinstance(obj["message"], str) and obj["message"], (path, n, line)
        out.append(obj)
    return out
c = lines(coordinator)
assert all(o["program"] == "meshrt-coordinator" for o in c), c
made = [o for o in c if re.match(r"coordinator: session s-[0-9a-f]+ on mesh", o["message"])]
assert len(made) == 3, [o["message"] for o in c]
for o in made:
    assert o["message"].startswith("coordinator: session " + o["session"] + " "), o
failed = [o for o in c if o["level"] == "error" and " failed: " in o["message"]]
assert failed, [o["message"] for o in c]
assert failed[-1]["session"] == made[-1]["session"] and failed[-1]["step"] == 1, failed[-1]
w = lines(worker)
assert all(o["program"] == "meshrt-worker" for o in w), w
assert any("serving at" in o["message"] for o in w), w
print(f"{len(c)} coordinator and {len(w)} worker JSON lines; failed step: {failed[-1]['message'][:120]}")
PY
grep -Eq "^I [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z meshrt-worker: serving at" "$logs/worker1.log" ||
  fail "text log lines should carry the level and a dated UTC time: $(head -3 "$logs/worker1.log")"
echo "PASS"
