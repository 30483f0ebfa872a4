#!/usr/bin/env bash
# `meshrt calibrate` on a real local cluster of two workers: it writes a profile with every figure
# (each a positive number), in seconds; bad flags are usage errors (exit 2) naming the fix. Then four
# workers registered on two hosts: links measured within a host and across hosts (cross_host.*).
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

# Workers on two hosts (by their registered addresses: 127.0.0.1 and 127.0.0.2, both loopback):
# the collectives are measured in groups within a host and in groups spanning the hosts, the
# latter written as the profile's cross_host.* links; explain then costs a group that spans
# hosts with them.
"$runfiles/coordinator/meshrt-coordinator" --port=0 --port_file="$work/port" \
  >"$logs/coordinator.log" 2>&1 &
pids+=($!)
wait_for_port_file "$work/port" "the coordinator"
address=127.0.0.1:$(cat "$work/port")
for i in 0 1 2 3; do
  host=127.0.0.1
  [ "$i" -ge 2 ] && host=127.0.0.2
  "$runfiles/worker/meshrt-worker" --coordinator="$address" --rank=$i --host=$host \
    --advertise_address=$host >"$logs/worker$i.log" 2>&1 &
  pids+=($!)
done
out=$("$meshrt" calibrate --coordinator "$address" --workers 4 --collective_group 3 2>&1) &&
  fail "--collective_group 3 of 4 workers should be refused"
grep -q -- "--collective_group 3 must divide --workers 4" <<<"$out" || fail "said: $out"
two=$work/two_hosts.profile
(cd "$work" && timeout 120 "$meshrt" calibrate --coordinator "$address" --workers 4 --steps 3 \
  --out "$two") || fail "calibrate on two hosts failed"
grep -q "^# workers 4, collectives in groups of 2," "$two" ||
  fail "the default group should be the 2 workers of a host: $(cat "$two")"
grep -q "^# hosts 127.0.0.1 x2, 127.0.0.2 x2; collectives measured within a host and across hosts" \
  "$two" || fail "no hosts line: $(cat "$two")"
for kind in allreduce allgather alltoall; do
  for link in "$kind" "cross_host.$kind"; do
    alpha=$(awk -v k="$link.alpha_s" '$1 == k { print $2 }' "$two")
    beta=$(awk -v k="$link.beta_bytes_per_s" '$1 == k { print $2 }' "$two")
    [ -n "$alpha" ] && [ -n "$beta" ] || fail "two-host profile lacks $link: $(cat "$two")"
    awk -v a="$alpha" -v b="$beta" 'BEGIN { exit !(a >= 0 && b > 0) }' ||
      fail "$link: alpha $alpha, beta $beta"
  done
done
# explain costs a host-spanning allreduce with the file's cross-host link: made 1 kB/s, it dwarfs
# the same-host one.
sed -i 's/^cross_host.allreduce.beta_bytes_per_s .*/cross_host.allreduce.beta_bytes_per_s 1e3/' "$two"
slow=$("$meshrt" explain "$runfiles/examples/graphs/mlp_forward.pbtxt" --mesh p:2 --layout d_in:p \
  --profile "$two" --hosts a,b) || fail "explain --hosts failed: $slow"
fast=$("$meshrt" explain "$runfiles/examples/graphs/mlp_forward.pbtxt" --mesh p:2 --layout d_in:p \
  --profile "$two" --hosts a,a) || fail "explain --hosts failed: $fast"
comm() { grep -o "[0-9.]* ms communication" <<<"$1" | head -1 | cut -d' ' -f1; }
[ -n "$(comm "$slow")" ] && [ -n "$(comm "$fast")" ] || fail "no communication time: $slow"
awk -v s="$(comm "$slow")" -v f="$(comm "$fast")" 'BEGIN { exit !(s > 10 * f) }' ||
  fail "a 1 kB/s cross-host allreduce should cost far more than the same-host one: $(comm "$slow") vs $(comm "$fast") ms"
echo "PASS: $(grep -c . "$profile") lines; two hosts: $(grep -c . "$two") lines"
