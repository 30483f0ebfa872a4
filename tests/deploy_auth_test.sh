#!/usr/bin/env bash
# TLS, mutual TLS and the bearer token, end to end on loopback: a coordinator that requires client
# certificates and a token, one worker that registers with them, and clients (the meshrt CLI)
# that get it right or wrong in one way each. Every refusal must be an error that names its
# cause. Certificates are made here with openssl and removed afterwards.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

runfiles=$PWD
meshrt=$runfiles/client/meshrt
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/auth.XXXXXX")
logs=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then tail -n 20 "$logs"/*.log 2>/dev/null || true; fi
  rm -rf "$work/certs"
  exit "$status"
}
trap cleanup EXIT

command -v openssl >/dev/null 2>&1 || fail "openssl is not on PATH; run tools/setup.sh"
certs=$work/certs
bash "$(readlink -f tests/launch_make_certs.sh)" "$certs" DNS:localhost IP:127.0.0.1
echo "the right token $$" >"$certs/token"
echo "a wrong token" >"$certs/wrong-token"
tls=(--tls_cert "$certs/tls.crt" --tls_key "$certs/tls.key" --tls_ca "$certs/ca.crt")

"$runfiles/coordinator/meshrt-coordinator" --host=127.0.0.1 --port=0 --port_file="$work/port" \
  "${tls[@]}" --tls_require_client_cert --auth_token_file="$certs/token" >"$logs/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "the coordinator did not start"
address="localhost:$(cat "$work/port")"

"$runfiles/worker/meshrt-worker" --coordinator="$address" --advertise_address=localhost --rank=0 \
  "${tls[@]}" --tls_require_client_cert --auth_token_file="$certs/token" >"$logs/worker.log" 2>&1 &
pids+=($!)

# A worker with the wrong token cannot register, and says why.
if timeout 30 "$runfiles/worker/meshrt-worker" --coordinator="$address" --advertise_address=localhost \
  "${tls[@]}" --auth_token_file="$certs/wrong-token" --register_timeout_s=1 >"$work/bad-worker.log" 2>&1; then
  fail "a worker with the wrong token registered"
fi
grep -q "cannot register with coordinator.*bearer token rejected" "$work/bad-worker.log" ||
  fail "the worker's error should name the rejected token: $(tail -1 "$work/bad-worker.log")"
echo "refused (worker, wrong token): $(tail -1 "$work/bad-worker.log")"

# case NAME EXPECTED_TEXT CLIENT_FLAGS...: `meshrt status` with those flags; EXPECTED_TEXT empty =
# must succeed and list the worker. The cases run concurrently (TLS failures wait out the
# client's connect timeout).
case_() {
  local name=$1 expected=$2
  shift 2
  local out rc=0
  out=$(timeout 30 "$meshrt" status --coordinator "$address" "$@" 2>&1) || rc=$?
  if [ -z "$expected" ]; then
    [ "$rc" -eq 0 ] || { echo "FAIL ($name): exit $rc: $out"; return 1; }
    grep -q "rank 0" <<<"$out" || { echo "FAIL ($name): no worker listed: $out"; return 1; }
    echo "ok ($name)"
    return 0
  fi
  [ "$rc" -eq 1 ] || { echo "FAIL ($name): expected exit 1, got $rc: $out"; return 1; }
  grep -qF -- "$expected" <<<"$out" || { echo "FAIL ($name): '$expected' not in: $out"; return 1; }
  echo "refused ($name): $out"
}

# The worker registers first (its registration retries with backoff).
for _ in $(seq 100); do
  case_ "wait" "" "${tls[@]}" --auth_token_file "$certs/token" >/dev/null 2>&1 && break
  sleep 0.1
done

jobs_=()
case_ "TLS, client certificate and token" "" "${tls[@]}" --auth_token_file "$certs/token" &
jobs_+=($!)
case_ "no token" "missing bearer token" "${tls[@]}" &
jobs_+=($!)
case_ "wrong token" "bearer token rejected" "${tls[@]}" --auth_token_file "$certs/wrong-token" &
jobs_+=($!)
case_ "CA that did not sign the server's certificate" "certificate verify failed" \
  --tls_ca "$certs/other-ca.crt" --tls_cert "$certs/tls.crt" --tls_key "$certs/tls.key" \
  --auth_token_file "$certs/token" &
jobs_+=($!)
case_ "no client certificate" "if it requires client certificates, that --tls_cert/--tls_key" \
  --tls_ca "$certs/ca.crt" --auth_token_file "$certs/token" &
jobs_+=($!)
case_ "client certificate from another CA" "are signed by its CA" \
  --tls_ca "$certs/ca.crt" --tls_cert "$certs/other.crt" --tls_key "$certs/other.key" \
  --auth_token_file "$certs/token" &
jobs_+=($!)
case_ "plaintext client" "the server may require TLS: give --tls_ca" \
  --auth_token_file "$certs/token" &
jobs_+=($!)
failed=0
for j in "${jobs_[@]}"; do wait "$j" || failed=1; done
[ "$failed" -eq 0 ] || fail "a client case failed (above)"
echo "PASS: deploy_auth_test"
