#include "core/planning/memory_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"
#include "core/ir/step_fusion.h"
#include "core/ir/tensor.h"
#include "core/lowering/lowering.h"
#include "core/planning/explain.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr int Index(MemoryCategory c) { return static_cast<int>(c); }

bool Transient(MemoryCategory c) {
  return c == MemoryCategory::kFetches || c == MemoryCategory::kUpdates ||
         c == MemoryCategory::kActivations || c == MemoryCategory::kGradients;
}

absl::StatusOr<int64_t> SliceBytes(const v1::Shape& proto, v1::DType dtype,
                                   const std::string& what) {
  ASSIGN_OR_RETURN(const Shape shape, Shape::FromProto(proto, what));
  auto t = DTypeFromProto(dtype);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.status().message()));
  return shape.num_elements() * DTypeSize(*t);
}

absl::StatusOr<int64_t> TensorSliceBytes(const v1::Shape& global, const v1::TensorLayout& layout,
                                         v1::DType dtype, const Mesh& mesh,
                                         const std::string& what) {
  ASSIGN_OR_RETURN(const Shape shape, Shape::FromProto(global, what));
  const TensorLayout l = TensorLayout::FromProto(layout);
  if (static_cast<int>(l.mesh_axis.size()) != shape.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": its layout has ", l.mesh_axis.size(),
                                                   " entries for a rank-", shape.rank(), " shape"));
  }
  for (int a : l.mesh_axis) {
    if (a != kReplicated && (a < 0 || a >= mesh.ndims())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": its layout names mesh axis ", a, " of mesh ", mesh.ToString()));
    }
  }
  auto t = DTypeFromProto(dtype);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.status().message()));
  return SliceShape(shape, l, mesh).num_elements() * DTypeSize(*t);
}

// Every buffer's category and name, and what the simulation needs to know of the step.
struct BufferInfo {
  MemoryCategory category = MemoryCategory::kActivations;
  std::string name;
  bool pinned = false;  // lives to the end of the step once written
};

// What the simulation knows of a program's buffers and instructions for one step.
struct StepBuffers {
  explicit StepBuffers(int n)
      : n(n), info(n), persistent(n, false), start_bytes(n, 0), last_reader(n, -1) {}
  bool valid(int b) const { return b >= 0 && b < n; }

  const int n;  // buffers
  std::vector<BufferInfo> info;
  std::vector<bool> persistent;      // live for the whole step from its start
  std::vector<int64_t> start_bytes;  // of a persistent buffer
  std::vector<int> last_reader;      // the last running instruction reading it; -1: none
  std::vector<bool> runs;            // per instruction: whether the step runs it
  std::vector<int64_t> out_bytes;    // per instruction: its output slice's bytes
};

// The buffers live from the step's start (feeds, variables: persistent, with their slice bytes)
// and the fetched outputs (pinned). InvalidArgument naming a tensor whose buffer is out of range.
absl::Status ClassifyStartBuffers(const v1::Program& program, const MemoryOptions& options,
                                  const Mesh& mesh, StepBuffers* s) {
  const int n = s->n;
  for (const v1::ProgramTensor& t : program.inputs()) {
    const std::string what = absl::StrCat("input '", t.name(), "'");
    if (!s->valid(t.buffer())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " names buffer ", t.buffer(), " but the program has ", n));
    }
    ASSIGN_OR_RETURN(const int64_t bytes,
                     TensorSliceBytes(t.shape(), t.layout(), t.dtype(), mesh, what));
    s->info[t.buffer()] = {MemoryCategory::kFeeds, t.name(), true};
    s->persistent[t.buffer()] = true;
    s->start_bytes[t.buffer()] = bytes;
  }
  std::set<std::string> trainable;
  if (options.trainable != nullptr)
    trainable.insert(options.trainable->begin(), options.trainable->end());
  for (const v1::ProgramVariable& v : program.variables()) {
    const std::string what = absl::StrCat("variable '", v.name(), "'");
    if (!s->valid(v.buffer()) || v.update_buffer() < -1 || v.update_buffer() >= n) {
      return absl::InvalidArgumentError(absl::StrCat(what, " names buffers ", v.buffer(), " and ",
                                                     v.update_buffer(), " but the program has ",
                                                     n));
    }
    ASSIGN_OR_RETURN(const int64_t bytes,
                     TensorSliceBytes(v.shape(), v.layout(), v.dtype(), mesh, what));
    const MemoryCategory c = options.trainable == nullptr    ? MemoryCategory::kVariables
                             : trainable.count(v.name()) > 0 ? MemoryCategory::kParameters
                                                             : MemoryCategory::kOptimizerState;
    s->info[v.buffer()] = {c, v.name(), true};
    s->persistent[v.buffer()] = true;
    s->start_bytes[v.buffer()] = bytes;
    if (s->valid(v.update_buffer()) && !s->persistent[v.update_buffer()]) {
      s->info[v.update_buffer()] = {MemoryCategory::kUpdates, "", true};
    }
  }
  // Fetched outputs, as StepInstructions names them.
  for (const v1::ProgramTensor& t : program.outputs()) {
    const bool wanted = options.fetches == nullptr
                            ? !t.resolved_on_fetch()
                            : std::find(options.fetches->begin(), options.fetches->end(),
                                        t.name()) != options.fetches->end();
    if (!wanted || !s->valid(t.buffer()) || s->persistent[t.buffer()]) continue;
    BufferInfo& b = s->info[t.buffer()];
    if (b.category == MemoryCategory::kActivations) b.category = MemoryCategory::kFetches;
    b.pinned = true;
  }
  return absl::OkStatus();
}

// The instructions the step runs (counted in `report`), their output bytes, each buffer's last
// reader, what is pinned, and the backward pass (see the header): what is computed from a scalar
// `ones` of no input. InvalidArgument naming an instruction with a buffer out of range.
absl::Status ScanInstructions(const v1::Program& program, const MemoryOptions& options,
                              StepBuffers* s, MemoryReport* report) {
  const int n = s->n;
  s->runs = StepInstructions(program, options.fetches);
  const int count = program.instructions_size();
  s->out_bytes.assign(count, 0);
  std::vector<bool> from_seed(n, false);
  for (int i = 0; i < count; ++i) {
    const v1::Instruction& instr = program.instructions(i);
    const std::string what = absl::StrCat("instruction ", i, " (op '", instr.source_op(), "')");
    if (!s->valid(instr.output())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " writes buffer ", instr.output(), " but the program has ", n));
    }
    for (int b : instr.inputs()) {
      if (!s->valid(b)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " reads buffer ", b, " but the program has ", n));
      }
    }
    if (!s->runs[i]) continue;
    ++report->running_instructions;
    for (int b : instr.inputs()) s->last_reader[b] = i;
    if (instr.has_predicate() && s->valid(instr.predicate())) {
      s->info[instr.predicate()].pinned = true;
    }
    // The executor keeps a deferred allreduce's input to the end of the step.
    if (DeferredAllReduceBytes(instr, n) > 0) s->info[instr.inputs(0)].pinned = true;
    ASSIGN_OR_RETURN(s->out_bytes[i], SliceBytes(instr.slice_shape(), instr.dtype(), what));
    bool backward = instr.kind_case() == v1::Instruction::kLocal &&
                    instr.local().type() == "ones" && instr.inputs_size() == 0 &&
                    instr.slice_shape().dims_size() == 0;
    for (int b : instr.inputs()) backward = backward || from_seed[b];
    if (backward) {
      from_seed[instr.output()] = true;
      if (report->backward_from < 0) report->backward_from = i;
    }
    BufferInfo& o = s->info[instr.output()];
    if (o.name.empty()) o.name = instr.source_op();
    if (backward && o.category == MemoryCategory::kActivations && !o.pinned) {
      o.category = MemoryCategory::kGradients;
    }
  }
  return absl::OkStatus();
}

// The walk over the running instructions: live transient bytes per buffer (0 = not allocated).
// Returns the transient peak and the instruction it is reached at (-1: none); stops after
// instruction `stop_at` (-1: walks to the end), leaving its live bytes in `live_out` (may be
// null).
std::pair<int64_t, int> WalkTransient(const v1::Program& program, const StepBuffers& s,
                                      int stop_at, std::vector<int64_t>* live_out) {
  std::vector<int64_t> live(s.n, 0);
  int64_t total = 0, peak = 0;
  int peak_at = -1;
  for (int i = 0; i < program.instructions_size(); ++i) {
    if (!s.runs[i]) continue;
    const v1::Instruction& instr = program.instructions(i);
    const int o = instr.output();
    if (!s.persistent[o] && s.out_bytes[i] > live[o]) {  // a buffer written again keeps its storage
      total += s.out_bytes[i] - live[o];
      live[o] = s.out_bytes[i];
    }
    if (total > peak) {
      peak = total;
      peak_at = i;
    }
    if (i == stop_at) break;
    for (int b : instr.inputs()) {
      if (b != o && !s.persistent[b] && !s.info[b].pinned && s.last_reader[b] == i &&
          live[b] > 0) {
        total -= live[b];
        live[b] = 0;
      }
    }
  }
  if (live_out != nullptr) *live_out = std::move(live);
  return std::make_pair(peak, peak_at);
}

// The tensors held at the peak (`live`: transient bytes then): aggregated by name, largest
// first, ties by name, at most `top_tensors`.
std::vector<MemoryTensor> TopTensors(const StepBuffers& s, const std::vector<int64_t>& live,
                                     int top_tensors) {
  std::map<std::pair<std::string, int>, int64_t> by_name;
  for (int b = 0; b < s.n; ++b) {
    const int64_t bytes = s.persistent[b] ? s.start_bytes[b] : live[b];
    if (bytes > 0) by_name[{s.info[b].name, Index(s.info[b].category)}] += bytes;
  }
  std::vector<MemoryTensor> top;
  for (const auto& [key, bytes] : by_name) {
    top.push_back({key.first, static_cast<MemoryCategory>(key.second), bytes});
  }
  std::sort(top.begin(), top.end(), [](const MemoryTensor& a, const MemoryTensor& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  if (static_cast<int>(top.size()) > std::max(top_tensors, 0)) {
    top.resize(std::max(top_tensors, 0));
  }
  return top;
}

}  // namespace

const char* MemoryCategoryName(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kOptimizerState:
      return "optimizer slots / other state";
    case MemoryCategory::kVariables:
      return "variables";
    case MemoryCategory::kFeeds:
      return "feeds";
    case MemoryCategory::kFetches:
      return "fetched outputs";
    case MemoryCategory::kUpdates:
      return "variable updates";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kGradients:
      return "gradients (backward pass)";
  }
  return "?";
}

int64_t MemoryReport::persistent_bytes() const {
  return bytes(MemoryCategory::kParameters) + bytes(MemoryCategory::kOptimizerState) +
         bytes(MemoryCategory::kVariables);
}

absl::StatusOr<MemoryReport> ComputeMemory(const v1::Program& program,
                                           const MemoryOptions& options) {
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::FromProto(program.mesh()));
  const int n = program.num_buffers();
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("program has ", n, " buffers"));
  MemoryReport report;
  report.mesh = mesh.ToString();
  {
    std::vector<std::string> rules;
    for (const v1::LayoutRule& r : program.rules().rules()) {
      rules.push_back(absl::StrCat(r.tensor_dim(), ":", r.mesh_dim()));
    }
    report.layout = absl::StrJoin(rules, ",");
  }
  StepBuffers s(n);
  RETURN_IF_ERROR(ClassifyStartBuffers(program, options, mesh, &s));
  RETURN_IF_ERROR(ScanInstructions(program, options, &s, &report));

  int64_t base = 0;
  for (int b = 0; b < n; ++b) {
    if (s.persistent[b]) {
      base += s.start_bytes[b];
      report.at_peak[Index(s.info[b].category)] += s.start_bytes[b];
    }
  }
  const auto [transient_peak, peak_at] = WalkTransient(program, s, -1, nullptr);
  report.peak_instruction = peak_at;
  std::vector<int64_t> live(n, 0);
  if (peak_at >= 0) {
    report.peak_op = program.instructions(peak_at).source_op();
    WalkTransient(program, s, peak_at, &live);
  }
  for (int b = 0; b < n; ++b) {
    if (live[b] > 0) report.at_peak[Index(s.info[b].category)] += live[b];
  }
  report.peak_bytes = base + transient_peak;
  report.top = TopTensors(s, live, options.top_tensors);
  return report;
}

std::vector<std::string> VariablesWithSlots(const v1::Program& program) {
  std::set<std::string> names;
  for (const v1::ProgramVariable& v : program.variables()) names.insert(v.name());
  std::vector<std::string> out;
  for (const v1::ProgramVariable& v : program.variables()) {
    for (const char* slot : {"/m", "/v", "/vr", "/vc"}) {
      if (names.count(absl::StrCat(v.name(), slot)) > 0) {
        out.push_back(v.name());
        break;
      }
    }
  }
  return out;
}

std::string HumanBytes(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.2f %s", v, kUnits[u]);
}

std::string ExplainMemory(const MemoryReport& report) {
  std::string out = "memory per worker (one step):\n";
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    if (report.at_peak[c] == 0) continue;
    const auto cat = static_cast<MemoryCategory>(c);
    absl::StrAppendFormat(&out, "  %-32s %12s%s\n", MemoryCategoryName(cat),
                          HumanBytes(report.at_peak[c]), Transient(cat) ? "  (at the peak)" : "");
  }
  absl::StrAppendFormat(&out, "  %-32s %12s  (%d bytes%s)\n", "peak", HumanBytes(report.peak_bytes),
                        report.peak_bytes,
                        report.peak_instruction < 0
                            ? ", before any instruction"
                            : absl::StrCat(", at instruction ", report.peak_instruction, " of op '",
                                           report.peak_op, "'"));
  if (!report.top.empty()) {
    absl::StrAppend(&out, "  live at the peak, largest first:\n");
    for (const MemoryTensor& t : report.top) {
      absl::StrAppendFormat(&out, "    %-30s %12s  %s\n", t.name, HumanBytes(t.bytes),
                            MemoryCategoryName(t.category));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "='", text, "' ", why,
        ": give a byte count, optionally with a binary suffix K, M, G or T, e.g. 8G or 512M"));
  };
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad("does not start with a number");
  std::string suffix = text.substr(digits);
  if (suffix.size() > 1 && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() > 1 && (suffix.back() == 'i')) suffix.pop_back();  // "GiB"
  int shift = 0;
  if (suffix.empty() || suffix == "B" || suffix == "b") {
    shift = 0;
  } else if (suffix.size() == 1 && std::string("KkMmGgTt").find(suffix[0]) != std::string::npos) {
    shift = 10 * (1 + static_cast<int>(std::string("KMGT").find(std::toupper(suffix[0]))));
  } else {
    return bad(absl::StrCat("has an unknown suffix '", text.substr(digits), "'"));
  }
  const std::string number = text.substr(0, digits);
  if (std::count(number.begin(), number.end(), '.') > 1) return bad("is not a number");
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) return bad("is not a number");
  const double bytes = std::ldexp(v, shift);
  if (bytes >= 9.0e18) return bad("is too large");
  return static_cast<int64_t>(bytes);
}

std::string SuggestFittingLayout(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                                 const MemoryReport& report, const v1::Program& program,
                                 int64_t limit_bytes, const MemoryOptions& options,
                                 int max_lowerings, int64_t* suggested_peak) {
  // The dims of the dominating tensors, largest tensor first, each dim once.
  std::map<std::string, const v1::Shape*> shapes;
  for (const v1::ProgramTensor& t : program.outputs()) shapes[t.name()] = &t.shape();
  for (const v1::ProgramTensor& t : program.inputs()) shapes[t.name()] = &t.shape();
  for (const v1::ProgramVariable& v : program.variables()) shapes[v.name()] = &v.shape();
  std::vector<std::string> dims;
  for (const MemoryTensor& t : report.top) {
    auto it = shapes.find(t.name);
    if (it == shapes.end()) continue;
    for (const v1::Dim& d : it->second->dims()) {
      if (rules.MeshAxisFor(d.name()) == kReplicated &&
          std::find(dims.begin(), dims.end(), d.name()) == dims.end()) {
        dims.push_back(d.name());
      }
    }
  }
  std::string best;
  int64_t best_peak = 0;
  int lowerings = 0;
  for (const std::string& dim : dims) {
    for (const Dim& m : mesh.dims()) {
      if (lowerings >= max_lowerings) break;
      if (m.size <= 1) continue;
      std::vector<std::pair<std::string, std::string>> pairs(rules.rules().begin(),
                                                             rules.rules().end());
      pairs.emplace_back(dim, m.name);
      auto candidate = LayoutRules::Make(pairs, mesh);
      if (!candidate.ok()) continue;
      ++lowerings;
      auto lowered = Lower(graph, mesh, *candidate);
      if (!lowered.ok()) continue;
      auto memory = ComputeMemory(*lowered, options);
      if (!memory.ok() || memory->peak_bytes > limit_bytes) continue;
      if (best.empty() || memory->peak_bytes < best_peak) {
        best = candidate->ToString();
        best_peak = memory->peak_bytes;
      }
    }
  }
  if (suggested_peak != nullptr) *suggested_peak = best.empty() ? 0 : best_peak;
  return best;
}

}  // namespace meshrt
