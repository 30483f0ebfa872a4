#!/bin/bash
# The layering check (core/README.md, "Packages and the layering rule"): no library depends on a
# package of a higher layer, and core's libraries have no gRPC, Gloo or BLAS. Tests and testonly
# helpers may use higher layers (the simulated mesh, the CPU kernels) and are left out.
# Run from the repository root; `make test` runs it after the tests. Prints one line per package and
# exits 1 naming every offending target; a query that fails (a bad pattern, a broken BUILD file)
# fails the check too.
set -u
# Bottom to top, one level per entry; packages of one level may not use each other. A library may
# depend on its own package, on lower levels and on BOTTOM; what is not listed (bench, tests, fuzz,
# python, examples, deploy) is above every level. "//core" is core's aggregate //core:core (and
# core/README.md's packages again) and "//models" the model builders, both on the language alone.
BOTTOM="//proto/...:* + //third_party/...:*"
LEVELS=("//util" "//text" "//core/ir" "//core/ops" "//core/reference" "//core/lowering"
        "//core/train //core/planning" "//core" "//models" "//kernels" "//runtime" "//rpc"
        "//monitoring" "//worker //coordinator" "//client")

query() {  # query EXPR [all]: the targets, one per line (external ones only with "all"); exits
           # the script on a query error
  local out
  if ! out=$(bazel query --noshow_progress "$1" 2>&1); then
    echo "check_layers: bazel query failed: $1"
    echo "$out"
    exit 1
  fi
  if [[ ${2:-} == all ]]; then
    grep -v '^INFO\|^Loading\|^WARNING' <<<"$out" || true
  else
    grep -v '^INFO\|^Loading\|^WARNING\|^@' <<<"$out" || true
  fi
}

fail=0
report() {  # report OFFENDERS BAD GOOD: lists the offenders under BAD (and fails), or says GOOD
  if [[ -n $1 ]]; then
    echo "check_layers: $2"
    sed 's/^/  /' <<<"$1"
    fail=1
  else
    echo "check_layers: $3"
  fi
}

below="$BOTTOM"
for level in "${LEVELS[@]}"; do
  for l in $level; do
    libraries="kind('cc_library', $l/...) except attr(testonly, 1, $l/...)"
    report "$(query "deps($libraries) except ($below + $l/...:*)")" \
      "$l's libraries depend on higher layers:" "$l depends on no higher layer"
  done
  for l in $level; do below="$below + $l/...:*"; done
done
core="kind('cc_library', //core/... + //util/...) except attr(testonly, 1, //core/... + //util/...)"
report "$(query "deps($core)" all | grep -i -E 'grpc|gloo|blas' || true)" \
  "core's libraries reach gRPC, Gloo or BLAS:" "core's libraries use no gRPC, Gloo or BLAS"
exit $fail
