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
grep -q "^# meshrt calibration: local cluster" "$profile" || fail "no header: $(cat "$profile")"
grep -q "^# workers 2, collectives in groups of 2, step overhead " "$profile" ||
  fail "no workers line: $(cat "$profile")"
for key in gemm_large_flops_per_s gemm_small_flops_per_s elementwise_flops_per_s memory_bytes_per_s \
  step_overhead_s collectives_measured allreduce.alpha_s allreduce.beta_bytes_per_s allgather.alpha_s \
  allgather.beta_bytes_per_s alltoall.alpha_s alltoall.beta_bytes_per_s; do
  value=$(awk -v k="$key" '$1 == k { print $2 }' "$profile")
  [ -n "$value" ] || fail "profile lacks $key: $(cat "$profile")"
  case $key in
    *.alpha_s) awk -v v="$value" 'BEGIN { exit !(v >= 0) }' || fail "$key is $value" ;;
    *) awk -v v="$value" 'BEGIN { exit !(v > 0) }' || fail "$key is $value, not positive" ;;
  esac
done
[ "$(awk '$1 == "collectives_measured" { print $2 }' "$profile")" = 1 ] || fail "not measured"
# explain reads it: the predicted time uses the measured links, and says so.
out=$("$meshrt" explain "$runfiles/examples/graphs/mlp_forward.pbtxt" --mesh p:2 --layout d_in:p \
  --profile "$profile") || fail "explain --profile failed: $out"
grep -q "predicted step time" <<<"$out" || fail "no prediction: $out"
grep -q "placeholders" <<<"$out" && fail "a calibrated profile is still called placeholders: $out"
echo "PASS: $(grep -c . "$profile") lines"
