# The training part of tests/launch_manifests_test.sh (mode `training`), sourced by it once the
# coordinator and the workers of the rendered overlay run and are ready: the Job meshrt-train's
# container (`meshrt train --resume --recover auto` against the coordinator Service, its
# checkpoints on the claim every daemon maps to one directory) runs
#   1. uninterrupted, with its --checkpoint_dir renamed: the baseline;
#   2. as the Job, restarted on failure as restartPolicy OnFailure does (up to backoffLimit
#      times), while a worker pod is killed (SIGKILL) after the first checkpoint and recreated
#      as its StatefulSet would, and then, once the run has recovered and checkpointed again, the
#      client pod is killed (SIGKILL) too; nobody closes the dead client's session: the
#      coordinator frees its workers after the --session_lease (default 10 s);
# and must complete: exit 0, resumed from the checkpoint, with the baseline's final loss.
# Uses the launch test's variables and functions (pod_command, start_pod, ns_of, fail, ...).

job_ip=${ips[-1]}
claim_dir=$work/pvc/meshrt-checkpoints
job_log=$logs/job.log

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, or fail naming WHAT.
wait_for() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what: not within ${seconds} s"
    sleep 0.1
  done
}
# in_log PATTERN [MIN]: the Job's log holds more than MIN (default 0) lines matching PATTERN.
in_log() { [ "$(grep -cE -- "$1" "$job_log" 2>/dev/null)" -gt "${2:-0}" ]; }
# live_pids NS: the processes in network namespace NS that still run (not zombies: a killed
# pod's PID 1 is reparented outside its PID namespace and reaped whenever its new parent does).
live_pids() {
  local pid state
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || continue
    [ -n "$state" ] && [ "$state" != Z ] && echo "$pid"
  done
  return 0
}
# kill_pod HOST: SIGKILL every process of the pod (a node crash, an OOM kill), until none runs.
kill_pod() {
  local ns pid
  ns=$(ns_of "$1")
  for pid in $(live_pids "$ns"); do kill -KILL "$pid" 2>/dev/null || true; done
  local deadline=$((SECONDS + 10))
  while [ -n "$(live_pids "$ns")" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      ps -o pid,ppid,stat,wchan:20,args -p "$(live_pids "$ns" | paste -sd,)" >&2 || true
      fail "the processes of pod $1 still run 10 s after SIGKILL (above)"
    fi
    sleep 0.1
  done
}
# final_loss FILE: the loss on the client's "final loss X after $train_steps steps" line.
final_loss() { sed -n "s/^final loss \([0-9.]*\) after $train_steps steps .*/\1/p" "$1" | tail -1; }

policy=$(node "$pod_js" "$rendered" Job meshrt-train --get spec.template.spec.restartPolicy)
backoff=$(node "$pod_js" "$rendered" Job meshrt-train --get spec.backoffLimit)
[ "$policy" = '"OnFailure"' ] || fail "the Job's restartPolicy is $policy, not OnFailure"
[[ "$backoff" =~ ^[0-9]+$ ]] || fail "the Job's backoffLimit is $backoff"

echo "== the training Job's client, uninterrupted (the baseline)"
pod_command job Job meshrt-train meshrt-train-baseline "$job_ip"
baseline_argv=()
for arg in "${pod_argv[@]}"; do
  case "$arg" in --checkpoint_dir=*) arg=--checkpoint_dir=runs/baseline ;; esac
  baseline_argv+=("$arg")
done
echo "meshrt-train @ $job_ip: ${baseline_argv[*]}"
ip netns exec "$(ns_of job)" timeout 90 env -i "${pod_env[@]}" "${baseline_argv[@]}" \
  >"$logs/baseline.log" 2>&1 || fail "the uninterrupted training run failed (baseline.log)"
tail -n 2 "$logs/baseline.log"
baseline=$(final_loss "$logs/baseline.log")
[ -n "$baseline" ] || fail "the uninterrupted run printed no 'final loss ... after $train_steps steps'"
# Written by the coordinator (the manifest, CURRENT) and the workers (their shards) into the one
# volume they all mount at their --checkpoint_root.
[ -s "$claim_dir/runs/baseline/CURRENT" ] ||
  fail "no committed checkpoint runs/baseline on the shared volume ($claim_dir)"

echo "== the training Job: restartPolicy OnFailure, backoffLimit $backoff"
pod_command job Job meshrt-train meshrt-train-7xk2p "$job_ip"
job_env=("${pod_env[@]}")
job_argv=("${pod_argv[@]}")
echo "meshrt-train @ $job_ip: ${job_argv[*]}"
# The kubelet's part: start the container again after each failure (it backs off 10 s, 20 s,
# ...; here 1 s), until it succeeds or has been restarted backoffLimit times.
run_job() {
  local restarts=0 rc
  while :; do
    echo "=== container start $restarts" >>"$job_log"
    rc=0
    ip netns exec "$(ns_of job)" unshare --pid --fork --kill-child=SIGTERM \
      env -i "${job_env[@]}" "${job_argv[@]}" >>"$job_log" 2>&1 || rc=$?
    echo "$rc" >>"$work/job.exits"
    [ "$rc" -eq 0 ] && return 0
    restarts=$((restarts + 1))
    [ "$restarts" -le "$backoff" ] || return 1
    sleep 1
  done
}
run_job &
job_loop=$!
pids+=("$job_loop")

wait_for "the Job's first checkpoint" 60 in_log "^saved checkpoint 'runs/launch' at step "
echo "== kill pod meshrt-worker-1 (SIGKILL) after: $(grep -m1 '^saved checkpoint' "$job_log")"
kill_pod worker1
killed_at=$SECONDS
sleep 1  # the StatefulSet controller notices and recreates the pod: same name, same DNS name
start_pod worker1 StatefulSet meshrt-worker meshrt-worker-1 "${ips[2]}"
wait_for "the Job's recovery from the killed worker" 60 in_log '^recovered in .* continuing on mesh'
grep -E '^step [0-9]+ failed on mesh|^recovered in' "$job_log" | cut -c1-300
echo "measured: worker killed -> training again: $((SECONDS - killed_at)) s (whole seconds)"

saves=$(grep -c "^saved checkpoint 'runs/launch'" "$job_log")
wait_for "a checkpoint after the recovery" 60 in_log "^saved checkpoint 'runs/launch'" "$saves"
# Killed at once: a tiny model's remaining steps take a few seconds on a fast machine, and a kill
# that lands after the last checkpoint leaves the restarted client nothing to train.
echo "== kill the Job's pod (SIGKILL) after: $(grep '^saved checkpoint' "$job_log" | tail -1)"
kill_pod job
client_killed_at=$SECONDS
# The Job's session, listed (as the operator) before the coordinator's --session_lease (10 s)
# expires it: the client "trainer" owns it, and it still holds the workers.
operator=(--coordinator "$coordinator" --auth_token_file "$work/volumes/coordinator/operator-token/operator.token")
mapfile -t dead_sessions < <(client sessions "${operator[@]}" |
  awk '$2 == "owner" && $3 == "trainer" && / ready +step / { print $1 }')
[ "${#dead_sessions[@]}" -eq 1 ] ||
  fail "expected one ready session of the client trainer, listed: ${dead_sessions[*]}"
echo "its session ${dead_sessions[0]} holds the workers until the coordinator's --session_lease expires it"
wait_for "the restarted client to resume" 90 in_log "^resumed from checkpoint 'runs/launch' \(after step [1-9]"
grep '^resumed from checkpoint' "$job_log"
echo "measured: client killed -> resumed: $((SECONDS - client_killed_at)) s (incl. the 1 s restart)"
listed=$(client sessions "${operator[@]}")
grep -qE "^  ${dead_sessions[0]} .* expired +step " <<<"$listed" ||
  fail "the dead client's session ${dead_sessions[0]} should be listed as expired: $listed"
grep -E "^  ${dead_sessions[0]} " <<<"$listed"

wait_for "the Job to complete" 90 bash -c "! kill -0 $job_loop 2>/dev/null"
rc=0
wait "$job_loop" || rc=$?
exits=$(tr '\n' ' ' <"$work/job.exits")
[ "$rc" -eq 0 ] || fail "the Job failed: its container exited with $exits(job.log)"
# SIGKILLed once (128 + 9), then complete.
[ "$exits" = "137 0 " ] || fail "the Job's container exited with '$exits', expected '137 0 '"
echo "the Job completed; container exit codes: $exits"
tail -n 3 "$job_log"
last=$(tail -n 1 "$job_log")
[[ "$last" =~ ^(final\ loss\ [0-9.]+\ after\ $train_steps\ steps|[0-9]+\ recover(y|ies):\ ) ]] ||
  fail "the Job's last line should be its final loss (or its recoveries): $last"
got=$(sed -n '/^=== container start/h; /^=== container start/!H; ${x; p}' "$job_log" |
  sed -n "s/^final loss \([0-9.]*\) after $train_steps steps .*/\1/p")
[ -n "$got" ] || fail "the Job's last container printed no 'final loss ... after $train_steps steps'"
# The same global batch on the same mesh: the same numbers (within 1e-5 relative on another
# mesh, e.g. had it shrunk while no replacement registered); printed to 4 decimals.
awk -v a="$got" -v b="$baseline" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1.5e-4) }' ||
  fail "the Job's final loss $got differs from the uninterrupted run's $baseline"
echo "final loss $got (uninterrupted: $baseline)"
[ -s "$claim_dir/runs/launch/CURRENT" ] ||
  fail "no committed checkpoint runs/launch on the shared volume ($claim_dir)"
