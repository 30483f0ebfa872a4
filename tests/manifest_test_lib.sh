# shellcheck shell=bash
# Shared by the tests that render deploy/k8s (source it): `src_of PATH` and `skip_without_kubectl`.
#
# Runfiles are symlinks; kustomize refuses files outside the directory it renders once links are
# resolved, and Node.js finds node_modules/ beside the script's real path: these tests work on the
# real tree.
src_of() { readlink -f "$1"; }

# kubectl is not in Debian's archive: machines of this project have it preinstalled (PLATFORM.md),
# but a machine without it cannot render the manifests. Say so loudly and skip (exit 0, a SKIPPED
# file among the test's outputs) rather than fail.
skip_without_kubectl() {
  command -v kubectl >/dev/null 2>&1 && return 0
  echo "SKIP: kubectl is not on PATH ($PATH), so the manifests cannot be rendered on this machine;"
  echo "SKIP: install kubectl v1.32+ (Kubernetes project packages) to run this test."
  if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
    echo "kubectl missing" >"$TEST_UNDECLARED_OUTPUTS_DIR/SKIPPED"
  fi
  exit 0
}
