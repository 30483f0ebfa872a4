#!/usr/bin/env bash
# docs/operations.md's Prometheus example as written: its `meshrt local` command (coordinator
# metrics on 9400, workers 9401 and 9402, one --metrics_token_file) and its prometheus.yml, taken
# from docs/operations.md ("Metrics") unchanged, run with Debian's real Prometheus: every target
# is up, each scrape passes `promtool check metrics`, and without the token a daemon answers 401.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup prometheus_scrape
doc=$runfiles/docs/operations.md
command -v prometheus > /dev/null || fail "no prometheus (tools/setup.sh installs Debian's prometheus)"

# The two blocks after "A local cluster for Prometheus": the ```sh commands and the ```yaml config.
python3 - "$doc" "$work" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
part = text[text.index("A local cluster for Prometheus"):]
sh = re.search(r"```sh\n(.*?)```", part, re.S).group(1)
yaml = re.search(r"```yaml\n(.*?)```", part, re.S).group(1)
open(f"{sys.argv[2]}/commands.sh", "w").write(sh)
open(f"{sys.argv[2]}/prometheus.yml", "w").write(yaml)
PY
grep -q "meshrt local" "$work/commands.sh" || fail "no meshrt local command in docs/operations.md's block"
cd "$work"
# The commands, with the binary this test built; `meshrt local` runs until stopped.
token_line=$(grep -v "meshrt local" commands.sh)
local_line=$(grep "meshrt local" commands.sh | sed "s|bazel-bin/client/meshrt|$meshrt|")
bash -c "$token_line"
test -s metrics.token || fail "docs/operations.md's first command made no metrics.token"
bash -c "exec $local_line" > "$logs/local.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do grep -q "metrics at" "$logs/local.log" && break; sleep 0.1; done
grep -q "metrics at http://127.0.0.1:9400/metrics" "$logs/local.log" ||
  fail "meshrt local did not announce its metrics on 9400: $(cat "$logs/local.log")"
grep -q "http://127.0.0.1:9401/metrics, http://127.0.0.1:9402/metrics" "$logs/local.log" ||
  fail "the workers' metrics ports are not 9401 and 9402: $(cat "$logs/local.log")"

token=$(cat metrics.token)
for port in 9400 9401 9402; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port/metrics")
  [[ $code == 401 ]] || fail "port $port without a token answered $code, not 401"
  curl -sS --fail --max-time 10 -H "Authorization: Bearer $token" \
    "http://127.0.0.1:$port/metrics" > "scrape.$port"
  promtool check metrics < "scrape.$port" || fail "promtool check metrics on port $port"
done

# Prometheus on a free port, the doc's config as is.
web_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prometheus --config.file=prometheus.yml --storage.tsdb.path=tsdb \
  --web.listen-address="127.0.0.1:$web_port" > "$logs/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 90); do
  if curl -s --max-time 5 "http://127.0.0.1:$web_port/api/v1/targets" > targets.json 2> /dev/null &&
    python3 - targets.json <<'PY'
import json, sys
targets = json.load(open(sys.argv[1]))["data"]["activeTargets"]
up = sorted(t["labels"]["instance"] for t in targets if t["health"] == "up")
sys.exit(0 if up == ["127.0.0.1:9400", "127.0.0.1:9401", "127.0.0.1:9402"] else 1)
PY
  then
    echo "prometheus_scrape_test: Prometheus finds 127.0.0.1:9400, :9401 and :9402 up"
    exit 0
  fi
  sleep 1
done
python3 -c 'import json,sys; [print(t["labels"]["instance"], t["health"], t["lastError"]) for t in json.load(open(sys.argv[1]))["data"]["activeTargets"]]' targets.json || true
fail "Prometheus did not find every target up within 90 s"
