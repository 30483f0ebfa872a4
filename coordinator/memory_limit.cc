#include "coordinator/memory_limit.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status_macros.h"

namespace meshrt {

absl::StatusOr<int64_t> ParseMemoryLimitFlag(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "auto") return kMemoryLimitAuto;
  if (lower == "none") return kMemoryLimitNone;
  absl::StatusOr<int64_t> bytes = ParseByteSize(text, "memory_limit");
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(bytes.status().message(),
                                                   "; or auto (each worker's available memory) or "
                                                   "none (no check)"));
  }
  if (*bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory_limit='", text,
                     "' is zero: give a positive byte count such as 8G, or none to "
                     "disable the check"));
  }
  return *bytes;
}

absl::StatusOr<MemoryReport> SessionMemory(const Graph& graph, const v1::Program& program) {
  const std::vector<std::string> fetches = graph.Outputs();
  const std::vector<std::string> trainable = VariablesWithSlots(program);
  MemoryOptions options;
  options.fetches = &fetches;
  if (!trainable.empty()) options.trainable = &trainable;
  return ComputeMemory(program, options);
}

absl::Status MemoryRefusal(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                           const v1::Program& program, const MemoryReport& report,
                           int64_t limit_bytes, const std::string& whose, int max_lowerings) {
  std::vector<std::string> top;
  for (const MemoryTensor& t : report.top) {
    top.push_back(absl::StrCat("'", t.name, "' ", HumanBytes(t.bytes), " (",
                               MemoryCategoryName(t.category), ")"));
  }
  const std::vector<std::string> fetches = graph.Outputs();
  const std::vector<std::string> trainable = VariablesWithSlots(program);
  MemoryOptions options;
  options.fetches = &fetches;
  if (!trainable.empty()) options.trainable = &trainable;
  int64_t fitting_peak = 0;
  const std::string fits = SuggestFittingLayout(graph, mesh, rules, report, program, limit_bytes,
                                                options, max_lowerings, &fitting_peak);
  const std::string current = rules.ToString();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the program needs ", HumanBytes(report.peak_bytes), " (", report.peak_bytes,
      " bytes) per worker at its peak",
      report.peak_op.empty() ? "" : absl::StrCat(" (at op '", report.peak_op, "')"), " on mesh ",
      mesh.ToString(), " with layout '", current, "', over the memory limit of ",
      HumanBytes(limit_bytes), " (", limit_bytes, " bytes): ", whose,
      "; the tensors that dominate at the peak: ", absl::StrJoin(top, ", "),
      fits.empty()
          ? "; no layout adding one rule fits: split more dims, use a larger mesh or raise "
            "--memory_limit"
          : absl::StrCat("; a layout that fits: '", fits, "' (peak ", HumanBytes(fitting_peak),
                         ")")));
}

}  // namespace meshrt
