#include "runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/ir/slicing.h"
#include "core/ops/ops.h"
#include "runtime/blocked_chunks.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::Status CheckTensorAxis(const Tensor& t, int axis, const char* role) {
  if (axis < 0 || axis >= t.shape().rank()) {
    return Invalid(
        absl::StrCat(role, " ", axis, " is out of range for input shape ", t.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::Status CheckDivisible(const Tensor& t, int axis, int64_t parts) {
  if (t.shape().dim(axis).size % parts != 0) {
    return Invalid(absl::StrCat("dim '", t.shape().dim(axis).name, "' of input shape ",
                                t.shape().ToString(), " does not split into ", parts,
                                " equal parts"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProgramTensorInfo> ParseProgramTensor(const v1::ProgramTensor& t, const Mesh& mesh,
                                                     int num_buffers, const std::string& what) {
  ProgramTensorInfo info;
  info.name = t.name();
  info.buffer = t.buffer();
  if (t.buffer() < 0 || t.buffer() >= num_buffers) {
    return Invalid(absl::StrCat(what, " is bound to buffer ", t.buffer(), " but the program has ",
                                num_buffers));
  }
  auto dtype = DTypeFromProto(t.dtype());
  if (!dtype.ok()) return Invalid(absl::StrCat(what, ": ", dtype.status().message()));
  info.dtype = *dtype;
  ASSIGN_OR_RETURN(info.shape, Shape::FromProto(t.shape(), what));
  info.layout = TensorLayout::FromProto(t.layout());
  // CheckLayout CHECKs what this rejects: a wrong number of entries or an axis out of range.
  if (static_cast<int>(info.layout.mesh_axis.size()) != info.shape.rank()) {
    return Invalid(absl::StrCat(what, ": layout has ", info.layout.mesh_axis.size(),
                                " entries but shape ", info.shape.ToString(), " has ",
                                info.shape.rank(), " dims"));
  }
  for (int a : info.layout.mesh_axis) {
    if (a != kReplicated && (a < 0 || a >= mesh.ndims())) {
      return Invalid(absl::StrCat(what, ": layout names mesh axis ", a, " but mesh ",
                                  mesh.ToString(), " has ", mesh.ndims(), " dims"));
    }
  }
  RETURN_IF_ERROR(CheckLayout(info.shape, info.layout, mesh, t.name(), "program"));
  return info;
}

std::string DescribeInstructionKind(const v1::Instruction& instr, const Mesh& mesh) {
  switch (instr.kind_case()) {
    case v1::Instruction::kLocal:
      return absl::StrCat("local op '", instr.local().type(), "'");
    case v1::Instruction::kLocalSlice:
      return absl::StrCat("local_slice of axis ", instr.local_slice().axis(), " over ",
                          MeshAxesString(mesh, {instr.local_slice().mesh_axis()}));
    case v1::Instruction::kCollective: {
      const v1::Collective& c = instr.collective();
      return absl::StrCat("collective ", v1::Collective::Kind_Name(c.kind()), " over ",
                          MeshAxesString(mesh, {c.mesh_axes().begin(), c.mesh_axes().end()}));
    }
    case v1::Instruction::KIND_NOT_SET:
      break;
  }
  return "instruction without a kind";
}

Executor::Executor(const v1::Program& program, std::vector<int64_t> coordinate,
                   const KernelRunner* kernels, Communicator* communicator,
                   KernelContext context, ExecutorOptions options)
    : program_(program),
      coordinate_(std::move(coordinate)),
      kernels_(kernels),
      communicator_(communicator),
      context_(context),
      options_(options),
      overlap_(options.overlap_comm) {}

absl::Status Executor::Run(const std::map<std::string, Tensor>& input_slices) {
  return RunPlan(input_slices, PlanFor(nullptr));
}

absl::Status Executor::Run(const std::map<std::string, Tensor>& input_slices,
                           const std::vector<std::string>& fetches) {
  return RunPlan(input_slices, PlanFor(&fetches));
}

absl::Status Executor::Run(std::map<std::string, Tensor>&& input_slices) {
  movable_feeds_ = &input_slices;
  absl::Status s = RunPlan(input_slices, PlanFor(nullptr));
  movable_feeds_ = nullptr;
  return s;
}

absl::Status Executor::Run(std::map<std::string, Tensor>&& input_slices,
                           const std::vector<std::string>& fetches) {
  movable_feeds_ = &input_slices;
  absl::Status s = RunPlan(input_slices, PlanFor(&fetches));
  movable_feeds_ = nullptr;
  return s;
}

absl::Status Executor::RunPlan(const std::map<std::string, Tensor>& input_slices,
                               const StepPlan& plan) {
  if (!options_.choose_overlap || !options_.fixed_program || options_.track_live_bytes) {
    return RunSchedule(input_slices, plan);
  }
  OverlapChoice& choice = overlap_choices_[&plan];  // plans_ entries never move or go
  overlap_ = choice.NextOverlap();  // the communication thread is idle between runs
  if (choice.decided()) return RunSchedule(input_slices, plan);
  const absl::Time start = absl::Now();
  absl::Status s = RunSchedule(input_slices, plan);
  if (s.ok() && choice.Record(overlap_, absl::ToDoubleSeconds(absl::Now() - start))) {
    overlap_decisions_.push_back(choice.Summary());
  }
  return s;
}

std::vector<std::string> Executor::TakeOverlapDecisions() {
  std::vector<std::string> taken;
  taken.swap(overlap_decisions_);
  return taken;
}

absl::Status Executor::RunSchedule(const std::map<std::string, Tensor>& input_slices,
                                   const StepPlan& plan) {
  state_buffers_.clear();
  step_thread_ = std::this_thread::get_id();
  RETURN_IF_ERROR(Prepare(input_slices));
  // Never per instruction run, and once per executor for a fixed program (else once per Run: the
  // program may have changed). The mesh and coordinate are valid now.
  if (!options_.fixed_program || !decoded_once_) {
    decoded_.clear();
    for (const v1::Instruction& instr : program_.instructions()) {
      decoded_.push_back(DecodeInstruction(instr, mesh_, coordinate_));
    }
    decoded_once_ = true;
    decoded_fusions_.clear();  // the plans' fused instructions, decoded against the old mesh
  }
  plan_ = &plan;
  last_write_.assign(buffers_.size(), -1);
  last_read_.assign(buffers_.size(), -1);
  item_instruction_.clear();
  step_first_item_ = issued_;
  peak_live_bytes_ = 0;
  absl::Status s = LoadVariables();
  NoteLiveBytes();
  std::vector<int> pending;  // deferred allreduces
  const int count = program_.instructions_size();
  int next_due = count + 1;  // the earliest due position among `pending`
  int64_t pending_bytes = 0;
  for (int i = 0; s.ok() && i <= count; ++i) {
    if (next_due <= i) {
      s = FlushAllReduces(&pending);
      NoteLiveBytes();
      next_due = count + 1;
      pending_bytes = 0;
    }
    if (!s.ok() || i == count) break;
    if (!plan.runs[i]) continue;
    if (plan.guarded[i]) {
      const v1::Instruction& guarded = program_.instructions(i);
      // The predicate may come from a collective in flight; the zeros overwrite the output.
      s = WaitForBuffers(i, {guarded.predicate()}, {guarded.output()});
      if (!s.ok()) break;
      const int64_t skip_start = trace_ != nullptr ? trace_->Now() : 0;
      absl::StatusOr<bool> skipped = SkipGuarded(i);
      if (!skipped.ok()) {
        s = InstructionError(i, skipped.status());
        break;
      }
      if (*skipped) {
        if (trace_ != nullptr) {
          v1::TraceEvent e;
          e.set_kind(v1::TraceEvent::OP);
          e.set_thread(v1::TraceEvent::STEP);
          e.set_instruction(i);
          e.set_start_us(skip_start);
          e.set_dur_us(std::max<int64_t>(0, trace_->Now() - skip_start));
          e.set_skipped(true);
          trace_->Add(std::move(e));
        }
        NoteLiveBytes();
        s = Enter(i);
        if (!s.ok()) break;
        for (int b : plan.reads[i]) {
          if (Dead(b, i) && b != guarded.output()) RecycleWhenUnread(b);
        }
        continue;
      }
    }
    if (plan.due[i] >= 0) {
      pending.push_back(i);
      next_due = std::min(next_due, plan.due[i]);
      pending_bytes += plan.deferred_bytes[i];
      if (pending_bytes >= kBucketBytes) next_due = std::min(next_due, i + 1);  // a full bucket
      continue;
    }
    s = Enter(i);
    if (!s.ok()) break;
    if (comm_failed_.load(std::memory_order_relaxed)) break;  // DrainComm reports it
    const v1::Instruction& instr = program_.instructions(i);
    if (instr.kind_case() == v1::Instruction::kCollective) {
      s = IssueCollective(i);
      NoteLiveBytes();
      continue;
    }
    // Wait for the collectives whose results this reads, or whose buffers it overwrites.
    s = WaitForBuffers(i, plan.reads[i], plan.writes[i]);
    if (!s.ok()) break;
    const int64_t op_start = trace_ != nullptr ? trace_->Now() : 0;
    Tensor out;
    auto fused = plan.fused.find(i);
    if (fused == plan.fused.end()) {
      s = RunInstructionAt(i, &out);
      if (!s.ok()) s = InstructionError(i, s);
    } else {
      s = RunFused(i, &out);  // names the failing instruction itself
    }
    if (!s.ok()) break;
    buffers_[instr.output()] = std::move(out);
    if (trace_ != nullptr) trace_->AddSpan(v1::TraceEvent::OP, v1::TraceEvent::STEP, i, op_start);
    NoteLiveBytes();
    // Free internal buffers nothing reads any more (fetchable tensors, inputs and variables stay).
    for (int b : plan.reads[i]) {
      if (Dead(b, i) && b != instr.output()) RecycleWhenUnread(b);
    }
  }
  // Every collective issued precedes (in program order) whatever failed here: its error wins.
  absl::Status comm = DrainComm();
  if (!comm.ok()) s = comm;
  StoreVariables(/*step_succeeded=*/s.ok());
  plan_ = nullptr;
  return s;
}

absl::StatusOr<bool> Executor::SkipGuarded(int index) {
  const v1::Instruction& instr = program_.instructions(index);
  const int p = instr.predicate();
  if (p < 0 || p >= program_.num_buffers() || !buffers_[p].has_value() ||
      buffers_[p]->num_elements() != 1) {
    return Invalid(absl::StrCat("its predicate, buffer ", p, ", is ",
                                p < 0 || p >= program_.num_buffers() ? "out of range"
                                : !buffers_[p].has_value()           ? "not written yet"
                                                                     : "not a scalar"));
  }
  const Tensor& value = *buffers_[p];
  const bool zero =
      value.dtype() == DType::kFloat32 ? value.f32()[0] == 0.0f : value.i32()[0] == 0;
  if (!zero) return false;
  const DecodedInstruction& d = decoded_[index];
  RETURN_IF_ERROR(d.parse_status);
  if (instr.output() < 0 || instr.output() >= program_.num_buffers()) {
    return Invalid(absl::StrCat("writes buffer ", instr.output(), " but the program has ",
                                program_.num_buffers()));
  }
  // Zeros in recycled storage: a fresh allocation of a whole gradient would page-fault every step.
  Tensor zeros = pool_.Take(d.dtype, d.slice_shape);
  std::memset(TensorData(&zeros), 0, static_cast<size_t>(TensorBytes(zeros)));
  buffers_[instr.output()] = std::move(zeros);
  return true;
}

void Executor::NoteLiveBytes() {
  if (!options_.track_live_bytes || overlap_) return;
  int64_t live = 0;
  for (const std::optional<Tensor>& b : buffers_) {
    if (b.has_value()) live += TensorBytes(*b);
  }
  peak_live_bytes_ = std::max(peak_live_bytes_, live);
}

void Executor::Recycle(int b) {
  if (!buffers_[b].has_value()) return;
  pool_.Release(*std::move(buffers_[b]));
  buffers_[b].reset();
}

const StepPlan& Executor::PlanFor(const std::vector<std::string>* fetches) {
  if (!options_.fixed_program) plans_.clear();  // the program may have changed since the last Run
  std::vector<std::string> key = StepPlanKey(fetches);
  auto cached = plans_.find(key);
  if (cached != plans_.end()) return cached->second;
  return plans_.emplace(std::move(key), PlanStep(program_, fetches)).first->second;
}

absl::Status Executor::RunUnfused(int s_index, const FusedUpdate& f, Tensor* out) {
  for (int i : f.ops()) {
    if (i < 0) continue;
    const v1::Instruction& instr = program_.instructions(i);
    Tensor t;
    absl::Status st = RunInstructionAt(i, &t);
    if (!st.ok()) return InstructionError(i, st);
    buffers_[instr.output()] = std::move(t);
  }
  absl::Status st = RunInstructionAt(s_index, out);
  for (int i : f.ops()) {
    if (i >= 0) Recycle(program_.instructions(i).output());
  }
  return st.ok() ? st : InstructionError(s_index, st);
}

absl::Status Executor::RunFused(int s_index, Tensor* out) {
  const FusedUpdate& group = plan_->fused.at(s_index);
  const absl::Status s = RunInstruction(plan_->fused_instructions.at(s_index),
                                        DecodedFusions().at(s_index), out, s_index);
  if (s.ok()) {
    ++fused_runs_[static_cast<int>(FusionKindOf(group))];
    return s;
  }
  pool_.Release(std::move(*out));
  *out = Tensor();
  return RunUnfused(s_index, group, out);
}

const std::map<int, DecodedInstruction>& Executor::DecodedFusions() {
  auto [it, added] = decoded_fusions_.try_emplace(plan_);
  if (added) {
    for (const auto& [s, instr] : plan_->fused_instructions) {
      it->second.emplace(s, DecodeInstruction(instr, mesh_, coordinate_));
    }
  }
  return it->second;
}

int64_t Executor::fused_updates() const {
  return fused_runs_[static_cast<int>(FusionKind::kScaledEinsumUpdate)] +
         fused_runs_[static_cast<int>(FusionKind::kScaledUpdate)] +
         fused_runs_[static_cast<int>(FusionKind::kMaskedProduct)];
}

int64_t Executor::fused_softmaxes() const {
  return fused_runs_[static_cast<int>(FusionKind::kAddSoftmax)];
}

bool Executor::Dead(int buffer, int instruction) const {
  return plan_ != nullptr && plan_->Dead(buffer, instruction);
}

absl::Status Executor::LoadVariables() {
  const int n = program_.num_buffers();
  for (const v1::ProgramVariable& var : program_.variables()) {
    if (var.buffer() < 0 || var.buffer() >= n || var.update_buffer() < -1 ||
        var.update_buffer() >= n) {
      return Invalid(absl::StrCat("variable '", var.name(), "' names buffers ", var.buffer(), " and ",
                                  var.update_buffer(), " but the program has ", n));
    }
    auto it = variables_.find(var.name());
    if (it != variables_.end()) {
      buffers_[var.buffer()] = std::move(it->second);
      variables_.erase(it);
      continue;
    }
    Tensor init;
    // Once per variable, not per step: decoded here.
    absl::Status s = RunInstruction(var.initializer(),
                                    DecodeInstruction(var.initializer(), mesh_, coordinate_),
                                    &init, /*index=*/-1);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("initializing variable '", var.name(),
                                                 "' at processor ", CoordinateString(coordinate_),
                                                 ": ", s.message()));
    }
    buffers_[var.buffer()] = std::move(init);
  }
  return absl::OkStatus();
}

void Executor::StoreVariables(bool step_succeeded) {
  // Where each variable's next value is; a buffer feeding several variables is copied for all
  // but the last (e.g. assign(b, a) with a unchanged).
  std::map<int, int> uses;
  auto source = [&](const v1::ProgramVariable& var) {
    return step_succeeded && var.update_buffer() >= 0 ? var.update_buffer() : var.buffer();
  };
  for (const v1::ProgramVariable& var : program_.variables()) ++uses[source(var)];
  for (const v1::ProgramVariable& var : program_.variables()) {
    const int b = source(var);
    if (b < 0 || b >= static_cast<int>(buffers_.size()) || !buffers_[b].has_value()) {
      continue;  // a malformed program failed before loading it; the slice stays where it is
    }
    if (--uses[b] == 0) {
      variables_[var.name()] = std::move(*buffers_[b]);
      buffers_[b].reset();
      state_buffers_[b] = var.name();  // fetches of buffer b read the variable
    } else {
      variables_[var.name()] = *buffers_[b];
    }
  }
}

absl::Status Executor::SetVariable(const std::string& name, Tensor slice) {
  for (const v1::ProgramVariable& var : program_.variables()) {
    if (var.name() != name) continue;
    auto mesh = Mesh::FromProto(program_.mesh());
    if (!mesh.ok()) return Invalid(absl::StrCat("program mesh: ", mesh.status().message()));
    ASSIGN_OR_RETURN(const Shape global, Shape::FromProto(var.shape(), name));
    const Shape want = SliceShape(global, TensorLayout::FromProto(var.layout()), *mesh);
    auto dtype = DTypeFromProto(var.dtype());
    if (slice.shape() != want || !dtype.ok() || slice.dtype() != *dtype) {
      return Invalid(absl::StrCat("variable '", name, "' at processor ",
                                  CoordinateString(coordinate_), " takes a ",
                                  dtype.ok() ? DTypeName(*dtype) : "?", " slice of shape ",
                                  want.ToString(), ", not ", DTypeName(slice.dtype()), " ",
                                  slice.shape().ToString()));
    }
    variables_[name] = std::move(slice);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("'", name, "' is not a variable of the program"));
}

absl::Status Executor::Prepare(const std::map<std::string, Tensor>& input_slices) {
  pool_.NewStep();
  for (int b = 0; b < static_cast<int>(buffers_.size()); ++b) Recycle(b);  // the last step's
  buffers_.clear();
  auto mesh = Mesh::FromProto(program_.mesh());
  if (!mesh.ok()) return Invalid(absl::StrCat("program mesh: ", mesh.status().message()));
  mesh_ = *std::move(mesh);
  bool coord_ok = static_cast<int>(coordinate_.size()) == mesh_.ndims();
  for (int d = 0; coord_ok && d < mesh_.ndims(); ++d) {
    coord_ok = coordinate_[d] >= 0 && coordinate_[d] < mesh_.size(d);
  }
  if (!coord_ok) {
    return Invalid(absl::StrCat("processor coordinate ", CoordinateString(coordinate_),
                                " is not in mesh ", mesh_.ToString()));
  }
  if (program_.num_buffers() < 0) {
    return Invalid(absl::StrCat("program has ", program_.num_buffers(), " buffers"));
  }
  buffers_.assign(program_.num_buffers(), std::nullopt);

  std::vector<std::string> names;
  for (const v1::ProgramTensor& input : program_.inputs()) {
    const std::string what = absl::StrCat("placeholder '", input.name(), "'");
    names.push_back(input.name());
    ASSIGN_OR_RETURN(const ProgramTensorInfo info,
                     ParseProgramTensor(input, mesh_, program_.num_buffers(), what));
    const Shape slice_shape = SliceShape(info.shape, info.layout, mesh_);

    auto feed = input_slices.find(input.name());
    if (feed == input_slices.end()) {
      return Invalid(absl::StrCat("missing feed for ", what, ": expected this processor's slice (",
                                  DTypeName(info.dtype), " ", slice_shape.ToString(),
                                  " of global shape ", info.shape.ToString(), ")"));
    }
    if (feed->second.dtype() != info.dtype) {
      return Invalid(absl::StrCat("feed for ", what, " is ", DTypeName(feed->second.dtype()),
                                  " but the program expects ", DTypeName(info.dtype)));
    }
    if (feed->second.shape() != slice_shape) {
      return Invalid(absl::StrCat("feed for ", what, " has shape ", feed->second.shape().ToString(),
                                  " but the slice at processor ", CoordinateString(coordinate_),
                                  " must be ", slice_shape.ToString(), " (global shape ",
                                  info.shape.ToString(), ", layout ",
                                  info.layout.ToString(info.shape, mesh_), ")"));
    }
    if (movable_feeds_ == &input_slices) {
      buffers_[input.buffer()] = std::move(movable_feeds_->at(input.name()));
    } else {
      buffers_[input.buffer()] = PooledCopy(feed->second);  // recycled storage: no page faults
    }
  }
  for (const auto& [name, tensor] : input_slices) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return Invalid(absl::StrCat("feed '", name, "' is not a placeholder of the program (",
                                  names.empty() ? "it has none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::RunInstructionAt(int index, Tensor* out) {
  return RunInstruction(program_.instructions(index), decoded_[index], out, index);
}

absl::Status Executor::RunInstruction(const v1::Instruction& instr, const DecodedInstruction& d,
                                      Tensor* out, int index) {
  if (instr.output() < 0 || instr.output() >= program_.num_buffers()) {
    return Invalid(absl::StrCat("writes buffer ", instr.output(), " but the program has ",
                                program_.num_buffers()));
  }
  std::vector<const Tensor*> inputs;
  for (int b : instr.inputs()) {
    if (b < 0 || b >= program_.num_buffers() || !buffers_[b].has_value()) {
      return Invalid(
          absl::StrCat("reads buffer ", b, ", which is ",
                       b < 0 || b >= program_.num_buffers() ? "out of range" : "not written yet"));
    }
    inputs.push_back(&*buffers_[b]);
  }
  RETURN_IF_ERROR(d.parse_status);
  const DType dtype = d.dtype;
  const Shape& shape = d.slice_shape;

  if (instr.kind_case() == v1::Instruction::kLocal) {
    if (kernels_ == nullptr) return absl::FailedPreconditionError("the executor has no kernels");
    *out = pool_.Take(dtype, shape);  // uninitialized: the kernel writes every element
    RETURN_IF_ERROR(d.prepared_status);  // a needs_slice_begin op's global shape or layout
    RETURN_IF_ERROR(kernels_->Run(d.op(instr), inputs, out, context_));
  } else if (instr.kind_case() == v1::Instruction::KIND_NOT_SET) {
    return Invalid("the instruction has no kind");
  } else {
    if (inputs.size() != 1) {
      return Invalid(absl::StrCat("takes one input buffer, not ", inputs.size()));
    }
    if (inputs[0]->dtype() != dtype) {
      return Invalid(absl::StrCat("input is ", DTypeName(inputs[0]->dtype()),
                                  " but the instruction is ", DTypeName(dtype)));
    }
    if (instr.kind_case() == v1::Instruction::kLocalSlice) {
      RETURN_IF_ERROR(RunLocalSlice(instr.local_slice(), *inputs[0], out));
    } else {
      // An input read for the last time may be reduced in place instead of copied first.
      const int b = instr.inputs(0);
      Tensor* stealable = index >= 0 && Dead(b, index) ? &*buffers_[b] : nullptr;
      RETURN_IF_ERROR(RunCollective(instr.collective(), d, *inputs[0], out, stealable));
    }
  }
  if (out->dtype() != dtype || out->shape() != shape) {
    return Invalid(absl::StrCat("produced ", DTypeName(out->dtype()), " ", out->shape().ToString(),
                                " but the program declares ", DTypeName(dtype), " ",
                                shape.ToString()));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunLocalSlice(const v1::LocalSlice& slice, const Tensor& in, Tensor* out) {
  const int m = slice.mesh_axis();
  if (m < 0 || m >= mesh_.ndims()) {
    return Invalid(absl::StrCat("mesh axis ", m, " is out of range for mesh ", mesh_.ToString()));
  }
  RETURN_IF_ERROR(CheckTensorAxis(in, slice.axis(), "axis"));
  RETURN_IF_ERROR(CheckDivisible(in, slice.axis(), mesh_.size(m)));
  const int64_t parts = mesh_.size(m);
  *out = pool_.Take(in.dtype(), WithDimSize(in.shape(), slice.axis(),
                                            in.shape().dim(slice.axis()).size / parts));
  SliceAlongAxisInto(in, slice.axis(), parts, coordinate_[m], TensorData(out));
  return absl::OkStatus();
}

Tensor Executor::PooledCopy(const Tensor& t) {
  Tensor copy = pool_.Take(t.dtype(), t.shape());
  std::memcpy(TensorData(&copy), TensorData(t), TensorBytes(t));
  return copy;
}

absl::Status Executor::RunCollective(const v1::Collective& c, const DecodedInstruction& d,
                                     const Tensor& in, Tensor* out, Tensor* stealable) {
  RETURN_IF_ERROR(d.axes_status);
  const std::vector<int>& axes = d.axes;
  const int g = static_cast<int>(d.group_size);
  const bool reduces =
      c.kind() == v1::Collective::ALLREDUCE || c.kind() == v1::Collective::REDUCE_SCATTER;
  if (reduces && !IsReduceOp(c.reduce_op())) {
    return Invalid(absl::StrCat("invalid reduce op ", v1::ReduceOp_Name(c.reduce_op())));
  }
  if (c.kind() != v1::Collective::ALLREDUCE && c.kind() != v1::Collective::BROADCAST &&
      axes.size() > 1) {
    return Invalid(absl::StrCat(v1::Collective::Kind_Name(c.kind()),
                                " takes at most one mesh axis, not ", axes.size()));
  }
  const DType dtype = in.dtype();
  const int64_t n = in.num_elements();
  const int64_t bytes = TensorBytes(in);
  // Outputs come from pool_ uninitialised: every collective below writes all of them. The pieces
  // along a split or concat axis lie blocked in the tensor's storage (blocked_chunks.h: one run of
  // each per combination of the dims before the axis), and the communicator reads or writes them
  // there, so nothing is packed or unpacked here.
  switch (c.kind()) {
    case v1::Collective::ALLREDUCE:
      if (g == 1) break;
      // An input read for the last time is reduced in place; another (e.g. a pinned program input)
      // is only read, the result written straight into the output.
      if (stealable != nullptr) {
        *out = std::move(*stealable);  // n, dtype and bytes were read above, before the move
        return communicator_->AllReduce(axes, c.reduce_op(), dtype, TensorData(out), n);
      }
      *out = pool_.Take(dtype, in.shape());
      return communicator_->AllReduceInto(axes, c.reduce_op(), dtype, TensorData(in),
                                          TensorData(out), n);
    case v1::Collective::ALLGATHER: {
      RETURN_IF_ERROR(CheckTensorAxis(in, c.concat_axis(), "concat_axis"));
      if (g == 1) break;
      const int axis = c.concat_axis();
      *out = pool_.Take(dtype, WithDimSize(in.shape(), axis, in.shape().dim(axis).size * g));
      return communicator_->AllGatherBlocked(axes, TensorData(in), bytes, TensorData(out),
                                             BlocksBefore(in.shape(), axis));
    }
    case v1::Collective::ALLTOALL: {
      RETURN_IF_ERROR(CheckTensorAxis(in, c.split_axis(), "split_axis"));
      RETURN_IF_ERROR(CheckTensorAxis(in, c.concat_axis(), "concat_axis"));
      RETURN_IF_ERROR(CheckDivisible(in, c.split_axis(), g));
      if (g == 1) break;
      const int split = c.split_axis(), concat = c.concat_axis();
      const Shape piece = WithDimSize(in.shape(), split, in.shape().dim(split).size / g);
      *out = pool_.Take(dtype, WithDimSize(piece, concat, piece.dim(concat).size * g));
      return communicator_->AllToAllBlocked(axes, TensorData(in), BlocksBefore(in.shape(), split),
                                            TensorData(out), BlocksBefore(piece, concat),
                                            bytes / g);
    }
    case v1::Collective::REDUCE_SCATTER: {
      RETURN_IF_ERROR(CheckTensorAxis(in, c.split_axis(), "split_axis"));
      RETURN_IF_ERROR(CheckDivisible(in, c.split_axis(), g));
      if (g == 1) break;
      const int split = c.split_axis();
      *out = pool_.Take(dtype, WithDimSize(in.shape(), split, in.shape().dim(split).size / g));
      return communicator_->ReduceScatterBlocked(axes, c.reduce_op(), dtype, TensorData(in),
                                                 BlocksBefore(in.shape(), split), n / g,
                                                 TensorData(out));
    }
    case v1::Collective::PERMUTE: {
      // Same shape in and out: the lowering decides what the moved slice means.
      if (axes.size() != 1) {
        return Invalid(absl::StrCat("PERMUTE takes exactly one mesh axis, not ", axes.size()));
      }
      *out = pool_.Take(dtype, in.shape());  // Permute writes zeros where nothing arrives
      return communicator_->Permute(axes[0], c.shift(), c.wrap(), TensorData(in), TensorData(out),
                                    bytes);
    }
    case v1::Collective::BROADCAST:
      if (c.root() < 0 || c.root() >= g) {
        return Invalid(
            absl::StrCat("BROADCAST root ", c.root(), " is not a rank of a group of ", g));
      }
      *out = stealable != nullptr ? std::move(*stealable) : PooledCopy(in);
      if (g == 1) return absl::OkStatus();
      return communicator_->Broadcast(axes, c.root(), TensorData(out), bytes);
    default:
      return Invalid(absl::StrCat("unknown collective kind ", static_cast<int>(c.kind())));
  }
  // A group of one: every collective is a copy.
  *out = stealable != nullptr ? std::move(*stealable) : PooledCopy(in);
  return absl::OkStatus();
}

absl::Status Executor::Enter(int index) {
  if (activity_ == nullptr || activity_->Enter(index)) return absl::OkStatus();
  return InstructionError(index, absl::AbortedError("the step was aborted before this instruction "
                                                    "(its session is being closed)"));
}

absl::Status Executor::InstructionError(int index, const absl::Status& s,
                                        const std::string& note) const {
  const v1::Instruction& instr = program_.instructions(index);
  return absl::Status(s.code(),
                      absl::StrCat("instruction ", index, " (source_op '", instr.source_op(), "', ",
                                   DescribeInstructionKind(instr, mesh_), note, ") at processor ",
                                   CoordinateString(coordinate_), ": ", s.message()));
}

absl::Status Executor::FlushAllReduces(std::vector<int>* pending) {
  // Groups by (sorted mesh axes, op, dtype), in the order their first members appear.
  std::vector<AllReduceGroup> groups;
  for (int i : *pending) {
    const v1::Instruction& instr = program_.instructions(i);
    // Sorted already; a malformed group is one of its own: RunInstruction reports it.
    const std::vector<int> axes =
        decoded_[i].axes_status.ok() ? decoded_[i].axes : std::vector<int>{-1 - i};
    auto g = std::find_if(groups.begin(), groups.end(), [&](const AllReduceGroup& x) {
      return x.axes == axes && x.op == instr.collective().reduce_op() &&
             x.dtype == instr.dtype();
    });
    if (g == groups.end()) {
      groups.push_back({axes, instr.collective().reduce_op(), instr.dtype(), {}});
      g = groups.end() - 1;
    }
    g->members.push_back(i);
  }
  pending->clear();
  for (AllReduceGroup& g : groups) {
    RETURN_IF_ERROR(Enter(g.members.front()));
    std::vector<int> reads, writes;
    for (int i : g.members) {
      reads.push_back(program_.instructions(i).inputs(0));
      writes.push_back(program_.instructions(i).output());
    }
    const int first = g.members.front();
    RETURN_IF_ERROR(Issue(
        first, [this, g = std::move(g)] { return RunAllReduceGroup(g); }, reads, writes));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunAllReduceGroup(const AllReduceGroup& g) {
  const int first = g.members.front();
  if (trace_ == nullptr) return RunAllReduceGroupUntraced(g);
  const int64_t start = trace_->Now();
  int64_t bytes = 0;
  for (int i : g.members) {
    const int b = program_.instructions(i).inputs(0);
    if (b >= 0 && b < static_cast<int>(buffers_.size()) && buffers_[b].has_value()) {
      bytes += TensorBytes(*buffers_[b]);
    }
  }
  absl::Status s = RunAllReduceGroupUntraced(g);
  trace_->AddSpan(v1::TraceEvent::COLLECTIVE, TraceThread(), first, start, bytes,
                  static_cast<int>(g.members.size()));
  return s;
}

absl::Status Executor::RunAllReduceGroupUntraced(const AllReduceGroup& g) {
  const int first = g.members.front();
  auto fail = [&](const absl::Status& s) {
    return InstructionError(
        first, s,
        g.members.size() > 1
            ? absl::StrCat(", fused with ", g.members.size() - 1, " later allreduce(s)")
            : "");
  };
  if (g.members.size() == 1) {  // nothing to fuse: the plain path
    const v1::Instruction& instr = program_.instructions(first);
    Tensor out;
    absl::Status s = RunInstructionAt(first, &out);
    if (!s.ok()) return fail(s);
    buffers_[instr.output()] = std::move(out);
    return absl::OkStatus();
  }
  // Pack, one allreduce, unpack. Each member's input was checked against its declaration.
  std::vector<Tensor> outs;
  int64_t total = 0;
  for (int i : g.members) {
    const v1::Instruction& instr = program_.instructions(i);
    const int b = instr.inputs(0);
    if (!buffers_[b].has_value()) {
      return fail(Invalid(absl::StrCat("reads buffer ", b, ", which is not written yet")));
    }
    const DecodedInstruction& d = decoded_[i];
    if (!d.parse_status.ok() || buffers_[b]->dtype() != d.dtype ||
        buffers_[b]->shape() != d.slice_shape) {
      return fail(Invalid(absl::StrCat("instruction ", i, " (source_op '", instr.source_op(),
                                       "') reads ", buffers_[b]->shape().ToString(),
                                       " but declares another slice shape or dtype")));
    }
    outs.push_back(*buffers_[b]);
    total += TensorBytes(outs.back());
  }
  std::vector<char> packed(total);
  int64_t at = 0;
  for (const Tensor& t : outs) {
    std::memcpy(packed.data() + at, TensorData(t), TensorBytes(t));
    at += TensorBytes(t);
  }
  const DType dtype = outs.front().dtype();
  const int64_t elements = total / (dtype == DType::kFloat32 ? sizeof(float) : sizeof(int32_t));
  absl::Status s = communicator_->AllReduce(g.axes, g.op, dtype, packed.data(), elements);
  if (!s.ok()) return fail(s);
  at = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    std::memcpy(TensorData(&outs[k]), packed.data() + at, TensorBytes(outs[k]));
    at += TensorBytes(outs[k]);
    buffers_[program_.instructions(g.members[k]).output()] = std::move(outs[k]);
  }
  return absl::OkStatus();
}

const Tensor* Executor::Buffer(int index) const {
  if (index < 0 || index >= static_cast<int>(buffers_.size())) return nullptr;
  if (buffers_[index].has_value()) return &*buffers_[index];
  auto state = state_buffers_.find(index);  // moved into a variable at the end of the step
  if (state == state_buffers_.end()) return nullptr;
  auto var = variables_.find(state->second);
  return var == variables_.end() ? nullptr : &var->second;
}

absl::StatusOr<Tensor> Executor::OutputSlice(const std::string& name) const {
  for (const v1::ProgramTensor& output : program_.outputs()) {
    if (output.name() != name) continue;
    const Tensor* t = Buffer(output.buffer());
    if (t == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "output '", name, "' (buffer ", output.buffer(), ") has not been computed; call Run"));
    }
    return *t;
  }
  return absl::NotFoundError(absl::StrCat("'", name, "' is not an output of the program"));
}

absl::StatusOr<std::map<std::string, Tensor>> Executor::TakeOutputSlices(
    const std::vector<std::string>& names, const StorageFn& storage) {
  std::map<std::string, int> buffer_of;
  std::map<int, int> names_of;  // how many distinct fetched names read each buffer
  for (const std::string& name : names) {
    if (buffer_of.count(name)) continue;
    int buffer = -1;
    for (const v1::ProgramTensor& output : program_.outputs()) {
      if (output.name() == name) buffer = output.buffer();
    }
    buffer_of[name] = buffer;
    if (buffer >= 0) ++names_of[buffer];
  }
  std::map<std::string, Tensor> out;
  for (const std::string& name : names) {
    if (out.count(name)) continue;
    const int b = buffer_of[name];
    if (b >= 0 && b < static_cast<int>(buffers_.size()) && buffers_[b].has_value() &&
        names_of[b] == 1) {
      out.emplace(name, *std::move(buffers_[b]));
      buffers_[b].reset();
      continue;
    }
    const Tensor* t = Buffer(b);
    if (t == nullptr) {
      ASSIGN_OR_RETURN(Tensor error_or_copy, OutputSlice(name));  // says why
      out.emplace(name, std::move(error_or_copy));
      continue;
    }
    Tensor copy = storage(t->dtype(), t->shape());
    std::memcpy(TensorData(&copy), TensorData(*t), static_cast<size_t>(TensorBytes(*t)));
    out.emplace(name, std::move(copy));
  }
  return out;
}

}  // namespace meshrt
