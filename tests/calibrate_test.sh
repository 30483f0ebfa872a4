#!/usr/bin/env bash
# `meshrt calibrate` on a real local cluster of two workers: it writes a profile with every figure
# (each a positive number), in seconds; bad flags are usage errors (exit 2) naming the fix.
set -euo pipefail

source "$PWD/tests/daemon_test_lib.sh"
daemon_test_setup calibrate

out=$("$meshrt" calibrate 2>&1) && fail "calibrate without a cluster should be refused"
grep -q "needs exactly one of --local N and --coordinator" <<<"$out" || fail "said: $out"
set +e
"$meshrt" calibrate --local 2 --coordinator 127.0.0.1:1 >/dev/null 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "--local with --coordinator should exit 2, not $code"

start=$(date +%s)
(cd "$work" && timeout 120 "$meshrt" calibrate --local 2 --steps 3 --out "$work/cluster.profile") ||
  fail "calibrate --local 2 failed"
[ $(( $(date +%s) - start )) -le 60 ] || fail "calibrate took more than a minute"
profile=$work/cluster.profile
grep -q "^# meshrt calibration profile: local cluster" "$profile" || fail "no header: $(cat "$profile")"
for key in workers step_overhead_s gemm_flops_per_s small_gemm_flops_per_s memory_bytes_per_s \
  allreduce_alpha_s allreduce_beta_bytes_per_s allgather_alpha_s allgather_beta_bytes_per_s \
  alltoall_alpha_s alltoall_beta_bytes_per_s; do
  value=$(awk -v k="$key" '$1 == k { print $2 }' "$profile")
  [ -n "$value" ] || fail "profile lacks $key: $(cat "$profile")"
  case $key in
    *_alpha_s) awk -v v="$value" 'BEGIN { exit !(v >= 0) }' || fail "$key is $value" ;;
    *) awk -v v="$value" 'BEGIN { exit !(v > 0) }' || fail "$key is $value, not positive" ;;
  esac
done
[ "$(awk '$1 == "workers" { print $2 }' "$profile")" = 2 ] || fail "workers is not 2"
echo "PASS: $(grep -c . "$profile") lines"
