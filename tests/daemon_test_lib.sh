# shellcheck shell=bash disable=SC2034  # it sets globals the sourcing test uses
# Shared by the shell tests that start daemons themselves (source it, then call
# daemon_test_setup NAME): `fail MESSAGE`; $runfiles, $meshrt, a fresh $work directory, $logs (the
# test's undeclared outputs, else $work), MESHRT_HOME in $work (the daemons' generated tokens), and
# the array `pids` of processes that the EXIT trap continues (SIGCONT), stops (SIGTERM) and waits
# for; on failure it prints the tail of every log.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

daemon_test_setup() {  # NAME
  runfiles=$PWD
  meshrt=$runfiles/client/meshrt
  work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/$1.XXXXXX")
  logs=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
  export MESHRT_HOME=$work/home
  pids=()
  trap daemon_test_cleanup EXIT
}

daemon_test_cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then tail -n 30 "$logs"/*.log 2>/dev/null || true; fi
  rm -rf "${work:?}/home"
  exit "$status"
}

wait_for_port_file() {  # FILE WHAT: fails naming WHAT when FILE is still empty after 10 s
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  fail "$2 did not start"
}

wait_for_session() {  # LOG: prints the id of the first session LOG names (waits up to 10 s)
  local id=""
  for _ in $(seq 200); do
    id=$(grep -o "session s-[0-9a-f]*" "$1" | head -1 | cut -d' ' -f2) || true
    [ -n "$id" ] && break
    sleep 0.05
  done
  [ -n "$id" ] || fail "no session started (see $1)"
  echo "$id"
}
