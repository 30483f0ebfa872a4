#!/usr/bin/env bash
# Where the daemons listen, with the real binaries:
#   - asked for every interface (--host=0.0.0.0) without TLS or a token, the coordinator and the
#     worker refuse to start (exit 2), naming --insecure and the flags that would make it safe;
#   - with --insecure they start, and each logs a warning saying what that gives up; the
#     coordinator then serves a client without any token (what --insecure means);
#   - a second coordinator on a port in use fails to start (exit 1) saying the port is in use,
#     and the first one keeps serving;
#   - on loopback with no token flags the coordinator generates its tokens (0600 files in a 0700
#     directory): the CLI and a worker of the same $MESHRT_HOME use them without flags, while an
#     outsider without them can neither list the cluster nor register a worker.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

runfiles=$PWD
meshrt=$runfiles/client/meshrt
coordinator_bin=$runfiles/coordinator/meshrt-coordinator
worker_bin=$runfiles/worker/meshrt-worker
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/listen.XXXXXX")
logs=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
export MESHRT_HOME=$work/home
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then tail -n 20 "$logs"/*.log 2>/dev/null || true; fi
  rm -rf "${work:?}/home" "${work:?}/outsider"
  exit "$status"
}
trap cleanup EXIT

# wait_port FILE: the port a daemon wrote with --port_file.
wait_port() {
  for _ in $(seq 200); do [ -s "$1" ] && break; sleep 0.05; done
  [ -s "$1" ] || fail "no port in $1: the daemon did not start"
  cat "$1"
}
# expect_exit WANT NAME EXPECTED... -- COMMAND...: COMMAND exits WANT and its output holds every
# EXPECTED text.
expect_exit() {
  local want=$1 name=$2 expected=() rc=0 out
  shift 2
  while [ "$1" != "--" ]; do expected+=("$1"); shift; done
  shift
  out=$(timeout 20 "$@" 2>&1) || rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: expected exit $want, got $rc: $out"
  for text in "${expected[@]}"; do
    grep -qF -- "$text" <<<"$out" || fail "$name: '$text' not in: $out"
  done
  echo "ok ($name, exit $rc): $out"
}

echo "== every interface without TLS or a token: refused"
expect_exit 2 "coordinator on 0.0.0.0" \
  "meshrt-coordinator: refusing to listen on 0.0.0.0" "without TLS or a token" \
  "--tls_cert/--tls_key/--tls_ca" "--auth_token_file and --cluster_token_file" "--insecure" \
  -- "$coordinator_bin" --host=0.0.0.0 --port=0
expect_exit 2 "worker on 0.0.0.0" \
  "meshrt-worker: refusing to listen on 0.0.0.0" "--cluster_token_file on workers" "--insecure" \
  -- "$worker_bin" --host=0.0.0.0 --coordinator=127.0.0.1:1
[ ! -e "$MESHRT_HOME" ] || fail "a refused coordinator must not have generated tokens"

echo "== every interface with --insecure: starts, and warns"
"$coordinator_bin" --host=0.0.0.0 --port=0 --insecure --port_file="$work/insecure.port" \
  >"$logs/insecure-coordinator.log" 2>&1 &
pids+=($!)
insecure_port=$(wait_port "$work/insecure.port")
grep -q "W.*--insecure: no credentials: anyone who reaches the port can use every session" \
  "$logs/insecure-coordinator.log" || fail "the insecure coordinator logged no warning"
grep -q "serving on 0.0.0.0:$insecure_port" "$logs/insecure-coordinator.log" ||
  fail "the insecure coordinator should serve on 0.0.0.0:$insecure_port"
"$worker_bin" --host=0.0.0.0 --insecure --coordinator="127.0.0.1:$insecure_port" --rank=0 \
  >"$logs/insecure-worker.log" 2>&1 &
pids+=($!)
# No token anywhere: --insecure lets any caller in.
status=""
for _ in $(seq 100); do
  status=$("$meshrt" status --coordinator "127.0.0.1:$insecure_port" 2>&1) && grep -q "rank 0" <<<"$status" && break
  sleep 0.1
done
grep -q "rank 0" <<<"$status" || fail "the insecure coordinator should serve anyone: $status"
grep -q "W.*--insecure: listening on 0.0.0.0 in the open" "$logs/insecure-worker.log" ||
  fail "the insecure worker logged no warning"
echo "ok (--insecure): both started and warned; a client without a token was served"

echo "== a port in use: the second coordinator fails to start"
"$coordinator_bin" --host=127.0.0.1 --port=0 --port_file="$work/first.port" \
  >"$logs/first-coordinator.log" 2>&1 &
pids+=($!)
port=$(wait_port "$work/first.port")
expect_exit 1 "second coordinator on port $port" \
  "meshrt-coordinator: cannot listen on 127.0.0.1:$port: the port is in use" \
  -- "$coordinator_bin" --host=127.0.0.1 --port="$port"
expect_exit 1 "second coordinator on port $port (insecure, every interface)" \
  "meshrt-coordinator: cannot listen on 0.0.0.0:$port: the port is in use" \
  -- "$coordinator_bin" --host=0.0.0.0 --port="$port" --insecure

echo "== loopback defaults: generated tokens"
dir="$MESHRT_HOME/$port"
grep -q "generated credentials in $dir/" "$logs/first-coordinator.log" ||
  fail "the coordinator should say where it generated its tokens"
[ "$(stat -c %a "$dir")" = 700 ] || fail "$dir should be mode 700, is $(stat -c %a "$dir")"
for f in client.token operator.token cluster.token; do
  [ "$(stat -c %a "$dir/$f")" = 600 ] || fail "$dir/$f should be mode 600"
done
"$worker_bin" --coordinator="127.0.0.1:$port" --rank=0 >"$logs/first-worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  status=$("$meshrt" status --coordinator "127.0.0.1:$port" 2>&1) && grep -q "rank 0" <<<"$status" && break
  sleep 0.1
done
grep -q "rank 0" <<<"$status" ||
  fail "the first coordinator should still serve, and its worker register with the generated token: $status"
echo "ok (the first coordinator still serves; CLI and worker used the generated tokens)"
# An outsider: the same machine and port, not the generated tokens.
mkdir -p "$work/outsider"
expect_exit 1 "outsider's client" "refused this client: missing bearer token" \
  -- env MESHRT_HOME="$work/outsider" "$meshrt" status --coordinator "127.0.0.1:$port"
expect_exit 1 "outsider's worker" \
  "cannot register with coordinator 127.0.0.1:$port: missing cluster token" \
  -- env MESHRT_HOME="$work/outsider" "$worker_bin" --coordinator="127.0.0.1:$port" \
  --register_timeout_s=1
status=$("$meshrt" status --coordinator "127.0.0.1:$port" 2>&1)
grep -q "1 worker(s)" <<<"$status" || fail "the outsider's worker must not be listed: $status"
echo "PASS: deploy_listen_test"
