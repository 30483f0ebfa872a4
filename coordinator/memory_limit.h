// The coordinator's per-worker memory limit (--memory_limit), checked by CreateSession after the
// program is lowered and before any worker is asked to load it: a program whose peak per worker
// (core/planning/memory_model.h, for a step fetching the graph's outputs) exceeds the limit is refused with
// ResourceExhausted, naming the peak, the limit, the worker, the tensors that dominate the peak
// and, when a bounded search finds one, a layout that would fit.
#ifndef MESHRT_COORDINATOR_MEMORY_LIMIT_H_
#define MESHRT_COORDINATOR_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "core/planning/memory_model.h"
#include "proto/program.pb.h"

namespace meshrt {

// CoordinatorOptions::memory_limit: each worker's available memory as it reported it at
// registration (RegisterWorkerRequest.available_memory_bytes; 0 there = unknown = not checked).
inline constexpr int64_t kMemoryLimitAuto = -1;
// CoordinatorOptions::memory_limit: no check.
inline constexpr int64_t kMemoryLimitNone = 0;

// Parses the --memory_limit flag: "auto" (kMemoryLimitAuto), "none" (kMemoryLimitNone) or a byte
// count >= 1 such as 8G or 512M (core/planning/memory_model.h ParseByteSize). InvalidArgument naming the
// flag and the accepted forms otherwise.
absl::StatusOr<int64_t> ParseMemoryLimitFlag(const std::string& text);

// The memory a session's program needs on each worker: its report for a step fetching the graph's
// outputs (what RunStep fetches by default), parameters told from optimizer slots by name
// (VariablesWithSlots).
absl::StatusOr<MemoryReport> SessionMemory(const Graph& graph, const v1::Program& program);

// The refusal of `program` (lowered from `graph` on `mesh` under `rules`), whose `report` peaks
// over `limit_bytes`; `whose` says where the limit comes from and which worker it binds, e.g.
// "worker 3 (127.0.0.1:5000)'s available memory". Re-lowers at most `max_lowerings` times to find
// a layout that fits (SuggestFittingLayout). Always ResourceExhausted.
absl::Status MemoryRefusal(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                           const v1::Program& program, const MemoryReport& report,
                           int64_t limit_bytes, const std::string& whose, int max_lowerings = 20);

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_MEMORY_LIMIT_H_
