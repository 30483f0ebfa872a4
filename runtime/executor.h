// Executor: runs a lowered SPMD program (proto/program.proto) on one processor of the mesh.
//
// Given the processor's slices of the program inputs, it runs the instructions in order: local ops
// through a KernelRunner, local slices in place, and collectives through a Communicator, which
// reads and writes the pieces along an arbitrary tensor axis in the buffers themselves (the
// communicator's blocked calls, blocked_chunks.h; no packing copy). Afterwards every buffer
// (and so every program output) holds this processor's slice.
//
// Ownership and lifetimes: `program`, `kernels` and `communicator` are borrowed and must outlive
// the executor (the program is not copied). `communicator` must belong to the processor at
// `coordinate` of the program's mesh. `kernels` may be null for programs without local ops.
// `context` goes to every kernel: what the program's ops may touch on the host (its file policy is
// borrowed and must outlive the executor; the default allows every file, a worker daemon passes
// its --data_dir policy).
//
// Thread-safety: thread-compatible. One Run at a time; Buffer/OutputSlice must not race with Run.
// Distinct executors (one per processor) may run concurrently.
//
// Overlap (ExecutorOptions::overlap_comm, on by default): collectives run on a communication thread
// of the executor (runtime/communication_queue.h; started by the first Run that needs it, joined by
// the destructor), one at a time in program order, while the calling thread goes on with the
// instructions after them; an instruction that reads a collective's result (or writes a buffer a
// collective still reads or writes) waits for it. The calling thread issues every collective at its place in the program,
// so every processor makes the same communicator calls in the same order, and their results are
// bit-identical to those without overlap (the same calls on the same data). The communicator is
// then called from the communication thread only (one thread at a time, as communicator.h asks),
// and from the calling thread when overlap is off, for groups of one, and when the calling thread
// needs a result the communication thread has not started (it runs it itself instead of waiting
// for a wakeup). Run returns only after every collective it issued has finished.
//
// Activity: with set_activity, Run reports every instruction the calling thread enters
// (StepActivity::Enter), in program order: the local ops it runs and the collectives as it issues
// them (so ordinals still compare across processors). While it waits for a collective's result, the
// activity shows the instruction that reads it; the communication thread reports nothing (its CPU
// time is not in step_cpu). Once the activity is aborted the step stops with Aborted at the next
// instruction of either thread: the calling thread enters none, and the communication thread starts
// no collective it has not started yet (one in progress is not interrupted: it ends within the
// communicator's timeout, as without overlap).
//
// Trace: with set_trace, Run records its timeline into the recorder (step_trace.h: every local op,
// every collective on the thread that ran it with its bytes, the step thread's waits for
// collectives). The caller brackets each Run with StepTraceRecorder::Begin/Finish. Off (null, the
// default) it costs one pointer test per instruction.
//
// Errors from Run:
//   - InvalidArgument before any instruction runs: the program is malformed (bad mesh, buffer
//     index, layout), the coordinate is not in the mesh, a feed is missing, unknown, or has the
//     wrong dtype or slice shape (the message names the placeholder and both shapes).
//   - Errors of a step keep their code, and the message names the instruction index, its
//     source_op and its kind (e.g. "collective ALLGATHER over [cols]", "local op 'einsum'"). A
//     step whose result does not match its declared slice shape or dtype is InvalidArgument.
//   - Aborted, naming the instruction it would have run next, after StepActivity::Abort().
//   With overlap, the first failure in program order wins: a collective that failed on the
//   communication thread is reported (with its instruction) rather than a later local op's error.
#ifndef MESHRT_RUNTIME_EXECUTOR_H_
#define MESHRT_RUNTIME_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/step_fusion.h"
#include "core/ir/tensor.h"
#include "core/ops/kernel_runner.h"
#include "proto/program.pb.h"
#include "runtime/buffer_pool.h"
#include "runtime/communication_queue.h"
#include "runtime/communicator.h"
#include "runtime/decoded_instruction.h"
#include "runtime/overlap_choice.h"
#include "runtime/step_activity.h"
#include "runtime/step_plan.h"
#include "runtime/step_trace.h"
#include "runtime/variable_store.h"

namespace meshrt {

struct ExecutorOptions {
  // Run collectives on the executor's communication thread, overlapping the local ops that do not
  // read their results (see Executor). false: each collective runs on the calling thread at its
  // place in the program (for comparison and diagnosis; results are the same bits).
  bool overlap_comm = true;
  // Choose overlap_comm by measurement instead (runtime/overlap_choice.h): the first runs of each
  // fetch list time overlap on and off, alternately, and keep the faster (overlap_comm is then
  // ignored). Only with fixed_program (the plans, which own the measurements, live as long as the
  // executor) and without track_live_bytes (which needs overlap off); otherwise overlap_comm holds.
  bool choose_overlap = false;
  // Count the bytes the executor holds during a step (Executor::peak_live_bytes), for checking the
  // memory model (core/planning/memory_model.h) against what runs. Only with overlap_comm off (the
  // communication thread would write buffers while they are counted); a pass over the buffers
  // after every instruction.
  bool track_live_bytes = false;
  // The borrowed program stays as it is while the executor lives (the worker's, kept from
  // LoadSession): its instructions are decoded at the first Run and each fetch list's plan is made
  // once, for every later Run. false: every Run decodes and plans afresh, for a caller that edits
  // the program between Runs (executor_test does).
  bool fixed_program = false;
};

class Executor {
 public:
  Executor(const v1::Program& program, std::vector<int64_t> coordinate, const KernelRunner* kernels,
           Communicator* communicator, KernelContext context = KernelContext(),
           ExecutorOptions options = ExecutorOptions());
  // Joins the communication thread (idle between runs).
  ~Executor() = default;

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs the whole program. `input_slices` maps every program input (placeholder) name to this
  // processor's slice of it; no other names are allowed. Buffers from a previous Run are dropped
  // first. On error, buffers hold whatever the steps before the failing one wrote.
  absl::Status Run(const std::map<std::string, Tensor>& input_slices);

  // Runs only the instructions that the outputs named in `fetches` and the variables' updates
  // depend on (as TensorFlow prunes a step to its fetches): e.g. a training step that fetches the
  // loss skips a gradient nobody reads and a global norm nobody clips with. A guarded instruction
  // (proto Instruction.predicate) that no fetched output depends on is skipped, its output zeros,
  // on steps where its predicate is zero; the decision is made when the run reaches it, before a
  // small allreduce is deferred for fusion, so only allreduces that run are fused and every
  // processor (same program, fetches and replicated predicate) skips the same ones. Run(feeds)
  // runs every guarded instruction. Afterwards only those
  // outputs (and variables) are readable; the others are FailedPrecondition in OutputSlice. Every
  // processor of a step must get the same fetches, so that all run the same collectives (the
  // coordinator sends one list to all). Names that are not outputs select nothing (OutputSlice
  // reports them). The pruned schedule is computed once per distinct fetch list.
  absl::Status Run(const std::map<std::string, Tensor>& input_slices,
                   const std::vector<std::string>& fetches);

  // The same, moving the feeds into the executor's buffers instead of copying them (a worker's
  // decoded request is read once). The map's tensors are left in a moved-from state.
  absl::Status Run(std::map<std::string, Tensor>&& input_slices);
  absl::Status Run(std::map<std::string, Tensor>&& input_slices,
                   const std::vector<std::string>& fetches);

  // Buffer `index` after Run, or null when it is out of range, was never written, or was internal
  // (bound to no output, input or variable) and freed after its last reader.
  const Tensor* Buffer(int index) const;

  // A copy of this processor's slice of program output `name`. NotFound for a name that is not a
  // program output; FailedPrecondition when its buffer has not been written (no successful Run).
  absl::StatusOr<Tensor> OutputSlice(const std::string& name) const;

  // The slices of outputs `names` after Run, by name (a name given twice appears once). A slice
  // the step left in a buffer of its own, fetched under one name only, is moved out instead of
  // copied (the buffer then reads as not written until the next Run); the others (a variable's
  // value, a buffer two names share) are copied into storage from `storage` (dtype, shape; its
  // elements are then overwritten). Errors as OutputSlice, naming the first bad name.
  using StorageFn = std::function<Tensor(DType, const Shape&)>;
  absl::StatusOr<std::map<std::string, Tensor>> TakeOutputSlices(
      const std::vector<std::string>& names, const StorageFn& storage);

  const std::vector<int64_t>& coordinate() const { return coordinate_; }

  // Where Run reports the instruction it enters (borrowed; null = nowhere). The caller brackets
  // each Run with BeginStep/EndStep. Not while Run runs.
  void set_activity(StepActivity* activity) { activity_ = activity; }
  // Where Run records its timeline (borrowed; null = nowhere, the default). Not while Run runs.
  void set_trace(StepTraceRecorder* trace) { trace_ = trace; }

  // Variables (proto ProgramVariable, core/ops/ops_state.h): this processor's slices, kept between
  // runs. A variable without a slice is initialised by the next Run; a failed Run changes none.
  const std::map<std::string, Tensor>& variables() const { return variables_.slices(); }
  // With ExecutorOptions::track_live_bytes (and overlap off): the largest number of bytes the last
  // Run held in its buffers (feeds, variables' slices, every intermediate and output), taken after
  // each instruction stored its output and before its dead inputs were freed, as the memory model
  // takes its peak. Storage the buffer pool keeps for reuse is not counted. 0 otherwise.
  int64_t peak_live_bytes() const { return peak_live_bytes_; }
  // The storage the buffer pool keeps for reuse now (BufferPool::pooled_bytes). Thread-safe: a
  // metrics scrape reads it while Run runs.
  int64_t pooled_bytes() const { return pool_.pooled_bytes(); }
  // Replaces variable `name`'s slice (e.g. from a checkpoint). NotFound for a name that is not a
  // program variable; InvalidArgument (naming the variable, both shapes) for a wrong slice.
  absl::Status SetVariable(const std::string& name, Tensor slice) {
    return variables_.Set(name, std::move(slice));
  }
  // Forgets every slice: the next Run initialises them again.
  void ResetVariables() { variables_.Reset(); }

  // How many times a scaled update or masked product ran fused (core/ir/step_fusion.h).
  int64_t fused_updates() const;
  // How many times a softmax (or log_softmax) of add(a, b) ran as one pass over a + b.
  int64_t fused_softmaxes() const;

  // With ExecutorOptions::choose_overlap: one line per fetch list whose choice was made since the
  // last call (OverlapChoice::Summary, e.g. "off (step medians: on 70.3 ms, off 67.5 ms, ...)"),
  // for the caller to log; then empty until another fetch list decides.
  std::vector<std::string> TakeOverlapDecisions();

 private:
  // Checks the program's structure and the feeds; fills buffers_ with the feeds.
  absl::Status Prepare(const std::map<std::string, Tensor>& input_slices);
  // Checks the feed of placeholder `input` (present, its dtype and slice shape) and puts it in its
  // buffer (moved from movable_feeds_, else copied into pooled storage).
  absl::Status PlaceFeed(const v1::ProgramTensor& input,
                         const std::map<std::string, Tensor>& input_slices);
  // Decodes every instruction into decoded_ (once with options_.fixed_program, else every Run).
  void DecodeProgram();
  // The plan for `fetches` (runtime/step_plan.h PlanStep): with options_.fixed_program made once
  // per fetch key and cached, else made for this Run.
  const StepPlan& PlanFor(const std::vector<std::string>* fetches);
  // Runs `plan`, first choosing overlap for it (options_.choose_overlap) and timing the run.
  absl::Status RunPlan(const std::map<std::string, Tensor>& input_slices, const StepPlan& plan);
  // One step: the feeds, the variables loaded, the instructions, the queue drained, the variables
  // stored.
  absl::Status RunSchedule(const std::map<std::string, Tensor>& input_slices,
                           const StepPlan& plan);
  // The instructions of plan_ in program order: each running one at its place, the deferred
  // allreduces in buckets (AllReduceBucket) when one is due. The first error; OK when a queued
  // collective failed (Drain reports it).
  absl::Status RunInstructions();
  // Guarded instruction `index` (StepPlan::guarded): when its predicate is zero, writes zeros of
  // its slice shape to its output, enters it, frees its dead inputs and returns true (the caller
  // skips it); false when it runs. Errors name the instruction.
  absl::StatusOr<bool> SkipIfGuarded(int index);
  // Writes the zeros of a skipped guarded instruction (true), or false when its predicate is not
  // zero. InvalidArgument when the predicate buffer is out of range, unwritten or not a scalar.
  absl::StatusOr<bool> SkipGuarded(int index);
  // Local instruction (or local slice) `index` of plan_ (entered already): waits for the
  // collectives it depends on, runs it (fused, if plan_ says so) and frees its dead inputs.
  absl::Status RunLocalAt(int index);
  // `index`: the instruction's position in the program (-1 for a variable's initializer); `d`:
  // `instr` decoded. Runs it on decoded data only (no proto parsing, no op registry lookup).
  absl::Status RunInstruction(const v1::Instruction& instr, const DecodedInstruction& d,
                              Tensor* out, int index);
  // Instruction `index` of the program with its decoded_ entry.
  absl::Status RunInstructionAt(int index, Tensor* out);
  // Runs the fused instruction that replaces S (StepPlan::fused_instructions) through the kernel
  // runner; when its kernel fails (a runner without the fused op, operands that do not fit), runs
  // S's group one by one instead (RunUnfused), so the result and any error are the ops' own.
  absl::Status RunFused(int s_index, Tensor* out);
  // The fused instructions of plan_ decoded (once per plan with options_.fixed_program).
  const std::map<int, DecodedInstruction>& DecodedFusions();
  // The fused instructions of f (the einsum, mul, mask or add), then S, one by one as the program
  // says.
  absl::Status RunUnfused(int s_index, const FusedUpdate& f, Tensor* out);
  absl::Status RunLocalSlice(const v1::LocalSlice& slice, const Tensor& in, Tensor* out);

  // Collectives (executor_collectives.cc). Issues collective instruction `index` (entered
  // already) to comm_, or runs it here when it needs no communicator call (a group of one).
  absl::Status IssueCollective(int index);
  // Runs collective instruction `index` and recycles its dead input: `queued` on the
  // communication thread (or as queued work on the calling thread), else inline.
  absl::Status RunCollectiveInstruction(int index, bool queued);
  // `stealable`: `in` itself, when nothing reads it afterwards (allreduce, broadcast and a group
  // of one then work in place). Outputs and scratch buffers come from pool_; where the chunks
  // along the split or concat axis are contiguous the communicator works on `in` / `out` directly.
  absl::Status RunCollective(const v1::Collective& c, const DecodedInstruction& d,
                             const Tensor& in, Tensor* out, Tensor* stealable);
  // ALLGATHER, ALLTOALL or REDUCE_SCATTER `c` over `axes` (a group of `g`) from `in` into `out`:
  // true when it ran, false (after the axis checks, nothing written) for a group of one.
  absl::StatusOr<bool> RunBlockedCollective(const v1::Collective& c, const std::vector<int>& axes,
                                            int g, const Tensor& in, Tensor* out);
  // Issues the allreduces waiting in `bucket` (AllReduceBucket::Take: one group per mesh axes, op
  // and dtype), one group after another; empties it.
  absl::Status FlushAllReduces(AllReduceBucket* bucket);
  // Runs one group (on the communication thread, or inline): one allreduce of its members.
  absl::Status RunAllReduceGroup(const AllReduceBucket::Group& g);
  absl::Status RunAllReduceGroupUntraced(const AllReduceBucket::Group& g);

  // Reports instruction `index` to activity_ (if any); Aborted naming it once that is aborted.
  absl::Status Enter(int index);
  // `s` prefixed with instruction `index`, its source op and kind (plus `note`) and the processor.
  absl::Status InstructionError(int index, const absl::Status& s,
                                const std::string& note = "") const;
  // Gives buffer `b`'s storage (if any) to pool_ and empties it.
  void Recycle(int b);
  // Recycles internal buffer `b` now, or after the queued work that reads it.
  void RecycleWhenUnread(int b) {
    comm_.ReleaseWhenUnread(b, [this, b] { Recycle(b); });
  }
  // Recycles the buffers instruction `index` reads for the last time (but not `keep`).
  void RecycleDeadInputs(int index, int keep);
  // True when instruction `instruction` is the last reader of internal buffer `buffer`.
  bool Dead(int buffer, int instruction) const;
  // A copy of `t` in pooled storage (no fresh allocation, so no page faults in steady state).
  Tensor PooledCopy(const Tensor& t);
  void NoteLiveBytes();

  const v1::Program& program_;
  const std::vector<int64_t> coordinate_;
  const KernelRunner* const kernels_;
  Communicator* const communicator_;
  const KernelContext context_;
  const ExecutorOptions options_;
  bool overlap_;  // whether this run overlaps: options_.overlap_comm, or as choose_overlap chose
  StepActivity* activity_ = nullptr;
  StepTraceRecorder* trace_ = nullptr;

  Mesh mesh_;  // parsed from the program by Run
  // Every instruction decoded for this processor once its mesh and coordinate are checked
  // (RunSchedule): by every Run, or by the first with options_.fixed_program.
  std::vector<DecodedInstruction> decoded_;
  bool decoded_once_ = false;
  std::vector<std::optional<Tensor>> buffers_;
  int64_t peak_live_bytes_ = 0;  // ExecutorOptions::track_live_bytes
  VariableStore variables_;
  BufferPool pool_;  // storage of dead buffers, for later outputs
  // While Run(map&&) runs: its map, whose feeds Prepare moves instead of copying.
  std::map<std::string, Tensor>* movable_feeds_ = nullptr;
  std::array<int64_t, 4> fused_runs_ = {};  // by FusionKind: fused instructions whose kernel ran
  // By plan (plans_ entries, or this Run's plan): its fused instructions decoded for this processor.
  std::map<const StepPlan*, std::map<int, DecodedInstruction>> decoded_fusions_;
  std::map<std::vector<std::string>, StepPlan> plans_;  // by StepPlanKey
  const StepPlan* plan_ = nullptr;                      // the running step's
  std::map<const StepPlan*, OverlapChoice> overlap_choices_;  // choose_overlap: by plans_ entry
  std::vector<std::string> overlap_decisions_;                // not yet taken
  // The communication thread and its queue. Last: destroyed (its thread joined) first.
  CommunicationQueue comm_;
};

// A program input or output with its wire fields parsed and checked.
struct ProgramTensorInfo {
  std::string name;
  int buffer = -1;
  Shape shape;  // global
  DType dtype = DType::kFloat32;
  TensorLayout layout;
};

// Parses and validates `t` against `mesh` and the program's `num_buffers`: the buffer index is in
// range, the dtype, shape and layout are valid (CheckLayout). InvalidArgument naming `what` (e.g.
// "placeholder 'x'") otherwise.
absl::StatusOr<ProgramTensorInfo> ParseProgramTensor(const v1::ProgramTensor& t, const Mesh& mesh,
                                                     int num_buffers, const std::string& what);

// "collective ALLGATHER over [cols]", "local op 'einsum'", "local_slice of axis 1 over [rows]":
// how errors name an instruction's kind.
std::string DescribeInstructionKind(const v1::Instruction& instr, const Mesh& mesh);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_EXECUTOR_H_
