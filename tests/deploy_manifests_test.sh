#!/usr/bin/env bash
# The Kubernetes manifests, checked offline: yamllint on every file, `kubectl kustomize` renders
# every overlay, every rendered object passes the Kubernetes schema (third_party/k8s_validate,
# which also rejects unknown fields), and a few facts the daemons rely on hold. The validator is
# also shown a broken copy each run and must reject it, so this test cannot pass vacuously.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runfiles are symlinks; kustomize refuses files outside the directory it renders once links are
# resolved, and Node.js finds node_modules/ beside the script's real path. Work on the real tree.
src_of() { readlink -f "$1"; }
deploy=$(dirname "$(src_of deploy/.yamllint.yaml)")
validate=$(src_of third_party/k8s_validate/validate.js)

# kubectl is not in Debian's archive: machines of this project have it preinstalled (PLATFORM.md),
# but a machine without it cannot render the manifests. Say so loudly and skip rather than fail.
if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIP: kubectl is not on PATH ($PATH), so the manifests cannot be rendered on this machine;"
  echo "SKIP: install kubectl v1.32+ (Kubernetes project packages) to run this test."
  if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
    echo "kubectl missing" >"$TEST_UNDECLARED_OUTPUTS_DIR/SKIPPED"
  fi
  exit 0
fi

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
[ "${#overlays[@]}" -ge 2 ] || fail "expected the local-dev and production overlays, found: ${overlays[*]}"

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

echo "== facts the daemons rely on"
prod="$out/production.yaml"
dev="$out/local-dev.yaml"
# Production: TLS with client certificates and the token on both daemons; local-dev: none.
for flag in --tls_cert= --tls_key= --tls_ca= --tls_require_client_cert --auth_token_file=; do
  [ "$(grep -c -- "- $flag" "$prod")" -eq 2 ] || fail "production must pass $flag to both daemons"
  if grep -q -- "$flag" "$dev"; then fail "local-dev must stay plaintext ($flag found)"; fi
done
grep -q 'secretName: meshrt-tls' "$prod" || fail "production mounts no meshrt-tls Secret"
grep -q 'secretName: meshrt-auth' "$prod" || fail "production mounts no meshrt-auth Secret"
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
for script in tests/deploy_manifests_test.sh tests/deploy_auth_test.sh tests/launch_manifests_test.sh \
  tests/launch_make_certs.sh; do
  shellcheck "$(src_of "$script")" || fail "shellcheck $script"
done
for script in tests/launch_pod.js third_party/k8s_validate/validate.js; do
  node --check "$(src_of "$script")" || fail "node --check $script"
done
echo "PASS: ${#overlays[@]} overlays render and validate"
