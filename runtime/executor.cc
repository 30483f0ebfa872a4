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
      overlap_(options.overlap_comm),
      variables_(program, coordinate_),
      comm_([this](int index, const absl::Status& s) { return InstructionError(index, s); }) {}

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

void Executor::DecodeProgram() {
  // Never per instruction run, and once per executor for a fixed program (else once per Run: the
  // program may have changed). The mesh and coordinate are valid now.
  if (options_.fixed_program && decoded_once_) return;
  decoded_.clear();
  for (const v1::Instruction& instr : program_.instructions()) {
    decoded_.push_back(DecodeInstruction(instr, mesh_, coordinate_));
  }
  decoded_once_ = true;
  decoded_fusions_.clear();  // the plans' fused instructions, decoded against the old mesh
}

absl::Status Executor::RunSchedule(const std::map<std::string, Tensor>& input_slices,
                                   const StepPlan& plan) {
  variables_.BeginStep();
  RETURN_IF_ERROR(Prepare(input_slices));
  DecodeProgram();
  plan_ = &plan;
  comm_.BeginStep(static_cast<int>(buffers_.size()), overlap_, activity_, trace_);
  peak_live_bytes_ = 0;
  absl::Status s = variables_.Load(&buffers_, [this](const v1::Instruction& init, Tensor* out) {
    // Once per variable, not per step: decoded here.
    return RunInstruction(init, DecodeInstruction(init, mesh_, coordinate_), out, /*index=*/-1);
  });
  NoteLiveBytes();
  if (s.ok()) s = RunInstructions();
  // Every collective issued precedes (in program order) whatever failed here: its error wins.
  absl::Status comm = comm_.Drain();
  if (!comm.ok()) s = comm;
  variables_.Store(/*step_succeeded=*/s.ok(), &buffers_);
  plan_ = nullptr;
  return s;
}

absl::Status Executor::RunInstructions() {
  const StepPlan& plan = *plan_;
  AllReduceBucket bucket;  // deferred allreduces
  const int count = program_.instructions_size();
  for (int i = 0; i <= count; ++i) {
    if (bucket.DueAt(i)) {
      RETURN_IF_ERROR(FlushAllReduces(&bucket));
      NoteLiveBytes();
    }
    if (i == count) break;
    if (!plan.runs[i]) continue;
    if (plan.guarded[i]) {
      ASSIGN_OR_RETURN(const bool skipped, SkipIfGuarded(i));
      if (skipped) continue;
    }
    if (plan.due[i] >= 0) {
      bucket.Add(i, plan.due[i], plan.deferred_bytes[i]);
      continue;
    }
    RETURN_IF_ERROR(Enter(i));
    if (comm_.failed()) break;  // Drain reports it
    if (program_.instructions(i).kind_case() == v1::Instruction::kCollective) {
      RETURN_IF_ERROR(IssueCollective(i));
      NoteLiveBytes();
      continue;
    }
    RETURN_IF_ERROR(RunLocalAt(i));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Executor::SkipIfGuarded(int index) {
  const v1::Instruction& guarded = program_.instructions(index);
  // The predicate may come from a collective in flight; the zeros overwrite the output.
  RETURN_IF_ERROR(comm_.WaitForBuffers(index, {guarded.predicate()}, {guarded.output()}));
  const int64_t skip_start = trace_ != nullptr ? trace_->Now() : 0;
  absl::StatusOr<bool> skipped = SkipGuarded(index);
  if (!skipped.ok()) return InstructionError(index, skipped.status());
  if (!*skipped) return false;
  if (trace_ != nullptr) {
    v1::TraceEvent e;
    e.set_kind(v1::TraceEvent::OP);
    e.set_thread(v1::TraceEvent::STEP);
    e.set_instruction(index);
    e.set_start_us(skip_start);
    e.set_dur_us(std::max<int64_t>(0, trace_->Now() - skip_start));
    e.set_skipped(true);
    trace_->Add(std::move(e));
  }
  NoteLiveBytes();
  RETURN_IF_ERROR(Enter(index));
  RecycleDeadInputs(index, guarded.output());
  return true;
}

absl::Status Executor::RunLocalAt(int index) {
  const v1::Instruction& instr = program_.instructions(index);
  // Wait for the collectives whose results this reads, or whose buffers it overwrites.
  RETURN_IF_ERROR(comm_.WaitForBuffers(index, plan_->reads[index], plan_->writes[index]));
  const int64_t op_start = trace_ != nullptr ? trace_->Now() : 0;
  Tensor out;
  if (plan_->fused_instructions.count(index) != 0) {
    RETURN_IF_ERROR(RunFused(index, &out));  // names the failing instruction itself
  } else {
    absl::Status s = RunInstructionAt(index, &out);
    if (!s.ok()) return InstructionError(index, s);
  }
  buffers_[instr.output()] = std::move(out);
  if (trace_ != nullptr) {
    trace_->AddSpan(v1::TraceEvent::OP, v1::TraceEvent::STEP, index, op_start);
  }
  NoteLiveBytes();
  // Free internal buffers nothing reads any more (fetchable tensors, inputs and variables stay).
  RecycleDeadInputs(index, instr.output());
  return absl::OkStatus();
}

void Executor::RecycleDeadInputs(int index, int keep) {
  for (int b : plan_->reads[index]) {
    if (Dead(b, index) && b != keep) RecycleWhenUnread(b);
  }
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
    names.push_back(input.name());
    RETURN_IF_ERROR(PlaceFeed(input, input_slices));
  }
  for (const auto& [name, tensor] : input_slices) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return Invalid(absl::StrCat("feed '", name, "' is not a placeholder of the program (",
                                  names.empty() ? "it has none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::PlaceFeed(const v1::ProgramTensor& input,
                                 const std::map<std::string, Tensor>& input_slices) {
  const std::string what = absl::StrCat("placeholder '", input.name(), "'");
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

Tensor Executor::PooledCopy(const Tensor& t) {
  Tensor copy = pool_.Take(t.dtype(), t.shape());
  std::memcpy(TensorData(&copy), TensorData(t), TensorBytes(t));
  return copy;
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

const Tensor* Executor::Buffer(int index) const {
  if (index < 0 || index >= static_cast<int>(buffers_.size())) return nullptr;
  if (buffers_[index].has_value()) return &*buffers_[index];
  return variables_.MovedInto(index);  // moved into a variable at the end of the step
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
