// Step timelines as Chrome trace-event JSON (`meshrt run --trace`, `meshrt train --trace`): the
// format chrome://tracing and the Perfetto UI (https://ui.perfetto.dev) open.
//
// The file is {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}. Each processor
// (rank) is a process (pid = rank + 1) named "rank R (dim=c,...) worker W", with two threads:
// tid 1 "step thread" and tid 2 "comm thread" (the executor's communication thread). Events are
// "X" (complete) events, ts and dur in microseconds:
//   - "step N" (cat "step") on the step thread: the whole step on that rank, one per traced step;
//     every other event of the step lies inside it.
//   - ops (cat "op"), named by their source op, args: what (e.g. "local op 'einsum'"),
//     instruction, skipped (a guarded op whose predicate was 0).
//   - collectives (cat "collective"), named "<KIND> <source op>", args: what, bytes (this rank's
//     input), fused (allreduces in one call), wait_us and transfer_us. When the wait is known
//     (coordinator/step_traces.h: ranks sharing a clock) the span holds two children, "waiting
//     for peers" (cat "collective.wait": until the last member of its group entered it) then
//     "transfer" (cat "collective.transfer").
//   - "wait for <source op>" (cat "wait") on the step thread: blocked until a collective it needs
//     finished (exposed communication; args: what, instruction).
// Placement: when every trace reads one monotonic clock (workers on one host), times are that
// clock's, from the earliest step start in the file. Otherwise ranks on the first trace's clock
// keep theirs and every other rank's step N starts where that clock's first rank started step N:
// ranks on different hosts are not clock-synchronised (otherData.clocks says which case).
#ifndef MESHRT_CLIENT_CHROME_TRACE_H_
#define MESHRT_CLIENT_CHROME_TRACE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/session.pb.h"

namespace meshrt {

// "A:B" (steps A..B inclusive, 1 <= A <= B) or "N" (= N:N). InvalidArgument naming the flag
// otherwise.
absl::StatusOr<std::pair<int64_t, int64_t>> ParseTraceSteps(const std::string& text);

// The JSON document for `traces` (any order; a (step, rank) given twice keeps the last).
std::string ChromeTraceJson(const std::vector<v1::StepTrace>& traces);

// Writes ChromeTraceJson(traces) to `path`. PermissionDenied naming the file when it cannot be
// written.
absl::Status WriteChromeTrace(const std::string& path, const std::vector<v1::StepTrace>& traces);

// Checks before any work that `path` can be written (creates it, empty, when missing; an existing
// file is left as it is). PermissionDenied naming the file and why otherwise.
absl::Status CheckTraceFileWritable(const std::string& path);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CHROME_TRACE_H_
