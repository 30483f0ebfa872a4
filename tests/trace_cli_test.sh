#!/usr/bin/env bash
# Step timelines end to end (client/chrome_trace.h): `meshrt train --trace F --trace_steps A:B` and
# `meshrt run --trace F` on 4 worker processes write Chrome trace JSON that /usr/bin/python3
# parses, with one process per rank named by its mesh coordinate, a "step N" span for exactly the
# requested steps on every rank, collectives with bytes > 0 and their wait/transfer split, every
# event inside its step span, and (train) the events covering at least 50% of each rank's traced
# step time (typically 70-95%; the rest is scheduling gaps of 4 processes on 2 cores).
# Bad flags are refused before any daemon starts.
set -euo pipefail
meshrt=$PWD/client/meshrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$PWD/tests/training_text.sh" "$tmp"
small=(--model transformer --steps 5 --seed 3 --optimizer sgd --lr 0.1 --batch 8 --length 16
       --d_model 32 --heads 4 --d_ff 64 --layers 1 --data "$text"
       --mesh rows:2,cols:2 --layout batch:rows,heads:cols,d_ff:cols,vocab:cols)

# Usage errors, exit 2, before any cluster starts (no "starting a local cluster" line).
refused() {  # refused "expected message" args...
  local want=$1; shift
  local rc=0
  "$meshrt" "$@" > "$tmp/refused.out" 2>&1 || rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q -- "$want" "$tmp/refused.out" ||
     grep -q "starting a local cluster" "$tmp/refused.out"; then
    echo "expected a usage error '$want' (exit 2) for: $*; got exit $rc:"; cat "$tmp/refused.out"
    exit 1
  fi
}
refused "expected A:B with 1 <= A <= B" train "${small[@]}" --local 4 --trace "$tmp/x.json" --trace_steps 5:2
refused "is beyond --steps 5" train "${small[@]}" --local 4 --trace "$tmp/x.json" --trace_steps 4:6
refused "--trace_steps needs --trace" train "${small[@]}" --local 4 --trace_steps 2:3
refused "not --reference" train "${small[@]}" --reference --trace "$tmp/x.json"
refused "cannot write it" train "${small[@]}" --local 4 --trace "$tmp/no/such/dir/x.json"
refused "expected A:B with 1 <= A <= B" run examples/graphs/mlp_forward.pbtxt --local 4 \
  --mesh rows:2,cols:2 --layout batch:rows --random_feeds 1 --trace "$tmp/x.json" --trace_steps 0:1

cat > "$tmp/check.py" <<'PY'
import collections, json, sys
path, ranks, steps = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
min_cover = float(sys.argv[4])  # 0: report the figure only
d = json.load(open(path))
assert d["displayTimeUnit"] == "ms", d.get("displayTimeUnit")
ev = d["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert len(names) == ranks, names
assert sorted(n.split()[1] for n in names.values()) == [str(r) for r in range(ranks)], names
assert all("rows=" in n and "cols=" in n for n in names.values()), names
xs = [e for e in ev if e["ph"] == "X"]
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
spans = collections.defaultdict(dict)
for e in xs:
    if e["cat"] == "step":
        assert e["name"] == f"step {e['args']['step']}", e
        spans[e["pid"]][e["args"]["step"]] = e
assert set(spans) == set(names), (sorted(spans), sorted(names))
for pid, s in spans.items():
    assert sorted(s) == steps, (names[pid], sorted(s), steps)
ops = [e for e in xs if e["cat"] == "op"]
assert ops and all(e["name"] and e["args"]["what"] for e in ops), ops[:1]
coll = [e for e in xs if e["cat"] == "collective"]
assert coll, "no collective"
for e in coll:
    a = e["args"]
    assert a["bytes"] > 0, e
    assert isinstance(a["wait_us"], int) and isinstance(a["transfer_us"], int), e
    assert a["wait_us"] >= 0 and a["transfer_us"] >= 0 and a["wait_us"] + a["transfer_us"] == e["dur"], e
assert any(e["cat"] == "collective.transfer" for e in xs), "no transfer span"
for e in xs:
    if e["cat"] != "step":
        assert any(sp["ts"] <= e["ts"] and e["ts"] + e["dur"] <= sp["ts"] + sp["dur"]
                   for sp in spans[e["pid"]].values()), ("outside its step spans", names[e["pid"]], e)
worst_span, worst_rank = 1.0, 1.0
for pid, s in spans.items():
    rank_covered = rank_total = 0
    for sp in s.values():
        inner = sorted((e["ts"], e["ts"] + e["dur"]) for e in xs
                       if e["pid"] == pid and e["cat"] in ("op", "collective", "wait")
                       and sp["ts"] <= e["ts"] and e["ts"] + e["dur"] <= sp["ts"] + sp["dur"])
        covered, end = 0, -1
        for a, b in inner:
            covered += max(0, b - max(a, end))
            end = max(end, b)
        worst_span = min(worst_span, covered / max(sp["dur"], 1))
        rank_covered += covered
        rank_total += sp["dur"]
    worst_rank = min(worst_rank, rank_covered / max(rank_total, 1))
waited = sum(e["args"]["wait_us"] for e in coll)
print(f"{path}: {ranks} ranks, steps {steps}, {len(ops)} ops, {len(coll)} collectives "
      f"({waited} us waiting for peers); ops, collectives and waits cover at least "
      f"{100 * worst_rank:.1f}% of each rank's step time (each step span: at least "
      f"{100 * worst_span:.1f}%)")
assert worst_rank >= min_cover, (worst_rank, min_cover)
PY

$meshrt train "${small[@]}" --local 4 --trace "$tmp/train.json" --trace_steps 2:4 \
  > "$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; exit 1; }
grep -q "wrote the timelines of steps 2..4 (12 rank-steps)" "$tmp/train.out"
/usr/bin/python3 "$tmp/check.py" "$tmp/train.json" 4 2,3,4 0.5
# Op events carry names a person can read, by scope: the forward ops' layers, each backward op
# under the op it differentiates (".../grad/..."), each update under its variable
# ("layer_0/ffn/w1/sgd/..."); none is a generated name ("einsum_7").
/usr/bin/python3 - "$tmp/train.json" <<'PY'
import json, re, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
ops = [e["name"] for e in ev if e.get("ph") == "X" and e.get("cat") == "op"]
unscoped = [n for n in ops if "/" not in n]
generated = [n for n in ops if re.fullmatch(r"[a-z_0-9]+_[0-9]+", n)]
print(f"{len(ops)} op events: {len(unscoped)} without a scope, {len(generated)} generated names")
# The few top-level names are the model's own ("embed", "logits", "loss", ...), not generated.
assert ops and len(set(unscoped)) <= 12, sorted(set(unscoped))
assert not generated, sorted(set(generated))[:20]
assert any(n.startswith("layer_0/attention/") and "/grad/" in n for n in ops), "no attention backward op"
assert any(n.startswith("layer_0/ffn/w1/sgd/") for n in ops), "no update op of layer_0/ffn/w1"
PY

# The default: the run's second and third steps.
$meshrt train "${small[@]}" --local 4 --trace "$tmp/default.json" > "$tmp/default.out" 2>&1 ||
  { cat "$tmp/default.out"; exit 1; }
/usr/bin/python3 "$tmp/check.py" "$tmp/default.json" 4 2,3 0.5

# meshrt run: its one step by default; --trace_steps 2:3 runs it three times, tracing two. Its
# steps are a few hundred microseconds, where 4 processes on 2 cores leave scheduling gaps
# between ops: the coverage is reported, not asserted.
graph=examples/graphs/mlp_forward.pbtxt
$meshrt run $graph --mesh rows:2,cols:2 --layout batch:rows,hidden:cols --local 4 --random_feeds 1 \
  --trace "$tmp/run.json" > "$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; exit 1; }
/usr/bin/python3 "$tmp/check.py" "$tmp/run.json" 4 1 0
$meshrt run $graph --mesh rows:2,cols:2 --layout batch:rows,hidden:cols --local 4 --random_feeds 1 \
  --trace "$tmp/run2.json" --trace_steps 2:3 > "$tmp/run2.out" 2>&1 || { cat "$tmp/run2.out"; exit 1; }
grep -q "^y \[batch:8, d_out:8\]" "$tmp/run2.out"
/usr/bin/python3 "$tmp/check.py" "$tmp/run2.json" 4 2,3 0

# tools/trace_svg.py draws the train trace: a row per track, a bar per complete event, each
# rank's name; a file that is not a trace is refused with exit 2.
/usr/bin/python3 tools/trace_svg.py "$tmp/train.json" --out "$tmp/train.svg" 2> "$tmp/svg.err"
/usr/bin/python3 - "$tmp/train.json" "$tmp/train.svg" <<'PY'
import json, sys, xml.etree.ElementTree as ET
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
svg = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
bars = [r for r in svg.iter(ns + "rect") if r.find(ns + "title") is not None]
assert len(bars) == len(events), (len(bars), len(events))
texts = " ".join(t.text or "" for t in svg.iter(ns + "text"))
for r in range(4):
    assert f"rank {r} (" in texts, r
print(f"trace_svg: {len(bars)} bars for {len(events)} events")
PY
echo '{"traceEvents": 3}' > "$tmp/bad.json"
set +e
/usr/bin/python3 tools/trace_svg.py "$tmp/bad.json" > /dev/null 2> "$tmp/bad_svg.err"
code=$?
set -e
test "$code" -eq 2 && grep -q "no traceEvents" "$tmp/bad_svg.err" || { cat "$tmp/bad_svg.err"; exit 1; }
echo PASS
