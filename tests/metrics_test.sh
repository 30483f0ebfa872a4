#!/usr/bin/env bash
# Prometheus /metrics on a real coordinator and two workers (--metrics_port -1): scraped with curl
# and the operator token (coordinator) / the cluster token (workers) during and after a short
# `meshrt train` of a data-parallel Transformer, parsed by a small text-format parser: every family
# has HELP and TYPE, names follow the conventions, counters never decrease between scrapes, the
# session's step counter and step histogram count the steps run, its tokens are batch x length per
# step, the workers count allreduces over mesh dim p, two workers are alive, and a request
# without a token is 401.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup metrics
coordinator_bin=$runfiles/coordinator/meshrt-coordinator
worker_bin=$runfiles/worker/meshrt-worker
steps=30
batch=4
length=16

for i in $(seq 1 400); do echo "The quick brown fox $i jumps over the lazy dog."; done >"$work/text.txt"

"$coordinator_bin" --port=0 --port_file="$work/port" --metrics_port=-1 \
  --metrics_port_file="$work/coordinator.metrics_port" >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
wait_for_port_file "$work/coordinator.metrics_port" "the coordinator's metrics server"
port=$(cat "$work/port")
address=127.0.0.1:$port
for r in 0 1; do
  "$worker_bin" --coordinator="$address" --rank=$r --data_dir="$work" --metrics_port=-1 \
    --metrics_port_file="$work/worker$r.metrics_port" >"$logs/worker$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do wait_for_port_file "$work/worker$r.metrics_port" "worker $r's metrics server"; done
operator_token=$(cat "$MESHRT_HOME/$port/operator.token")
cluster_token=$(cat "$MESHRT_HOME/$port/cluster.token")
coordinator_url=http://127.0.0.1:$(cat "$work/coordinator.metrics_port")/metrics

scrape() {  # URL TOKEN OUT: the body to OUT, checking status 200 and the Content-Type
  local headers
  headers=$(curl -sS --max-time 10 -D - -o "$3" -H "Authorization: Bearer $2" "$1") ||
    fail "curl $1 failed"
  grep -q "^HTTP/1.1 200" <<<"$headers" || fail "$1 answered: $headers"
  grep -qi "^Content-Type: text/plain; version=0.0.4; charset=utf-8" <<<"$headers" ||
    fail "$1 has the wrong Content-Type: $headers"
}

# No token, or a wrong one (the client token is not a metrics token): 401.
for url in "$coordinator_url" "http://127.0.0.1:$(cat "$work/worker0.metrics_port")/metrics"; do
  code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$url")
  [ "$code" = 401 ] || fail "$url without a token answered $code, not 401"
  code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $(cat "$MESHRT_HOME/$port/client.token")" "$url")
  [ "$code" = 401 ] || fail "$url with the client token answered $code, not 401"
done

# Both workers registered (alive) before the run.
for _ in $(seq 100); do
  scrape "$coordinator_url" "$operator_token" "$work/c0.txt"
  grep -q "^meshrt_coordinator_workers_alive 2$" "$work/c0.txt" && break
  sleep 0.1
done
grep -q "^meshrt_coordinator_workers_alive 2$" "$work/c0.txt" ||
  fail "meshrt_coordinator_workers_alive is not 2: $(grep workers "$work/c0.txt")"

"$meshrt" train --model transformer --mesh p:2 --layout batch:p --steps $steps --seed 3 \
  --batch $batch --length $length --d_model 16 --heads 2 --d_ff 32 --layers 1 \
  --data "$work/text.txt" --coordinator "$address" >"$logs/train.log" 2>&1 &
train=$!
pids+=("$train")

# During the run: a scrape that sees some of its steps (or, on a fast machine, all of them).
during=""
for _ in $(seq 300); do
  scrape "$coordinator_url" "$operator_token" "$work/c1.txt"
  if grep -q '^meshrt_steps_total{session="s-' "$work/c1.txt"; then during=yes; break; fi
  sleep 0.05
done
[ -n "$during" ] || fail "no step of the training run showed in the coordinator's metrics"
for r in 0 1; do
  scrape "http://127.0.0.1:$(cat "$work/worker$r.metrics_port")/metrics" "$cluster_token" \
    "$work/w$r.1.txt"
done
wait "$train" || fail "meshrt train failed: $(tail -5 "$logs/train.log")"
grep -q "after $steps steps" "$logs/train.log" || fail "the run did not report $steps steps"

# After the run.
scrape "$coordinator_url" "$operator_token" "$work/c2.txt"
for r in 0 1; do
  scrape "http://127.0.0.1:$(cat "$work/worker$r.metrics_port")/metrics" "$cluster_token" \
    "$work/w$r.2.txt"
done

/usr/bin/python3 - "$work" "$steps" "$((batch * length))" <<'PY' || fail "the metrics are wrong"
import math, re, sys

work, steps, tokens_per_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(path):
    """Families {name: {help, type, samples: {(sample name, labels): value}}} of a text-format
    file; fails on anything the 0.0.4 format does not allow."""
    families, current = {}, None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        where = f"{path}:{n}: {line!r}"
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, _, text = rest.partition(" ")
            assert NAME.fullmatch(name), where
            fam = families.setdefault(name, {"help": None, "type": None, "samples": {}})
            key = "help" if kind == "HELP" else "type"
            assert fam[key] is None, f"second {kind}: {where}"
            fam[key] = text
            if kind == "TYPE":
                assert text in ("counter", "gauge", "histogram", "summary", "untyped"), where
            current = name
            continue
        assert line and not line.startswith("#"), f"unexpected line {where}"
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)", line)
        assert m, f"not a sample: {where}"
        sample, labels_text, value = m.group(1), m.group(3) or "", m.group(4)
        labels, pos = [], 0
        while pos < len(labels_text):
            lm = LABEL.match(labels_text, pos)
            assert lm, f"bad labels: {where}"
            labels.append((lm.group(1), lm.group(2)))
            pos = lm.end()
            if pos < len(labels_text):
                assert labels_text[pos] == ",", f"bad labels: {where}"
                pos += 1
        v = float(value)  # accepts +Inf, -Inf, NaN
        fam = families.get(current)
        assert fam is not None and fam["type"] is not None, f"sample before its TYPE: {where}"
        base = current
        if fam["type"] == "histogram":
            assert sample in (base + "_bucket", base + "_sum", base + "_count"), where
        else:
            assert sample == base, f"sample {sample} in family {base}: {where}"
        key = (sample, tuple(labels))
        assert key not in fam["samples"], f"duplicate sample: {where}"
        fam["samples"][key] = v
    return families


def check_conventions(families, path):
    assert families, f"{path}: no metrics"
    for name, fam in families.items():
        assert fam["help"], f"{path}: {name} has no HELP"
        assert fam["type"], f"{path}: {name} has no TYPE"
        assert name.startswith(("meshrt_", "process_")), f"{path}: {name} lacks a namespace"
        if fam["type"] == "counter":
            assert name.endswith("_total"), f"{path}: counter {name} does not end in _total"
        else:
            assert not name.endswith("_total"), f"{path}: {fam['type']} {name} ends in _total"
        for unit in ("_ms", "_milliseconds", "_kb", "_mb", "_kib", "_mib"):
            assert unit + "_" not in name + "_", f"{path}: {name} is not in base units"
        if fam["type"] == "histogram":
            series = {}
            for (sample, labels), v in fam["samples"].items():
                rest = tuple(l for l in labels if l[0] != "le")
                series.setdefault(rest, {})[(sample, dict(labels).get("le"))] = v
            for rest, s in series.items():
                buckets = sorted(((math.inf if le == "+Inf" else float(le)), v)
                                 for (sample, le), v in s.items() if sample.endswith("_bucket"))
                assert buckets and buckets[-1][0] == math.inf, f"{path}: {name}{rest} has no +Inf"
                counts = [v for _, v in buckets]
                assert counts == sorted(counts), f"{path}: {name}{rest} buckets not cumulative"
                assert s[(name + "_count", None)] == counts[-1], f"{path}: {name}{rest} _count"
                assert (name + "_sum", None) in s, f"{path}: {name}{rest} has no _sum"


def check_monotonic(before, after, path):
    for name, fam in before.items():
        counting = fam["type"] == "counter" or fam["type"] == "histogram"
        if not counting:
            continue
        for key, v in fam["samples"].items():
            if fam["type"] == "histogram" and key[0].endswith("_sum"):
                continue
            later = after[name]["samples"].get(key)
            assert later is not None, f"{path}: {key} disappeared"
            assert later >= v, f"{path}: {key} went down from {v} to {later}"


def value(families, name, **labels):
    fam = families[name]
    for (sample, ls), v in fam["samples"].items():
        if sample == name and dict(ls) == labels:
            return v
    raise AssertionError(f"no {name}{labels}")


def series(families, name, sample=None):
    return {ls: v for (s, ls), v in families[name]["samples"].items() if s == (sample or name)}


c0, c1, c2 = (parse(f"{work}/c{i}.txt") for i in range(3))
for path, fams in (("c0", c0), ("c1", c1), ("c2", c2)):
    check_conventions(fams, path)
check_monotonic(c0, c1, "coordinator scrape 0 -> 1")
check_monotonic(c1, c2, "coordinator scrape 1 -> 2")

sessions = {dict(ls)["session"] for ls in series(c2, "meshrt_steps_total")}
assert len(sessions) == 1, sessions
(session,) = sessions
assert value(c2, "meshrt_steps_total", session=session) == steps
assert series(c2, "meshrt_step_duration_seconds", "meshrt_step_duration_seconds_count") == {
    (("session", session),): steps}
assert value(c2, "meshrt_tokens_total", session=session) == steps * tokens_per_step
during = value(c1, "meshrt_steps_total", session=session)
assert 1 <= during <= steps, during
assert value(c2, "meshrt_coordinator_workers_alive") == 2
assert value(c2, "meshrt_coordinator_workers_registered") == 2
assert value(c2, "meshrt_coordinator_workers_busy") == 0  # the session is closed
states = {dict(ls)["state"]: v for ls, v in series(c2, "meshrt_coordinator_sessions").items()}
assert set(states) == {"creating", "ready", "running", "failed", "expired"}, states
assert sum(states.values()) == 0, states
assert value(c2, "meshrt_step_failures_total") == 0
assert value(c2, "process_resident_memory_bytes") > 1e6
assert value(c2, "process_start_time_seconds") > 1.5e9

for r in (0, 1):
    w1, w2 = parse(f"{work}/w{r}.1.txt"), parse(f"{work}/w{r}.2.txt")
    check_conventions(w1, f"worker {r}")
    check_conventions(w2, f"worker {r}")
    check_monotonic(w1, w2, f"worker {r} scrape 1 -> 2")
    assert value(w2, "meshrt_worker_steps_total") == steps, value(w2, "meshrt_worker_steps_total")
    assert series(w2, "meshrt_worker_step_duration_seconds",
                  "meshrt_worker_step_duration_seconds_count") == {(): steps}
    calls = value(w2, "meshrt_worker_collective_calls_total", kind="allreduce", mesh_dims="p")
    sent = value(w2, "meshrt_worker_collective_bytes_total", kind="allreduce", mesh_dims="p")
    secs = value(w2, "meshrt_worker_collective_seconds_total", kind="allreduce", mesh_dims="p")
    # Data parallel over p: every step allreduces its gradients over p.
    assert calls >= steps and sent > 0 and secs > 0, (calls, sent, secs)
    assert value(w2, "meshrt_worker_compute_seconds_total") > 0
    assert value(w2, "meshrt_worker_sessions") == 0
print(f"session {session}: {steps} steps, {steps * tokens_per_step} tokens; "
      f"{len(c2)} coordinator families, {len(w2)} worker families")
PY
echo "PASS"
