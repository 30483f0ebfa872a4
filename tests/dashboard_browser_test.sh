#!/usr/bin/env bash
# The coordinator's live dashboard in a real browser (headless Chromium): a coordinator and two
# workers, a small Transformer training in the background on them; the page, opened with the
# operator token as `meshrt local` prints it, shows both workers, the session and its loss curve
# (an SVG polyline of at least 2 points) with the client's name — markup, as a token file may
# name a client — shown as text, not as an element; without the token the page and the JSON are
# 401 and show no data. The screenshot is kept as a test output (dashboard.png).
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup dashboard
coordinator_bin=$runfiles/coordinator/meshrt-coordinator
worker_bin=$runfiles/worker/meshrt-worker

chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || fail "chromium is not installed: this test loads the dashboard in headless \
Chromium; install Debian's chromium package (tools/setup.sh does, or: apt-get install -y \
--no-install-recommends chromium)"
command -v curl >/dev/null || fail "curl is not installed (tools/setup.sh installs it)"

# Token files of our own, so that the client can have a hostile name.
hostile="<img/src=x/onerror=document.title='pwned'>client"
operator=0123456789abcdef0123456789abcdef
printf '%s %s\n' "$hostile" fedcba9876543210fedcba9876543210 >"$work/clients.token"
printf '%s\n' "$operator" >"$work/operator.token"
printf '%s\n' 00112233445566778899aabbccddeeff >"$work/cluster.token"
chmod 600 "$work"/*.token

source "$PWD/tests/training_text.sh" "$work"

"$coordinator_bin" --port=0 --port_file="$work/port" --metrics_port=-1 \
  --metrics_port_file="$work/http_port" --auth_token_file="$work/clients.token" \
  --operator_token_file="$work/operator.token" --cluster_token_file="$work/cluster.token" \
  --heartbeat_interval_ms=200 >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
wait_for_port_file "$work/http_port" "the coordinator's HTTP server"
address=127.0.0.1:$(cat "$work/port")
dashboard=http://127.0.0.1:$(cat "$work/http_port")
for rank in 0 1; do
  "$worker_bin" --coordinator="$address" --rank="$rank" --cluster_token_file="$work/cluster.token" \
    --data_dir="$(dirname "$text")" >"$logs/worker$rank.log" 2>&1 &
  pids+=($!)
done

# Long enough to outlast the test; the loss comes back with every step (--log_every 1).
"$meshrt" train --model transformer --mesh p:2 --layout batch:p --batch 8 --length 16 \
  --d_model 32 --heads 4 --d_ff 64 --layers 1 --data "$text" --optimizer adam --lr 0.01 \
  --steps 100000 --log_every 1 --coordinator "$address" --auth_token_file="$work/clients.token" \
  >"$logs/train.log" 2>&1 &
pids+=($!)

api() {  # PATH: the JSON at PATH, with the operator token
  curl -sf --max-time 5 -H "Authorization: Bearer $operator" "$dashboard$1"
}
# Wait for a few dozen steps (at most 40 s).
session="" steps=0
for _ in $(seq 400); do
  cluster=$(api /api/cluster) || fail "GET /api/cluster with the token failed"
  read -r session steps < <(/usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
s = [x for x in c["sessions"] if x["state"] in ("ready", "running")]
print(s[0]["id"] if s else "-", s[0]["step"] if s else 0)' <<<"$cluster")
  [ "$steps" -ge 30 ] && break
  sleep 0.1
done
[ "$steps" -ge 30 ] || fail "the session did not reach 30 steps in 40 s (at $steps): see train.log"
echo "session $session at step $steps"

# The JSON without a token: 401, no data.
code=$(curl -s -o "$work/noauth.json" -w '%{http_code}' --max-time 5 "$dashboard/api/cluster")
[ "$code" = 401 ] || fail "GET /api/cluster without the token answered $code"
if grep -q "$session" "$work/noauth.json"; then fail "the 401 answer names the session"; fi

browse() {  # OUT_DIR URL [chromium flags...]: the page after ~6 s of its (virtual) time
  local out=$1 url=$2
  shift 2
  HOME=$work timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$out" --virtual-time-budget=6000 --window-size=1280,900 --hide-scrollbars \
    "$@" "$url" 2>>"$logs/chromium.log"
}

# With the token, as `meshrt local` and `meshrt demo` print the address.
browse "$work/chrome1" "$dashboard/?token=$operator" --dump-dom >"$work/dom.html" ||
  fail "chromium could not load $dashboard (see chromium.log)"
cp "$work/dom.html" "$logs/dashboard_dom.html"
/usr/bin/python3 - "$work/dom.html" "$session" "$hostile" <<'PY' || fail "the dashboard's DOM is wrong (dashboard_dom.html)"
import html, re, sys
dom, session, hostile = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)
check("updated " in dom, "the status line never said 'updated' (the page did not load the JSON)")
workers = re.findall(r'<tr class="worker worker-(\w+)">', dom)
check(workers == ["busy", "busy"], f"want two busy workers, the page shows {workers}")
check(len(re.findall(r'<tr class="session[ "]', dom)) == 1, "want one session row")
check(session in dom, f"the session {session} is not on the page")
m = re.search(r'<polyline id="loss-line"[^>]*data-count="(\d+)"[^>]*points="([^"]*)"', dom)
check(m is not None, "no loss curve (polyline#loss-line) on the page")
count, points = int(m.group(1)), m.group(2).split()
check(count >= 2 and len(points) == count, f"the loss curve has {len(points)} points (want >= 2)")
check(all(re.fullmatch(r"-?[\d.]+,-?[\d.]+", p) for p in points), "malformed polyline points")
# The client's name is shown as text (escaped in the serialised DOM), never as an element.
check(html.escape(hostile, quote=False) in dom, "the owner's name is not shown as text")
check("<img" not in dom, "the owner's name became an <img> element")
check("pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1), "the title was changed")
check(re.search(r'<table id="tensors">.*?<td>', dom, re.S) is not None, "no tensors in the explain")
check('id="collectives"' in dom and "allreduce" in dom, "no collective in the explain")
print(f"dashboard DOM: 2 busy workers, session {session}, loss curve of {count} points")
PY

# Without the token: 401 and nothing of the cluster.
browse "$work/chrome2" "$dashboard/" --dump-dom >"$work/dom_noauth.html" ||
  fail "chromium could not load $dashboard/ without the token"
grep -q "401 unauthorized" "$work/dom_noauth.html" ||
  fail "the page without the token is not the 401: $(head -c 500 "$work/dom_noauth.html")"
if grep -q -e "$session" -e "loss-line" "$work/dom_noauth.html"; then
  fail "the page without the token shows data"
fi

# The screenshot, kept as a test output.
browse "$work/chrome3" "$dashboard/?token=$operator" --screenshot="$logs/dashboard.png" ||
  fail "chromium could not take the screenshot"
[ "$(head -c 8 "$logs/dashboard.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "dashboard.png is not a PNG"
[ "$(stat -c %s "$logs/dashboard.png")" -gt 20000 ] || fail "dashboard.png is nearly empty"
echo "PASS: screenshot in $logs/dashboard.png"
