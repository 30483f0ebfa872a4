// Memory model of a lowered program: the bytes one worker (processor) holds during a step, by
// category, and their peak, simulated over the step's instructions as runtime/executor.cc frees
// buffers. The program is SPMD, so every worker holds slices of the same shapes and one report
// describes them all. Used by `meshrt explain` and by Coordinator::CreateSession's
// --memory_limit check.
//
// Checked against what the executor holds (runtime/executor_memory_test.cc, ExecutorOptions::
// track_live_bytes): never above the model's peak, within 10% of it on the tests' training steps
// (equal on one processor).
// What a step holds, in the executor's terms:
//   - persistent: every variable's slice (its `buffer`), live for the whole step and between steps;
//   - feeds: every program input's slice, live for the whole step;
//   - transient: each buffer written by a running instruction (core/planning/explain.h StepInstructions,
//     which prunes exactly as the executor does) is allocated when first written and freed after
//     its last reader among the running instructions, unless it is pinned: fetched outputs and
//     variables' update buffers live to the end of the step (so during a step a variable's old
//     slice and its update both exist). A buffer nothing reads and nothing pins also stays to the
//     end of the step (the executor frees buffers only after a read).
// The peak is taken at each instruction after its output is allocated and before its dead inputs
// are freed (a kernel reads its inputs while it writes its output).
//
// Approximations (all overestimate or ignore small terms):
//   - collectives' scratch (Gloo's receive buffers, ring chunks) is ignored;
//   - the executor's fusions (core/ir/step_fusion.h), which skip some intermediate buffers,
//     are not modelled: every instruction's output counts;
//   - small allreduces the executor defers and batches (core/ir/step_fusion.h DeferredAllReduceBytes)
//     keep their inputs to the end of the step, as the executor keeps them; their outputs are
//     counted from the allreduce's position, where the executor writes them when the bucket runs
//     (later);
//   - bytes are slice elements times the dtype size: allocator overhead is ignored, and so is the
//     buffer pool's retention (runtime/buffer_pool.h: storage freed in a step is kept for the next
//     one, which reuses it, so a worker's footprint in steady state stays near the peak);
//   - copies outside the executor are ignored: the request's feed chunks and the response's
//     fetched slices on the worker, the worker's copy of a feed it cannot move;
//   - gradients are told from other activations by position, not by name (autodiff gives its
//     ops the builder's fresh names, and a "gradients/" scope would rename tensors that tests,
//     checkpoints and explain output rely on) but by data flow: core/train/autodiff.cc seeds the
//     backward pass with a scalar `ones` op of no input, and every gradient is computed from it,
//     so every transient buffer computed (transitively) from a scalar `ones` instruction without
//     inputs is the backward pass: gradients and the optimizer's temporaries ("gradients"). The
//     counters' increments (global_step + 1) are too, but they write update buffers, counted as
//     such. A forward graph that computes activations from a scalar `ones` of its own would count
//     them as gradients.
#ifndef MESHRT_CORE_PLANNING_MEMORY_MODEL_H_
#define MESHRT_CORE_PLANNING_MEMORY_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "proto/program.pb.h"

namespace meshrt {

enum class MemoryCategory {
  kParameters = 0,  // trainable variables (MemoryOptions::trainable)
  kOptimizerState,  // the other variables when trainable names are given (slots, counters)
  kVariables,       // every variable when no trainable names are given
  kFeeds,           // program inputs' slices
  kFetches,         // fetched outputs written by the step
  kUpdates,         // variables' new values (update buffers), written by the step
  kActivations,     // every other buffer a step writes before the backward pass
  kGradients,       // ... and in it: gradients and the optimizer's temporaries (see above)
};
constexpr int kNumMemoryCategories = 8;
const char* MemoryCategoryName(MemoryCategory c);

struct MemoryOptions {
  // The step's fetches, as core/planning/explain.h StepInstructions takes them (null: every output that is
  // not resolved_on_fetch). Borrowed for the call only.
  const std::vector<std::string>* fetches = nullptr;
  // Names of the trainable variables (e.g. models::TrainGraph::trainable). Null: variables are
  // not split into parameters and optimizer state. Borrowed for the call only.
  const std::vector<std::string>* trainable = nullptr;
  // How many of the tensors live at the peak the report lists, largest first.
  int top_tensors = 5;
};

// One tensor (buffers aggregated by name) live at the peak.
struct MemoryTensor {
  std::string name;  // the variable's or input's name, or the instruction's source_op
  MemoryCategory category = MemoryCategory::kActivations;
  int64_t bytes = 0;
};

struct MemoryReport {
  std::string mesh;    // Mesh::ToString of the program's mesh
  std::string layout;  // the program's rules, "d:m,..." ("" = all replicated)
  // Bytes per category at the peak (persistent categories and feeds are constant over a step).
  std::array<int64_t, kNumMemoryCategories> at_peak{};
  int backward_from = -1;  // the first instruction of the backward pass (-1: none found)
  // The largest transient (fetches, updates, activations, gradients) bytes at any point.
  int64_t peak_bytes = 0;         // the total at the peak: sum of at_peak
  int peak_instruction = -1;      // the instruction at which it is reached (-1: before any runs)
  std::string peak_op;            // that instruction's source_op ("" when -1)
  int running_instructions = 0;   // how many instructions the step runs
  std::vector<MemoryTensor> top;  // live at the peak, largest first (MemoryOptions::top_tensors)

  int64_t bytes(MemoryCategory c) const { return at_peak[static_cast<int>(c)]; }
  // Variables' slices (parameters + optimizer state + variables): held between steps too.
  int64_t persistent_bytes() const;
};

// The memory report of `program` (a program from core/lowering/lowering.h Lower). Malformed programs
// (buffers out of range, bad shapes) are InvalidArgument naming the instruction or tensor.
absl::StatusOr<MemoryReport> ComputeMemory(const v1::Program& program,
                                           const MemoryOptions& options = {});

// The variables of `program` that have optimizer slots (core/train/optimizers.cc names them
// "<var>/m", "<var>/v", "<var>/vr", "<var>/vc"), for MemoryOptions::trainable when the caller
// does not know the trainable names (a graph file, a CreateSession request). A variable trained by
// plain sgd has no slot and is not found: empty when no variable has one.
std::vector<std::string> VariablesWithSlots(const v1::Program& program);

// A short text section: one line per nonzero category, the peak (where it is reached) and the
// top tensors live at the peak. Ends with a newline.
std::string ExplainMemory(const MemoryReport& report);

// "1.50 MiB", "512 B": bytes for people.
std::string HumanBytes(int64_t bytes);

// Parses a byte count flag value: a non-negative integer with an optional binary suffix K, M, G,
// T (KiB..TiB; "8G" = 8 << 30, "512M", "1.5G" allowed) or B. InvalidArgument naming `flag`, the
// value and the accepted forms otherwise.
absl::StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& flag);

// A layout that fits: tries adding one rule `dim:mesh_dim` at a time to `rules` (dims of the
// tensors that dominate `report`'s peak, largest first; mesh dims in mesh order), re-lowers
// `graph` and recomputes the memory with `options`, at most `max_lowerings` times. Returns the
// rules (LayoutRules::ToString) whose peak is the smallest among those at most `limit_bytes`, or
// "" when none is found. Never fails: candidates that do not lower are skipped.
std::string SuggestFittingLayout(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                                 const MemoryReport& report, const v1::Program& program,
                                 int64_t limit_bytes, const MemoryOptions& options,
                                 int max_lowerings = 20, int64_t* suggested_peak = nullptr);

}  // namespace meshrt

#endif  // MESHRT_CORE_PLANNING_MEMORY_MODEL_H_
