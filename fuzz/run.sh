#!/usr/bin/env bash
# Builds and runs the graph fuzzer (fuzz/graph_fuzzer.cc). See fuzz/README.md.
#
#   fuzz/run.sh bounded   replay fuzz/regressions/, then fuzz FUZZ_SECONDS (default 30) from the
#                         seed corpus in a fresh working corpus, stopping at the first finding
#                         (`make test`)
#   fuzz/run.sh long      replay, then fuzz FUZZ_SECONDS (default 600) in libFuzzer's fork mode,
#                         which carries on past findings and collects them all; what it learns
#                         stays in out/fuzz/corpus/ for the next long run (`make fuzz`)
#   fuzz/run.sh replay    only replay fuzz/regressions/
#
# Fails (exit 1) on any crash, sanitizer report, leak, timeout (-timeout=10 s per input) or
# out-of-memory (-rss_limit_mb=2048), printing each reproducer's path and how to replay it.
set -euo pipefail

mode="${1:-bounded}"
case "$mode" in
  bounded) seconds="${FUZZ_SECONDS:-30}" ;;
  long) seconds="${FUZZ_SECONDS:-600}" ;;
  replay) seconds=0 ;;
  *)
    echo "usage: fuzz/run.sh [bounded|long|replay] (FUZZ_SECONDS overrides the time)" >&2
    exit 2
    ;;
esac

cd "$(dirname "$0")/.."
out=out/fuzz
fuzzer="$out/graph_fuzzer"
limits=(-timeout=10 -rss_limit_mb=2048)
# UBSan reports come with their stack; every sanitizer report ends the input as a crash.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

echo "fuzz: building $fuzzer (clang-14, ASan + UBSan + libFuzzer)"
make -f fuzz/fuzz.mk -j"${FUZZ_JOBS:-2}" --no-print-directory "$fuzzer"

# The sanitizer's one-line summary and the first meshrt frame of the stack, for input $1.
describe() {
  local log
  log="$("$fuzzer" "${limits[@]}" "$1" 2>&1 || true)"
  local summary frame
  summary="$(grep -m1 -E '^SUMMARY:|CHECK failed|ALARM: working on the last Unit|out-of-memory' \
    <<<"$log" || echo "no report (passes now)")"
  frame="$(grep -m1 -oE 'in meshrt::[^(]*\(.*\) /[^ ]*(core|fuzz)/[^ ]*' <<<"$log" |
    sed -E 's/\(.*\) / at /' || true)"
  echo "$summary${frame:+ | $frame}"
}

# Every past finding, each run once: they must pass (or be refused) now.
failed=0
mapfile -t regressions < <(find fuzz/regressions -type f ! -name '*.md' | sort)
if [ "${#regressions[@]}" -ne 0 ]; then
  echo "fuzz: replaying ${#regressions[@]} input(s) from fuzz/regressions/"
  for r in "${regressions[@]}"; do
    if ! "$fuzzer" "${limits[@]}" "$r" >"$out/replay.log" 2>&1; then
      grep -A30 -m1 -E '^==[0-9]+==|runtime error|CHECK failed|deadly signal' \
        "$out/replay.log" >&2 || cat "$out/replay.log" >&2
      echo "fuzz: FAILED: regression $r fails again; replay: $fuzzer $r" >&2
      failed=1
      [ "$mode" = long ] || exit 1
    fi
  done
fi
[ "$seconds" -gt 0 ] || exit "$failed"

mkdir -p "$out/artifacts"
log="$out/$mode.log"
echo "fuzz: fuzzing for ${seconds}s (log: $log)"
status=0
if [ "$mode" = bounded ]; then
  corpus="$(mktemp -d "$out/bounded.XXXXXX")"
  trap 'rm -rf "$corpus"' EXIT
  "$fuzzer" "${limits[@]}" -dict=fuzz/graph.dict -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/" "$corpus" fuzz/corpus fuzz/regressions >"$log" 2>&1 ||
    status=$?
  # libFuzzer's own numbers: executions, speed, and coverage at the end.
  grep -E '^#[0-9]+[[:space:]]+(INITED|NEW|REDUCE|pulse|DONE)' "$log" | tail -1 |
    sed 's/^/fuzz: last: /' || true
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" |
    sed 's/^/fuzz: /' || true
  if [ "$status" -ne 0 ]; then
    grep -A40 -m1 -E '^==[0-9]+==|runtime error|CHECK failed|ALARM|out-of-memory|deadly signal' \
      "$log" | head -60 >&2 || true
    unit="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)"
    echo "fuzz: FAILED (libFuzzer exit $status); full log: $log" >&2
    if [ -n "$unit" ]; then
      echo "fuzz: reproducer: $unit; replay: $fuzzer $unit" >&2
      echo "fuzz: record it (minimized, see fuzz/README.md) in fuzz/regressions/" >&2
    fi
    exit 1
  fi
  echo "fuzz: OK, no findings"
  exit 0
fi

# Long: fork mode keeps going after a finding; each run's findings get their own folder.
artifacts="$out/artifacts/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$artifacts" "$out/corpus"
"$fuzzer" "${limits[@]}" -dict=fuzz/graph.dict -max_total_time="$seconds" -fork=1 \
  -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -artifact_prefix="$artifacts/" \
  "$out/corpus" fuzz/corpus fuzz/regressions >"$log" 2>&1 || status=$?
grep -E '^#[0-9]+: cov:' "$log" | tail -1 | sed 's/^/fuzz: last: /' || true
# Coverage of the corpus the run leaves, in the same units as the bounded run's (fork mode counts
# its own way): one pass over it.
"$fuzzer" -runs=0 "$out/corpus" fuzz/corpus 2>&1 | grep -E '^#[0-9]+[[:space:]]+INITED' |
  sed 's/^/fuzz: corpus: /' || true
mapfile -t found < <(find "$artifacts" -type f | sort)
if [ "${#found[@]}" -eq 0 ] && [ "$status" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "fuzz: OK, no findings"
  exit 0
fi
echo "fuzz: FAILED: ${#found[@]} input(s) in $artifacts (libFuzzer exit $status), by report:" >&2
for f in "${found[@]}"; do echo "$(describe "$f")	$f"; done | sort | awk -F'\t' '
  function flush() { if (n) printf "  %d x %s\n     e.g. %s\n", n, last, first }
  $1 != last { flush(); last = $1; first = $2; n = 0 }
  { n++ } END { flush() }' >&2
echo "fuzz: replay one: $fuzzer FILE; record it (minimized) in fuzz/regressions/" >&2
exit 1
