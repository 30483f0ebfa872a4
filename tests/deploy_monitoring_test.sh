#!/usr/bin/env bash
# Monitoring as deploy/ ships it, checked with the real tools:
# - the alert rules (deploy/prometheus/meshrt-rules.yml): `promtool check rules`, and `promtool
#   test rules` (tests/deploy_monitoring_rules_test.yml: each alert fires on its situation, not on
#   a healthy cluster); the PrometheusRule of deploy/k8s/monitoring holds the same groups;
# - the PodMonitors and the PrometheusRule against the Prometheus Operator's schema (a misspelt
#   field rejected), and against every overlay: each PodMonitor selects one role's pods, whose
#   container has its port at --metrics_port, with the Secret and key of --metrics_token_file;
# - deploy/README.md's Prometheus configuration, unchanged but for the pod discovery (a file
#   listing the targets Kubernetes' role: pod discovery finds for the pods the production overlay
#   renders: every container port, labels and annotations) and the token's path, run by Debian's
#   real Prometheus with the rules against a real coordinator and two workers that take the
#   metrics token as the pods do: exactly the three metrics ports are scraped, all up, with their
#   namespace and pod labels; every rule evaluates; every metric the rules read is one the daemons
#   export; killing a worker fires MeshrtWorkerLost and makes MeshrtWorkersMissing and
#   MeshrtScrapeFailing pending.
set -euo pipefail

# shellcheck source=SCRIPTDIR/daemon_test_lib.sh
source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup deploy_monitoring

# shellcheck source=SCRIPTDIR/manifest_test_lib.sh
source "$PWD/tests/manifest_test_lib.sh"
deploy=$(dirname "$(src_of deploy/.yamllint.yaml)")
mon_js=$(src_of tests/deploy_monitoring.js)
validate=$(src_of third_party/k8s_validate/validate.js)
rules=$(src_of deploy/prometheus/meshrt-rules.yml)
readme=$(src_of deploy/README.md)
unit=$(src_of tests/deploy_monitoring_rules_test.yml)
coordinator_bin=$runfiles/coordinator/meshrt-coordinator
worker_bin=$runfiles/worker/meshrt-worker

skip_without_kubectl
for tool in promtool prometheus yamllint node curl; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is not on PATH ($PATH); run tools/setup.sh (Debian's prometheus package has promtool)"
done

echo "== yamllint"
yamllint -c "$deploy/.yamllint.yaml" -f parsable --strict "$deploy/prometheus" "$deploy/k8s/monitoring"

echo "== promtool check rules, promtool test rules"
promtool check rules "$rules" || fail "promtool check rules $rules"
# promtool finds rule_files beside the test file.
mkdir -p "$work/unit"
cp "$rules" "$work/unit/meshrt-rules.yml"
cp "$unit" "$work/unit/rules_test.yml"
(cd "$work/unit" && promtool test rules rules_test.yml) ||
  fail "promtool test rules tests/deploy_monitoring_rules_test.yml (the alerts' behaviour, above)"

echo "== deploy/k8s/monitoring"
monitoring="$work/monitoring.yaml"
timeout 60 kubectl kustomize "$deploy/k8s/monitoring" >"$monitoring" || fail "kubectl kustomize k8s/monitoring"
node "$validate" "$monitoring" || fail "k8s/monitoring against the Prometheus Operator's schema (errors above)"
sed 's/^\( *\)interval: 30s$/\1intervall: 30s/' "$monitoring" >"$work/broken.yaml"
cmp -s "$monitoring" "$work/broken.yaml" && fail "self-check: misspelling the PodMonitors' interval changed nothing"
if node "$validate" "$work/broken.yaml" >"$work/broken.log"; then
  fail "the validator accepted a PodMonitor with a misspelt field (intervall): it does not check the CRDs"
fi
node "$mon_js" same-rules "$rules" "$monitoring" || fail "the PrometheusRule is not the rule file"
for dir in "$deploy"/k8s/overlays/*/; do
  overlay=$(basename "$dir")
  timeout 60 kubectl kustomize "$dir" >"$work/$overlay.yaml" || fail "kubectl kustomize overlays/$overlay"
  node "$mon_js" podmonitors "$monitoring" "$work/$overlay.yaml" >"$work/$overlay.podmonitors" ||
    fail "overlays/$overlay: the PodMonitors do not fit its pods (above)"
  [ "$(cut -d' ' -f2 "$work/$overlay.podmonitors" | sort | tr '\n' ' ')" = \
    "Deployment/meshrt-coordinator StatefulSet/meshrt-worker " ] ||
    fail "overlays/$overlay: the PodMonitors must scrape the coordinator and the workers: $(cat "$work/$overlay.podmonitors")"
done

echo "== a coordinator and two workers with the metrics token, as in the pods"
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/metrics.token"
"$coordinator_bin" --port=0 --port_file="$work/port" --metrics_port=-1 \
  --metrics_port_file="$work/coordinator.metrics_port" --metrics_token_file="$work/metrics.token" \
  >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
wait_for_port_file "$work/coordinator.metrics_port" "the coordinator's metrics server"
for r in 0 1; do
  "$worker_bin" --coordinator="127.0.0.1:$(cat "$work/port")" --rank=$r --metrics_port=-1 \
    --metrics_port_file="$work/worker$r.metrics_port" --metrics_token_file="$work/metrics.token" \
    >"$logs/worker$r.log" 2>&1 &
  pids+=($!)
  worker_pids[r]=$!
done
for r in 0 1; do wait_for_port_file "$work/worker$r.metrics_port" "worker $r's metrics server"; done
coordinator_metrics=127.0.0.1:$(cat "$work/coordinator.metrics_port")
# scrape ADDRESS OUT: /metrics with the metrics token, which both daemons must take.
scrape() {
  local code
  code=$(curl -sS --max-time 10 -o "$2" -w '%{http_code}' \
    -H "Authorization: Bearer $(cat "$work/metrics.token")" "http://$1/metrics") || fail "curl $1"
  [ "$code" = 200 ] || fail "$1/metrics with the metrics token answered $code"
}
for _ in $(seq 100); do
  scrape "$coordinator_metrics" "$work/coordinator.metrics"
  grep -q '^meshrt_coordinator_workers_registered 2$' "$work/coordinator.metrics" && break
  sleep 0.1
done
grep -q '^meshrt_coordinator_workers_registered 2$' "$work/coordinator.metrics" ||
  fail "the workers did not register: $(grep workers "$work/coordinator.metrics")"
for r in 0 1; do scrape "127.0.0.1:$(cat "$work/worker$r.metrics_port")" "$work/worker$r.metrics"; done
# Every metric the rules read is a family the daemons export (a renamed metric would leave its
# alert silent forever).
names=$(node "$mon_js" rule-metrics "$rules") || fail "reading the rules' metrics"
for name in $names; do
  grep -q "^# TYPE $name " "$work/coordinator.metrics" "$work/worker0.metrics" ||
    fail "the rules read $name, which neither daemon exports"
done
echo "the rules read $(wc -w <<<"$names") metrics, all exported: $(tr '\n' ' ' <<<"$names")"

echo "== deploy/README.md's scrape configuration on a real Prometheus"
# The pods Kubernetes would list in namespace meshrt (the production overlay, with a training Job
# whose pod has no port), their metrics ports played by the daemons above; the Deployment's pod
# name is the one deploy_monitoring.js gives it.
timeout 60 kubectl kustomize "$deploy/k8s/overlays/training-production" >"$work/pods.yaml" ||
  fail "kubectl kustomize overlays/training-production"
coordinator_pod="meshrt-coordinator-5d8f9c7b6-x2x4q"
cat >"$work/addresses.json" <<EOF
{"$coordinator_pod/metrics": "$coordinator_metrics",
 "meshrt-worker-0/metrics": "127.0.0.1:$(cat "$work/worker0.metrics_port")",
 "meshrt-worker-1/metrics": "127.0.0.1:$(cat "$work/worker1.metrics_port")"}
EOF
mkdir -p "$work/prometheus"
node "$mon_js" discovery "$work/pods.yaml" meshrt 2 "$work/addresses.json" "$work/prometheus/pods.json" ||
  fail "listing the rendered pods as Prometheus' discovery would"
node "$mon_js" scrape-config "$readme" meshrt "$work/metrics.token" "$work/prometheus/pods.json" \
  "$work/prometheus/prometheus.yml" || fail "deploy/README.md's Prometheus configuration (above)"
cp "$rules" "$work/prometheus/meshrt-rules.yml"
promtool check config "$work/prometheus/prometheus.yml" ||
  fail "promtool check config on deploy/README.md's configuration"
prometheus_port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
  console.log(s.address().port); s.close(); });')
prometheus_url=http://127.0.0.1:$prometheus_port
prometheus --config.file="$work/prometheus/prometheus.yml" --storage.tsdb.path="$work/prometheus/data" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$logs/prometheus.log" 2>&1 &
pids+=($!)
api() { curl -sS --max-time 10 "$prometheus_url/api/v1/$1"; }
for _ in $(seq 300); do
  curl -sS -o /dev/null --max-time 2 "$prometheus_url/-/ready" 2>/dev/null && break
  sleep 0.1
done
curl -sS -o /dev/null --max-time 2 "$prometheus_url/-/ready" || fail "Prometheus did not start"

# targets, rule_states, alerts: one line per item (deploy_monitoring.js summary says which).
targets() { api targets | node "$mon_js" summary targets; }
rule_states() { api rules | node "$mon_js" summary rules; }
alerts() { api alerts | node "$mon_js" summary alerts; }
want_targets="meshrt-coordinator $coordinator_pod up 
meshrt-worker meshrt-worker-0 up 
meshrt-worker meshrt-worker-1 up "
for _ in $(seq 150); do
  [ "$(targets)" = "$want_targets" ] && break
  sleep 0.2
done
[ "$(targets)" = "$want_targets" ] ||
  fail "Prometheus' targets are not the three metrics ports, up:"$'\n'"$(targets)"$'\n'"expected:"$'\n'"$want_targets"
echo "targets: the coordinator's and both workers' metrics ports, up (the other ports and the Job's pod dropped)"
series=$(api 'query?query=meshrt_coordinator_workers_registered' | node "$mon_js" summary query)
[ "$series" = "meshrt-coordinator meshrt $coordinator_pod 2" ] ||
  fail "meshrt_coordinator_workers_registered in Prometheus: '$series', expected one series of 2 with job, namespace and pod"

want_rules=$(grep -o '^ *- alert: [A-Za-z]*' "$rules" | sed 's/.*: //; s/$/ ok evaluated/' | sort)
for _ in $(seq 100); do
  [ "$(rule_states)" = "$want_rules" ] && break
  sleep 0.2
done
[ "$(rule_states)" = "$want_rules" ] || fail "the rules did not all evaluate:"$'\n'"$(rule_states)"
echo "rules: $(wc -l <<<"$want_rules") loaded and evaluated without error"

[ -z "$(alerts)" ] || fail "alerts on a healthy cluster:"$'\n'"$(alerts)"

echo "== a worker killed"
kill -KILL "${worker_pids[1]}"
want_alerts="MeshrtScrapeFailing pending meshrt-worker meshrt-worker-1
MeshrtWorkerLost firing meshrt-coordinator $coordinator_pod
MeshrtWorkersMissing pending meshrt-coordinator $coordinator_pod"
# The coordinator drops it after its 5 s heartbeat timeout.
for _ in $(seq 150); do
  [ "$(alerts)" = "$want_alerts" ] && break
  sleep 0.2
done
[ "$(alerts)" = "$want_alerts" ] ||
  fail "after killing worker 1, the alerts are:"$'\n'"$(alerts)"$'\n'"expected:"$'\n'"$want_alerts"
echo "$want_alerts"
echo "PASS: rules, PodMonitors and deploy/README's scrape configuration work against real daemons"
