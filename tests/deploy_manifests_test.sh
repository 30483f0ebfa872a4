#!/usr/bin/env bash
# The Kubernetes manifests, checked offline: yamllint on every file, `kubectl kustomize` renders
# every overlay, every rendered object passes the Kubernetes schema (third_party/k8s_validate,
# which also rejects unknown fields), and a few facts the daemons rely on hold: both daemons listen
# on the pod's interfaces, the production overlay runs mutual TLS, each credential reaches only the
# daemons of its role, and every file a daemon's flag names exists in its container once the
# Secrets deploy/k8s/create-secrets.sh makes are mounted. Overlays with a training Job
# (components/training) also: the Job runs `meshrt train --resume --recover auto` against the
# coordinator Service with a client's token alone, restarts on failure, and the coordinator and the
# workers share its checkpoints' volume at their --checkpoint_root; the Job is deleted a while after
# it finishes (ttlSecondsAfterFinished), and deploy/README.md's teardown one-liner selects the Job
# and the workers by a label both carry. Production's workers spread over the nodes (a topology
# spread constraint over kubernetes.io/hostname selecting them). The image (deploy/Dockerfile)
# carries the examples and the training text the workers' --data_dir names. The validator is also
# shown a broken copy each run and must reject it, so this test cannot pass vacuously.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# shellcheck source=SCRIPTDIR/manifest_test_lib.sh
source "$PWD/tests/manifest_test_lib.sh"
deploy=$(dirname "$(src_of deploy/.yamllint.yaml)")
validate=$(src_of third_party/k8s_validate/validate.js)
pod_js=$(src_of tests/launch_pod.js)

skip_without_kubectl

for tool in kubectl yamllint node; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is not on PATH ($PATH); run tools/setup.sh (kubectl is not in Debian's archive: install it from the Kubernetes project's packages)"
done
[ -d "$(dirname "$validate")/node_modules/kubernetes-models" ] ||
  fail "$(dirname "$validate")/node_modules is missing: run tools/setup.sh (npm ci)"

echo "== yamllint ($deploy)"
yamllint -c "$deploy/.yamllint.yaml" -f parsable --strict "$deploy/k8s"

out=${TEST_TMPDIR:-$(mktemp -d)}
overlays=()
for dir in "$deploy"/k8s/overlays/*/; do overlays+=("$(basename "$dir")"); done
[ "${#overlays[@]}" -ge 4 ] ||
  fail "expected the local-dev, production, training and training-production overlays, found: ${overlays[*]}"

for overlay in "${overlays[@]}"; do
  rendered="$out/$overlay.yaml"
  echo "== kubectl kustomize overlays/$overlay"
  timeout 60 kubectl kustomize "$deploy/k8s/overlays/$overlay" >"$rendered" ||
    fail "kubectl kustomize overlays/$overlay"
  echo "== schema ($overlay)"
  node "$validate" "$rendered" || fail "schema validation of overlays/$overlay (errors above)"
  for kind in Namespace ConfigMap Deployment StatefulSet Service PodDisruptionBudget NetworkPolicy; do
    grep -q "^kind: $kind\$" "$rendered" || fail "overlays/$overlay renders no $kind"
  done
done
# has_job OVERLAY: whether it renders the training Job.
has_job() { grep -q '^kind: Job$' "$out/$1.yaml"; }
for overlay in training training-production; do
  has_job "$overlay" || fail "overlays/$overlay renders no Job"
done

echo "== facts the daemons rely on"
prod="$out/production.yaml"
dev="$out/local-dev.yaml"
# Production: mutual TLS on both daemons; local-dev: plaintext.
for flag in --tls_cert= --tls_key= --tls_ca= --tls_require_client_cert; do
  [ "$(grep -c -- "- $flag" "$prod")" -eq 2 ] || fail "production must pass $flag to both daemons"
  if grep -q -- "$flag" "$dev"; then fail "local-dev must stay plaintext ($flag found)"; fi
done
# is_tls OVERLAY: whether its daemons run mutual TLS.
is_tls() { [ "$(count "$out/$1.yaml" --tls_require_client_cert)" -eq 2 ]; }
# count FILE FLAG: how many of the daemons' containers (the coordinator's, the workers') get FLAG.
count() {
  { node "$pod_js" "$1" Deployment meshrt-coordinator --args
    node "$pod_js" "$1" StatefulSet meshrt-worker --args; } | grep -c -- "^$2" || true
}
for overlay in "${overlays[@]}"; do
  r="$out/$overlay.yaml"
  # The daemons default to loopback: in a pod both must listen on every interface (gRPC and health).
  [ "$(count "$r" --host=0.0.0.0)" -eq 2 ] || fail "$overlay: both daemons need --host=0.0.0.0"
  # Each credential goes only to the daemons of its role; nobody runs open.
  [ "$(count "$r" --cluster_token_file=)" -eq 2 ] ||
    fail "$overlay: the coordinator and the workers both need --cluster_token_file"
  for flag in --auth_token_file= --operator_token_file=; do
    [ "$(count "$r" "$flag")" -eq 1 ] || fail "$overlay: $flag belongs to the coordinator alone"
  done
  if grep -q -- '--insecure' "$r"; then fail "$overlay: no daemon may run with --insecure"; fi
  # Prometheus metrics: both daemons serve them behind the metrics token, announced for scraping.
  for flag in --metrics_port=9090 --metrics_token_file=/etc/meshrt/metrics/metrics.token; do
    [ "$(count "$r" "$flag")" -eq 2 ] || fail "$overlay: both daemons need $flag"
  done
  for annotation in 'prometheus.io/scrape: "true"' 'prometheus.io/port: "9090"' \
    'prometheus.io/path: /metrics'; do
    [ "$(grep -cF -- "$annotation" "$r")" -eq 2 ] ||
      fail "$overlay: both daemons' pods need the annotation $annotation"
  done
  node "$pod_js" "$r" StatefulSet meshrt-worker --mounts >"$out/$overlay-worker.mounts"
  node "$pod_js" "$r" Deployment meshrt-coordinator --mounts >"$out/$overlay-coordinator.mounts"
  if grep -E 'secret/meshrt-(client|operator)' "$out/$overlay-worker.mounts"; then
    fail "$overlay: workers must not mount the client or operator tokens (above)"
  fi
  for secret in meshrt-client-tokens meshrt-operator-token meshrt-cluster-token meshrt-metrics-token; do
    grep -q " secret/$secret\$" "$out/$overlay-coordinator.mounts" ||
      fail "$overlay: the coordinator does not mount Secret $secret"
  done
done
grep -q ' secret/meshrt-tls$' "$out/production-worker.mounts" || fail "production: workers mount no meshrt-tls"

echo "== disruptions and training data"
# get OVERLAY KIND NAME PATH: a field of a rendered object, as JSON.
get() { node "$pod_js" "$out/$1.yaml" "$2" "$3" --get "$4"; }
for overlay in "${overlays[@]}"; do
  # A coordinator restart is survivable (workers re-register, training clients resume): its
  # budget must let a drain evict it, as the workers' does.
  for pdb in meshrt-coordinator meshrt-worker; do
    [ "$(get "$overlay" PodDisruptionBudget "$pdb" spec.maxUnavailable)" = 1 ] ||
      fail "$overlay: PodDisruptionBudget $pdb must allow one pod unavailable (maxUnavailable: 1)"
  done
  # The training text the image carries, the default of `meshrt train --data`, is readable by
  # the workers' text_windows.
  [ "$(count "$out/$overlay.yaml" --data_dir=/usr/share/games/fortunes)" -eq 1 ] ||
    fail "$overlay: the workers need --data_dir=/usr/share/games/fortunes (the image's training text)"
done
dockerfile=$(src_of deploy/Dockerfile)
# The runtime stage: what follows the last FROM.
runtime=$(sed -n "$(grep -n '^FROM ' "$dockerfile" | tail -1 | cut -d: -f1),\$p" "$dockerfile")
grep -qE '^ +fortunes \\$' <<<"$runtime" ||
  fail "deploy/Dockerfile: the runtime stage must install Debian's fortunes (the workers' training text)"
grep -qE '^COPY --from=build /src/examples/ /usr/share/meshrt/examples/$' <<<"$runtime" ||
  fail "deploy/Dockerfile: the runtime stage must carry examples/ in /usr/share/meshrt/examples"

echo "== the training Job"
for overlay in "${overlays[@]}"; do
  has_job "$overlay" || continue
  job_args=$(node "$pod_js" "$out/$overlay.yaml" Job meshrt-train --args)
  [ "$(sed -n 1,2p <<<"$job_args" | tr '\n' ' ')" = "/usr/local/bin/meshrt train " ] ||
    fail "$overlay: the Job must run /usr/local/bin/meshrt train, not: $(head -2 <<<"$job_args")"
  for flag in --coordinator= --auth_token_file=/etc/meshrt/client/ --checkpoint_dir= --save_every= \
    --keep= --resume --recover=auto --replace_wait=; do
    grep -q -- "^$flag" <<<"$job_args" || fail "$overlay: the Job's meshrt train lacks $flag"
  done
  # Restarted in place when the client dies; each start resumes from the checkpoints.
  [ "$(get "$overlay" Job meshrt-train spec.template.spec.restartPolicy)" = '"OnFailure"' ] ||
    fail "$overlay: the Job needs restartPolicy OnFailure (a killed client restarts and resumes)"
  backoff=$(get "$overlay" Job meshrt-train spec.backoffLimit)
  { [[ "$backoff" =~ ^[0-9]+$ ]] && [ "$backoff" -ge 3 ]; } ||
    fail "$overlay: the Job's backoffLimit ($backoff) must allow the client a few restarts"
  get "$overlay" Job meshrt-train spec.template.metadata.labels | grep -qF '"meshrt.dev/client":"true"' ||
    fail "$overlay: the Job's pod needs the label meshrt.dev/client: \"true\" (NetworkPolicy)"
  # A client holds its own token only.
  node "$pod_js" "$out/$overlay.yaml" Job meshrt-train --mounts >"$out/$overlay-job.mounts"
  { [ "$(grep -c ' secret/' "$out/$overlay-job.mounts")" -eq 1 ] &&
    grep -q '^/etc/meshrt/client client-token secret/meshrt-client-trainer$' "$out/$overlay-job.mounts"; } ||
    fail "$overlay: the Job must mount its client Secret meshrt-client-trainer alone: $(cat "$out/$overlay-job.mounts")"
  # The coordinator and every worker: the same claim, at the path both take as --checkpoint_root.
  claim=$(grep ' persistentVolumeClaim/' "$out/$overlay-coordinator.mounts") ||
    fail "$overlay: the coordinator mounts no PersistentVolumeClaim for the checkpoints"
  grep -qxF -- "$claim" "$out/$overlay-worker.mounts" ||
    fail "$overlay: the workers must mount the coordinator's checkpoints volume ($claim) at the same path"
  read -r root _ source <<<"$claim"
  [ "$(count "$out/$overlay.yaml" "--checkpoint_root=$root\$")" -eq 2 ] ||
    fail "$overlay: the coordinator and the workers need --checkpoint_root=$root (the shared volume)"
  [ "$(get "$overlay" PersistentVolumeClaim "${source#*/}" spec.accessModes)" = '["ReadWriteMany"]' ] ||
    fail "$overlay: PersistentVolumeClaim ${source#*/} must be ReadWriteMany (every pod mounts it)"
done

echo "== tearing down a run, and workers spread over nodes"
# deploy/README.md's one-liner that removes a training run's Job and workers together (the
# coordinator and the checkpoints' claim stay): its label selector must select both.
readme=$(src_of deploy/README.md)
teardown=$(grep -E '^kubectl -n [a-z0-9-]+ delete job,statefulset -l [^ ]+$' "$readme") ||
  fail "deploy/README.md: no one-liner 'kubectl -n NS delete job,statefulset -l KEY=VALUE' to tear down a run"
read -r _ _ teardown_ns _ _ _ selector <<<"$teardown"
for overlay in "${overlays[@]}"; do
  has_job "$overlay" || continue
  for workload in "Job meshrt-train" "StatefulSet meshrt-worker"; do
    read -r kind name <<<"$workload"
    get "$overlay" "$kind" "$name" metadata.labels | grep -qF "\"${selector%%=*}\":\"${selector#*=}\"" ||
      fail "$overlay: $kind $name lacks the label $selector that deploy/README's teardown ($teardown) selects by"
  done
  # A finished Job goes away by itself after a while.
  ttl=$(get "$overlay" Job meshrt-train spec.ttlSecondsAfterFinished)
  { [[ "$ttl" =~ ^[0-9]+$ ]] && [ "$ttl" -ge 3600 ]; } ||
    fail "$overlay: the Job needs ttlSecondsAfterFinished (an hour or more, to read its logs), not $ttl"
done
[ "$(node "$pod_js" "$out/training.yaml" Deployment meshrt-coordinator --info | cut -d' ' -f1)" = "$teardown_ns" ] ||
  fail "deploy/README's teardown ($teardown) names another namespace than overlays/training's"
# Production's workers: at most one more worker on a node than on any other, counting workers only.
for overlay in production training-production; do
  node -e '
    const [spread, labels, others] = process.argv.slice(1).map((s) => JSON.parse(s === "undefined" ? "null" : s));
    const selects = (sel, l) => Object.entries(sel.matchLabels || {}).every(([k, v]) => l[k] === v) &&
      !(sel.matchExpressions || []).length;
    const ok = (spread || []).some((c) => c.topologyKey === "kubernetes.io/hostname" && c.maxSkew === 1 &&
      c.whenUnsatisfiable === "DoNotSchedule" && c.labelSelector && selects(c.labelSelector, labels) &&
      !selects(c.labelSelector, others));
    process.exit(ok ? 0 : 1);' \
    "$(get "$overlay" StatefulSet meshrt-worker spec.template.spec.topologySpreadConstraints)" \
    "$(get "$overlay" StatefulSet meshrt-worker spec.template.metadata.labels)" \
    "$(get "$overlay" Deployment meshrt-coordinator spec.template.metadata.labels)" ||
    fail "$overlay: the workers need a topologySpreadConstraint over kubernetes.io/hostname (maxSkew 1, DoNotSchedule) selecting the worker pods and not the coordinator"
done

echo "== the Secrets of deploy/k8s/create-secrets.sh, mounted as the kubelet would"
create_secrets=$(src_of deploy/k8s/create-secrets.sh)
# Placeholder TLS files: only their names matter to the Secret.
mkdir -p "$out/tls"
for f in tls.crt tls.key ca.crt; do echo "placeholder $f" >"$out/tls/$f"; done
mkdir -p "$out/bin"
for overlay in "${overlays[@]}"; do
  r="$out/$overlay.yaml"
  ns=$(node "$pod_js" "$r" Deployment meshrt-coordinator --info | cut -d' ' -f1)
  tls=()
  # The overlays with mutual TLS (production's daemons; the training Job's client certificate).
  is_tls "$overlay" && tls=(--tls "$out/tls" --client_tls "trainer=$out/tls")
  bash "$create_secrets" --dry-run "${tls[@]}" --clients alice,trainer "$ns" "$out/$overlay-credentials" \
    >"$out/$overlay-secrets.yaml" || fail "create-secrets.sh --dry-run for $overlay"
  node "$validate" "$out/$overlay-secrets.yaml" || fail "$overlay: create-secrets.sh's Secrets (errors above)"
  cat "$r" "$out/$overlay-secrets.yaml" >"$out/$overlay-with-secrets.yaml"
  workloads=("Deployment meshrt-coordinator" "StatefulSet meshrt-worker")
  has_job "$overlay" && workloads+=("Job meshrt-train")
  for workload in "${workloads[@]}"; do
    read -r kind name <<<"$workload"
    # Volumes other than Secrets (the checkpoints' claim): an empty directory each.
    volume_maps=()
    while read -r mount volume source; do
      case "$source" in secret/*) continue ;; esac
      mkdir -p "$out/volumes/$overlay/$name/$volume"
      volume_maps+=(--map "$mount=$out/volumes/$overlay/$name/$volume")
    done < <(node "$pod_js" "$out/$overlay-with-secrets.yaml" "$kind" "$name" --mounts)
    node "$pod_js" "$out/$overlay-with-secrets.yaml" "$kind" "$name" --pod_name "$name-0" \
      --pod_ip 10.0.0.1 --map "/usr/local/bin=$out/bin" "${volume_maps[@]}" \
      --secrets "$out/volumes/$overlay/$name" \
      >"$out/argv" || fail "$overlay: $kind/$name cannot be started with create-secrets.sh's Secrets"
    files=0
    while IFS= read -r -d '' arg; do
      case "$arg" in
        --checkpoint_root=/* | --data_dir=/*)
          [ -d "${arg#*=}" ] ||
            fail "$overlay: $name's $arg names no directory (its volume, or the image's fortunes: tools/setup.sh installs them here)" ;;
        --*=/*)
          [ -s "${arg#*=}" ] || fail "$overlay: $name's $arg names no file of its mounted Secrets"
          files=$((files + 1)) ;;
      esac
    done <"$out/argv"
    # Four tokens (coordinator: client, operator, cluster, metrics), two (worker: cluster,
    # metrics) or one (training client), and with TLS three TLS files each.
    case "$name" in
      meshrt-coordinator) want=4 ;;
      meshrt-worker) want=2 ;;
      *) want=1 ;;
    esac
    is_tls "$overlay" && want=$((want + 3))
    [ "$files" -eq "$want" ] || fail "$overlay: $name has $files file flags, expected $want"
  done
  grep -q '^alice ' "$out/volumes/$overlay/meshrt-coordinator/client-tokens/client.tokens" ||
    fail "$overlay: the coordinator's client token list lacks the client alice"
done
# shellcheck disable=SC2016  # a literal Kubernetes $(VAR) reference
grep -qF -- '- --gloo_address=$(POD_IP)' "$dev" || fail "workers must bind Gloo to the pod IP"
grep -q 'fieldPath: status.podIP' "$dev" || fail "POD_IP must come from the downward API"
grep -q 'clusterIP: None' "$dev" || fail "the workers' Service must be headless"
grep -q 'grpc:' "$dev" || fail "the probes must be gRPC health probes"

echo "== the validator rejects broken objects"
expect_rejected() {
  local what=$1 sed_expr=$2
  local broken="$out/broken.yaml"
  sed "$sed_expr" "$dev" >"$broken"
  cmp -s "$dev" "$broken" && fail "self-check '$what': the edit changed nothing"
  if node "$validate" "$broken" >"$out/broken.log"; then
    fail "the validator accepted $what"
  fi
  echo "rejected ($what): $(head -1 "$out/broken.log" | sed 's|^[^ ]*/||')"
}
expect_rejected "a misspelt field" 's/readinessProbe:/readinesProbe:/'
expect_rejected "a string port" 's/containerPort: 7071/containerPort: seven/'
expect_rejected "a bad quantity" 's/memory: 2Gi/memory: two gigs/'
expect_rejected "an unknown kind" 's/^kind: StatefulSet$/kind: StatefulSett/'

echo "== shellcheck and node --check on the deploy test scripts"
command -v shellcheck >/dev/null 2>&1 || fail "shellcheck is not on PATH; run tools/setup.sh"
for script in tests/deploy_manifests_test.sh tests/deploy_auth_test.sh tests/deploy_listen_test.sh \
  tests/deploy_images_test.sh tests/deploy_monitoring_test.sh tests/launch_manifests_test.sh \
  tests/launch_make_certs.sh tests/manifest_test_lib.sh deploy/k8s/create-secrets.sh; do
  shellcheck -x "$(src_of "$script")" || fail "shellcheck $script"
done
for script in tests/launch_pod.js tests/deploy_images.js third_party/k8s_validate/validate.js; do
  node --check "$(src_of "$script")" || fail "node --check $script"
done
echo "PASS: ${#overlays[@]} overlays render and validate"
