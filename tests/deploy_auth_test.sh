#!/usr/bin/env bash
# TLS, mutual TLS and the roles' tokens (rpc/auth.h), end to end on loopback: a coordinator that
# requires client certificates, a client token (--auth_token_file), an operator token and a
# cluster token; one worker that registers with the cluster token; workers that present a wrong
# token, a client's token or none, and must not register; and clients (the meshrt CLI) that get it
# right or wrong in one way each. Every refusal must be an error that names its cause.
# Certificates and tokens are made here and removed afterwards.
#
# The CLI prints a status's message, not its code: an Unauthenticated answer is recognised by the
# client's "refused this client:" prefix (client/client.cc adds it for that code alone), a
# PermissionDenied one by the coordinator's message for it and the absence of that prefix.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

runfiles=$PWD
meshrt=$runfiles/client/meshrt
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/auth.XXXXXX")
# Nothing generated or found in the user's ~/.meshrt: every credential here is given by a flag.
export MESHRT_HOME=$work/home
logs=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then tail -n 20 "$logs"/*.log 2>/dev/null || true; fi
  rm -rf "$work/certs" "$work/tokens"
  exit "$status"
}
trap cleanup EXIT

command -v openssl >/dev/null 2>&1 || fail "openssl is not on PATH; run tools/setup.sh"
certs=$work/certs
bash "$(readlink -f tests/launch_make_certs.sh)" "$certs" DNS:localhost IP:127.0.0.1
tokens=$work/tokens
mkdir -m 700 "$tokens"
token() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
echo "alice $(token)" >"$tokens/client.tokens"    # the coordinator's list of clients
cut -d' ' -f2 "$tokens/client.tokens" >"$tokens/alice.token"
token >"$tokens/operator.token"
token >"$tokens/cluster.token"
token >"$tokens/wrong.token"
tls=(--tls_cert "$certs/tls.crt" --tls_key "$certs/tls.key" --tls_ca "$certs/ca.crt")

"$runfiles/coordinator/meshrt-coordinator" --host=127.0.0.1 --port=0 --port_file="$work/port" \
  "${tls[@]}" --tls_require_client_cert --auth_token_file="$tokens/client.tokens" \
  --operator_token_file="$tokens/operator.token" --cluster_token_file="$tokens/cluster.token" \
  >"$logs/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "the coordinator did not start"
address="localhost:$(cat "$work/port")"

"$runfiles/worker/meshrt-worker" --coordinator="$address" --advertise_address=localhost --rank=0 \
  "${tls[@]}" --tls_require_client_cert --cluster_token_file="$tokens/cluster.token" \
  >"$logs/worker.log" 2>&1 &
pids+=($!)

# bad_worker NAME EXPECTED FLAGS...: a worker with these flags must fail to register, saying why.
bad_worker() {
  local name=$1 expected=$2 log="$work/bad-worker-$1.log"
  shift 2
  if timeout 30 "$runfiles/worker/meshrt-worker" --coordinator="$address" \
    --advertise_address=localhost "${tls[@]}" --register_timeout_s=1 "$@" >"$log" 2>&1; then
    echo "FAIL (worker, $name): it registered"
    return 1
  fi
  local last
  last=$(tail -1 "$log")
  grep -qF "cannot register with coordinator $address: $expected" <<<"$last" ||
    { echo "FAIL (worker, $name): '$expected' not in: $last"; return 1; }
  echo "refused (worker, $name): $last"
}
jobs_=()
bad_worker "wrong cluster token" \
  "cluster token rejected: it does not match the coordinator's --cluster_token_file" \
  --cluster_token_file="$tokens/wrong.token" &
jobs_+=($!)
# A client's credential must not make its holder a member of the cluster (PermissionDenied).
bad_worker "a client's token" \
  "a client or operator token cannot call the cluster's member RPCs" \
  --cluster_token_file="$tokens/alice.token" &
jobs_+=($!)
bad_worker "the operator's token" \
  "a client or operator token cannot call the cluster's member RPCs" \
  --cluster_token_file="$tokens/operator.token" &
jobs_+=($!)
# No token flag, and nothing generated for this coordinator in $MESHRT_HOME to fall back on.
bad_worker "no cluster token" \
  "missing cluster token: only the cluster's daemons may call this, with --cluster_token_file" &
jobs_+=($!)
failed=0
for j in "${jobs_[@]}"; do wait "$j" || failed=1; done
[ "$failed" -eq 0 ] || fail "a worker case failed (above)"

# case NAME EXPECTED_TEXT CLIENT_FLAGS...: `meshrt status` with those flags; EXPECTED_TEXT empty =
# must succeed and list the one worker that registered (and no other). The cases run concurrently
# (TLS failures wait out the client's connect timeout).
case_() {
  local name=$1 expected=$2
  shift 2
  local out rc=0
  out=$(timeout 30 "$meshrt" status --coordinator "$address" "$@" 2>&1) || rc=$?
  if [ -z "$expected" ]; then
    [ "$rc" -eq 0 ] || { echo "FAIL ($name): exit $rc: $out"; return 1; }
    grep -q "rank 0" <<<"$out" || { echo "FAIL ($name): no worker listed: $out"; return 1; }
    grep -q "1 worker(s)" <<<"$out" || { echo "FAIL ($name): not exactly one worker: $out"; return 1; }
    echo "ok ($name)"
    return 0
  fi
  [ "$rc" -eq 1 ] || { echo "FAIL ($name): expected exit 1, got $rc: $out"; return 1; }
  grep -qF -- "$expected" <<<"$out" || { echo "FAIL ($name): '$expected' not in: $out"; return 1; }
  echo "refused ($name): $out"
}
# permission_denied NAME EXPECTED CLIENT_FLAGS...: refused with EXPECTED, and not as
# Unauthenticated (no "refused this client:" prefix).
permission_denied() {
  local out
  out=$(case_ "$@") || { echo "$out"; return 1; }
  if grep -qF "refused this client:" <<<"$out"; then
    echo "FAIL ($1): expected PermissionDenied, got Unauthenticated: $out"
    return 1
  fi
  echo "$out"
}

# The worker registers first (its registration retries with backoff).
for _ in $(seq 100); do
  case_ "wait" "" "${tls[@]}" --auth_token_file "$tokens/alice.token" >/dev/null 2>&1 && break
  sleep 0.1
done

jobs_=()
case_ "TLS, client certificate and client token" "" "${tls[@]}" \
  --auth_token_file "$tokens/alice.token" &
jobs_+=($!)
# The coordinator's own list ("NAME TOKEN" lines) works as a client's file too: its first token.
case_ "the client list as the client's file" "" "${tls[@]}" \
  --auth_token_file "$tokens/client.tokens" &
jobs_+=($!)
case_ "operator token" "" "${tls[@]}" --auth_token_file "$tokens/operator.token" &
jobs_+=($!)
case_ "no token" "refused this client: missing bearer token" "${tls[@]}" &
jobs_+=($!)
case_ "wrong token" "refused this client: bearer token rejected: it is none of the coordinator's client (--auth_token_file) or operator (--operator_token_file) tokens" \
  "${tls[@]}" --auth_token_file "$tokens/wrong.token" &
jobs_+=($!)
# The daemons' credential is no client's (PermissionDenied, naming the flag it belongs to).
permission_denied "cluster token as a client's" \
  "this is the cluster's member credential (--cluster_token_file), which only daemons use" \
  "${tls[@]}" --auth_token_file "$tokens/cluster.token" &
jobs_+=($!)
case_ "CA that did not sign the server's certificate" "certificate verify failed" \
  --tls_ca "$certs/other-ca.crt" --tls_cert "$certs/tls.crt" --tls_key "$certs/tls.key" \
  --auth_token_file "$tokens/alice.token" &
jobs_+=($!)
case_ "no client certificate" "if it requires client certificates, that --tls_cert/--tls_key" \
  --tls_ca "$certs/ca.crt" --auth_token_file "$tokens/alice.token" &
jobs_+=($!)
case_ "client certificate from another CA" "are signed by its CA" \
  --tls_ca "$certs/ca.crt" --tls_cert "$certs/other.crt" --tls_key "$certs/other.key" \
  --auth_token_file "$tokens/alice.token" &
jobs_+=($!)
case_ "plaintext client" "the server may require TLS: give --tls_ca" \
  --auth_token_file "$tokens/alice.token" &
jobs_+=($!)
failed=0
for j in "${jobs_[@]}"; do wait "$j" || failed=1; done
[ "$failed" -eq 0 ] || fail "a client case failed (above)"
grep -q "1 client token(s), operator token, cluster token" "$logs/coordinator.log" ||
  fail "the coordinator should log the credentials it loaded: $(grep serving "$logs/coordinator.log")"
echo "PASS: deploy_auth_test"
