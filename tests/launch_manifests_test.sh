#!/usr/bin/env bash
# Manifest-driven launch: renders a kustomize overlay, and starts the coordinator and every worker
# exactly as the rendered pod specs say (command, args, environment, with Kubernetes' $(VAR)
# expansion and the downward API filled in by tests/launch_pod.js), each as its own host: a
# network namespace with one IP on a shared bridge, its own PID namespace, and an /etc/hosts
# playing the cluster DNS (the Services' and the StatefulSet pods' names). Then a client host
# runs the MLP example over them with the meshrt CLI and the outputs must equal the reference
# interpreter's. This checks the manifests' flags, ports and addresses across hosts, and that the
# Secrets deploy/k8s/create-secrets.sh makes are the ones the pods mount, with the right keys.
#
#   launch_manifests_test.sh plain   the local-dev overlay (plaintext, the base's tokens)
#   launch_manifests_test.sh tls     the production overlay (mutual TLS and the tokens, with
#                                    certificates made here with openssl)
#   launch_manifests_test.sh training  the training overlay (local-dev and its training Job, the
#                                    Job's ConfigMap patched to a small Transformer): the Job's
#                                    `meshrt train` runs once uninterrupted, then again with a
#                                    worker pod killed mid-run (recreated as its StatefulSet
#                                    would) and the client pod killed (restarted as
#                                    restartPolicy OnFailure does); it must complete, resuming,
#                                    with the uninterrupted run's final loss. The checkpoints'
#                                    PersistentVolumeClaim is one directory every pod maps.
#
# The Secrets come from create-secrets.sh --dry-run and are written where each pod mounts them, as
# the kubelet would (launch_pod.js --secrets); /usr/local/bin maps to the built binaries. Needs root (CAP_NET_ADMIN) for the namespaces; without it the
# test prints a SKIP line with the reason and exits 0. Everything it creates (namespaces,
# /etc/netns/<name>, processes) is removed on exit.
set -euo pipefail

mode=${1:-plain}
case "$mode" in
  plain) overlay=local-dev ;;
  tls) overlay=production ;;
  training) overlay=training ;;
  *) echo "usage: $0 plain|tls|training" >&2; exit 2 ;;
esac

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: launch_manifests_test ($mode): $*"
  if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
    echo "$*" >"$TEST_UNDECLARED_OUTPUTS_DIR/SKIPPED"
  fi
  exit 0
}

if [ "$(id -u)" -ne 0 ]; then
  skip "creating network namespaces needs root (CAP_NET_ADMIN); running as uid $(id -u)"
fi

# shellcheck source=SCRIPTDIR/manifest_test_lib.sh
source "$PWD/tests/manifest_test_lib.sh"
runfiles=$PWD
deploy=$(dirname "$(src_of deploy/.yamllint.yaml)")
pod_js=$(src_of tests/launch_pod.js)
create_secrets=$(src_of deploy/k8s/create-secrets.sh)
meshrt=$runfiles/client/meshrt
compare=$runfiles/tests/launch_npy_compare
graph=$runfiles/examples/graphs/mlp_forward.pbtxt

skip_without_kubectl

for tool in kubectl node ip unshare openssl timeout; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is not on PATH; run tools/setup.sh"
done

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/launch.XXXXXX")
logs=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
tag="mrt$$${mode:0:2}"  # namespace names: unique per run, short (interface names <= 15)
switch="${tag}sw"
namespaces=()
pids=()
hosts=()
ns_of() { local n="${tag}$1"; echo "${n:0:30}"; }

cleanup() {
  local status=$?
  set +e
  # The training Job's restart loop first, so that it starts no container once the pods are gone.
  [ -n "${job_loop:-}" ] && kill -KILL "$job_loop" 2>/dev/null
  # SIGTERM to everything in a pod's namespace, as Kubernetes stops a pod: workers first (they
  # drain and deregister), then the coordinator. (unshare itself ignores SIGTERM; the daemon
  # under it does not.)
  local group host
  for group in workers coordinator; do
    local members=()
    for host in "${hosts[@]}"; do
      case "$group:$host" in
        workers:worker* | coordinator:coordinator) members+=("$(ns_of "$host")") ;;
      esac
    done
    for ns in "${members[@]}"; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
    done
    for _ in $(seq 50); do
      local alive=0
      for ns in "${members[@]}"; do [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && alive=1; done
      [ "$alive" -eq 0 ] && break
      sleep 0.1
    done
  done
  for ns in "${namespaces[@]}"; do
    # Whatever still runs inside our namespaces, and only that.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  for ns in "${namespaces[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  if [ "$status" -ne 0 ]; then
    for f in "$logs"/*.log; do
      [ -f "$f" ] || continue
      echo "---- $(basename "$f") (last 30 lines)"
      tail -n 30 "$f"
    done
  fi
  [ "$logs" = "$work" ] || rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "$switch" 2>"$work/netns.err"; then
  skip "cannot create a network namespace: $(cat "$work/netns.err")"
fi
namespaces+=("$switch")
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up

echo "== render overlays/$overlay"
rendered=$work/rendered.yaml
source_dir=$deploy/k8s/overlays/$overlay
# The training run: a small Transformer (a few seconds of steps), checkpointing often, so that
# the kills land mid-run. Patched onto the Job's ConfigMap as your own overlay would.
train_steps=160
if [ "$mode" = training ]; then
  source_dir=$work/overlay
  mkdir -p "$source_dir"
  cat >"$source_dir/kustomization.yaml" <<EOT
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$source_dir" "$deploy/k8s/overlays/$overlay")
patches:
  - path: small-run.yaml
EOT
  cat >"$source_dir/small-run.yaml" <<EOT
apiVersion: v1
kind: ConfigMap
metadata:
  name: meshrt-train
data:
  MESHRT_TRAIN_STEPS: "$train_steps"
  MESHRT_TRAIN_SAVE_EVERY: "20"
  MESHRT_TRAIN_KEEP: "2"
  MESHRT_TRAIN_CHECKPOINT_DIR: "runs/launch"
  MESHRT_TRAIN_BATCH: "8"
  MESHRT_TRAIN_LENGTH: "16"
  MESHRT_TRAIN_D_MODEL: "32"
  MESHRT_TRAIN_HEADS: "4"
  MESHRT_TRAIN_D_FF: "64"
  MESHRT_TRAIN_LAYERS: "1"
EOT
fi
timeout 60 kubectl kustomize "$source_dir" >"$rendered"
read -r k8s_ns replicas < <(node "$pod_js" "$rendered" StatefulSet meshrt-worker --info)
[ "$replicas" -ge 4 ] || fail "overlays/$overlay has $replicas workers; the 2x2 mesh needs 4"

# One host per pod, plus the client: name, IP.
hosts=(coordinator)
ips=(10.77.0.10)
for ((i = 0; i < replicas; i++)); do
  hosts+=("worker$i")
  ips+=("10.77.0.$((11 + i))")
done
hosts+=(client)
ips+=(10.77.0.200)
if [ "$mode" = training ]; then
  hosts+=(job)  # the Job's pod
  ips+=(10.77.0.201)
fi

# The cluster DNS: Service names (short and long) and the workers' pod names under the headless
# Service.
hosts_file=$work/hosts
{
  echo "127.0.0.1 localhost"
  echo "${ips[0]} meshrt-coordinator meshrt-coordinator.$k8s_ns meshrt-coordinator.$k8s_ns.svc meshrt-coordinator.$k8s_ns.svc.cluster.local"
  for ((i = 0; i < replicas; i++)); do
    name="meshrt-worker-$i.meshrt-worker.$k8s_ns.svc"
    echo "${ips[$((i + 1))]} $name $name.cluster.local"
  done
} >"$hosts_file"

echo "== ${#hosts[@]} hosts on bridge br0 in namespace $switch"
for i in "${!hosts[@]}"; do
  ns=$(ns_of "${hosts[$i]}")
  ip netns add "$ns"
  namespaces+=("$ns")
  mkdir -p "/etc/netns/$ns"
  cp "$hosts_file" "/etc/netns/$ns/hosts"
  # No name server: names resolve from the hosts file only, and nothing leaves the namespaces.
  echo "options timeout:1 attempts:1" >"/etc/netns/$ns/resolv.conf"
  ip -n "$switch" link add "p$i" type veth peer name eth0 netns "$ns"
  ip -n "$switch" link set "p$i" master br0 up
  ip -n "$ns" addr add "${ips[$i]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done

# What the image and the Secrets would provide.
bin=$work/bin
mkdir -p "$bin"
ln -s "$runfiles/coordinator/meshrt-coordinator" "$bin/meshrt-coordinator"
ln -s "$runfiles/worker/meshrt-worker" "$bin/meshrt-worker"
ln -s "$meshrt" "$bin/meshrt"
maps=(--map "/usr/local/bin=$bin")
tls_flags=()
secrets_flags=(--clients tester)
[ "$mode" = training ] && secrets_flags=(--clients "tester,trainer")
if [ "$mode" = tls ]; then
  sans=(DNS:meshrt-coordinator "DNS:meshrt-coordinator.$k8s_ns.svc" "DNS:*.meshrt-worker.$k8s_ns.svc")
  bash "$(src_of tests/launch_make_certs.sh)" "$work/tls" "${sans[@]}"
  tls_flags=(--tls_ca "$work/tls/ca.crt" --tls_cert "$work/tls/tls.crt" --tls_key "$work/tls/tls.key")
  secrets_flags+=(--tls "$work/tls")
fi
# The Secrets, as the README's command makes them, beside the rendered objects that mount them.
echo "== deploy/k8s/create-secrets.sh ${secrets_flags[*]} $k8s_ns"
bash "$create_secrets" --dry-run "${secrets_flags[@]}" "$k8s_ns" "$work/credentials" >>"$rendered"
# A client pod mounts its own Secret (meshrt-client-tester); the same file.
client_flags=("${tls_flags[@]}" --auth_token_file "$work/credentials/client-tester.token")

# pod_command HOST KIND NAME POD_NAME IP: sets pod_env and pod_argv to the container's
# environment and command line, as the kubelet would start it. Its Secret volumes are written
# under $work/volumes/HOST; a PersistentVolumeClaim is one directory, $work/pvc/CLAIM, whichever
# pod mounts it (as a ReadWriteMany volume is); other volumes are a directory per pod.
pod_command() {
  local host=$1 kind=$2 name=$3 pod=$4 ip=$5 mount volume source volume_maps=()
  while read -r mount volume source; do
    case "$source" in
      secret/*) continue ;;
      persistentVolumeClaim/*) volume_maps+=(--map "$mount=$work/pvc/${source#*/}") ;;
      *) volume_maps+=(--map "$mount=$work/volumes/$host/$volume") ;;
    esac
    mkdir -p "${volume_maps[-1]#*=}"
  done < <(node "$pod_js" "$rendered" "$kind" "$name" --mounts)
  node "$pod_js" "$rendered" "$kind" "$name" --pod_name "$pod" --pod_ip "$ip" "${maps[@]}" \
    "${volume_maps[@]}" --secrets "$work/volumes/$host" >"$work/$host.tokens"
  local tokens=() seen=0 t
  pod_env=()
  pod_argv=()
  mapfile -d '' tokens <"$work/$host.tokens"
  for t in "${tokens[@]}"; do
    if [ "$seen" -eq 0 ] && [ "$t" = "--" ]; then seen=1; continue; fi
    if [ "$seen" -eq 0 ]; then pod_env+=("$t"); else pod_argv+=("$t"); fi
  done
}

# start_pod HOST KIND NAME POD_NAME IP: the container's process, in the background.
start_pod() {
  local host=$1 pod=$4 ip=$5
  pod_command "$@"
  echo "$pod @ $ip: ${pod_argv[*]}"
  ip netns exec "$(ns_of "$host")" unshare --pid --fork --kill-child=SIGTERM \
    env -i "${pod_env[@]}" "${pod_argv[@]}" >>"$logs/$host.log" 2>&1 &
  pids+=($!)
}

echo "== start the pods"
start_pod coordinator Deployment meshrt-coordinator meshrt-coordinator-5d8f7c9b4-x2x7q "${ips[0]}"
for ((i = 0; i < replicas; i++)); do
  start_pod "worker$i" StatefulSet meshrt-worker "meshrt-worker-$i" "${ips[$((i + 1))]}"
done

client() { ip netns exec "$(ns_of client)" timeout 60 "$meshrt" "$@"; }
coordinator="meshrt-coordinator:7070"

echo "== wait for $replicas workers to register"
status=""
for _ in $(seq 150); do
  status=$(client status --coordinator "$coordinator" "${client_flags[@]}" 2>&1) || true
  [ "$(grep -c '^  worker ' <<<"$status")" -ge "$replicas" ] && break
  sleep 0.2
done
echo "$status"
[ "$(grep -c '^  worker ' <<<"$status")" -ge "$replicas" ] ||
  fail "only part of the $replicas workers registered in 30 s"
for ((i = 0; i < replicas; i++)); do
  grep -q "rank $i  meshrt-worker-$i.meshrt-worker.$k8s_ns.svc:7071  gloo ${ips[$((i + 1))]} " <<<"$status" ||
    fail "worker $i should register as rank $i at its DNS name, with Gloo on its pod IP ${ips[$((i + 1))]}"
done

echo "== the probes: gRPC health on the ports and services the manifests name"
# Liveness asks for the whole server, readiness for the daemon's service, on the health port
# (plaintext even under TLS, as the kubelet's probes need).
probe() {  # probe HOST_IP KIND NAME: both probes of that pod, as its spec declares them
  local ip=$1 kind=$2 name=$3 port service
  read -r port service < <(node "$pod_js" "$rendered" "$kind" "$name" --probe readinessProbe)
  client health "$ip:$port" --service "$service" >/dev/null ||
    fail "$name at $ip: readiness probe (port $port, service $service) fails"
  read -r port service < <(node "$pod_js" "$rendered" "$kind" "$name" --probe livenessProbe)
  client health "$ip:$port" ${service:+--service "$service"} >/dev/null ||
    fail "$name at $ip: liveness probe (port $port) fails"
}
probe "${ips[0]}" Deployment meshrt-coordinator
for ((i = 0; i < replicas; i++)); do probe "${ips[$((i + 1))]}" StatefulSet meshrt-worker; done
echo "ready and live: the coordinator and $replicas workers"

echo "== /metrics on the port the pods' scrape annotations name, with the metrics token"
metrics_token=$(cat "$work/credentials/metrics.token")
metrics() {  # metrics IP [CURL_FLAGS...]: that pod's /metrics, fetched from the client host
  local ip=$1
  shift
  ip netns exec "$(ns_of client)" curl -sS --max-time 10 "$@" "http://$ip:9090/metrics"
}
out=$(metrics "${ips[0]}" -H "Authorization: Bearer $metrics_token") ||
  fail "the coordinator's /metrics is unreachable"
grep -q "^meshrt_coordinator_workers_alive $replicas\$" <<<"$out" ||
  fail "the coordinator's metrics should count $replicas live workers: $(grep workers <<<"$out")"
for ((i = 0; i < replicas; i++)); do
  out=$(metrics "${ips[$((i + 1))]}" -H "Authorization: Bearer $metrics_token") ||
    fail "worker $i's /metrics is unreachable"
  grep -q "^# TYPE meshrt_worker_steps_total counter$" <<<"$out" ||
    fail "worker $i's /metrics lacks meshrt_worker_steps_total: $(head -5 <<<"$out")"
done
code=$(metrics "${ips[0]}" -o /dev/null -w '%{http_code}') || true
[ "$code" = 401 ] || fail "the coordinator's /metrics without a token answered $code, not 401"
echo "metrics: served by the coordinator and $replicas workers, 401 without the token"

if [ "$mode" = training ]; then
  # shellcheck source-path=SCRIPTDIR source=launch_training.sh
  source "$(src_of tests/launch_training.sh)"
  echo "PASS: launch_manifests_test ($mode): overlays/$overlay on $((replicas + 1)) hosts, the" \
    "training Job completed through a killed worker pod and a killed client pod"
  exit 0
fi

# refused WHAT EXPECTED FLAGS...: `meshrt status` from the client host must fail naming EXPECTED.
refused() {
  local what=$1 expected=$2 out
  shift 2
  if out=$(client status --coordinator "$coordinator" "$@" 2>&1); then
    fail "$what: the coordinator served it: $out"
  fi
  grep -qF -- "$expected" <<<"$out" || fail "$what: the refusal should say '$expected': $out"
  echo "refused ($what): $out"
}
echo "== clients without a client token are refused"
refused "no token" "refused this client: missing bearer token" "${tls_flags[@]}"
# The Secret every pod of the cluster mounts is not a client credential.
refused "the cluster token as a client's" "cluster's member credential (--cluster_token_file)" \
  "${tls_flags[@]}" --auth_token_file "$work/credentials/cluster.token"

echo "== the MLP example across the hosts vs the reference"
client run "$graph" --coordinator "$coordinator" "${client_flags[@]}" --mesh rows:2,cols:2 \
  --layout batch:rows,hidden:cols --random_feeds 1 --fetch_all "$work/cluster" ||
  fail "meshrt run across the hosts failed"
"$meshrt" run "$graph" --reference --random_feeds 1 --fetch_all "$work/reference" >/dev/null
"$compare" "$work/cluster" "$work/reference" || fail "the cluster's outputs differ from the reference"

echo "PASS: launch_manifests_test ($mode): overlays/$overlay on $((replicas + 1)) hosts"
