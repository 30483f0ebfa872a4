// The executor's local slices and collectives: collective instructions issued to the
// communication queue (runtime/communication_queue.h) at their place in the program, deferred
// allreduces in buckets, and how each collective calls the communicator on the buffers in place.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "runtime/blocked_chunks.h"
#include "runtime/executor.h"
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

// The checks of `c` over its (sorted, valid) mesh axes `axes` that need no data.
absl::Status CheckCollective(const v1::Collective& c, const std::vector<int>& axes) {
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
  if (c.kind() == v1::Collective::PERMUTE && axes.size() != 1) {
    return Invalid(absl::StrCat("PERMUTE takes exactly one mesh axis, not ", axes.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Executor::RunCollectiveInstruction(int index, bool queued) {
  const v1::Instruction& instr = program_.instructions(index);
  int64_t start = 0, bytes = 0;
  if (trace_ != nullptr) {
    start = trace_->Now();
    const int b = instr.inputs_size() > 0 ? instr.inputs(0) : -1;
    if (b >= 0 && b < static_cast<int>(buffers_.size()) && buffers_[b].has_value()) {
      bytes = TensorBytes(*buffers_[b]);  // before an allreduce takes the buffer over
    }
  }
  Tensor out;
  absl::Status s = RunInstructionAt(index, &out);
  if (!s.ok()) return InstructionError(index, s);
  buffers_[instr.output()] = std::move(out);
  if (trace_ != nullptr) {
    trace_->AddSpan(v1::TraceEvent::COLLECTIVE, comm_.CurrentThread(), index, start, bytes, 1);
  }
  for (int b : plan_->reads[index]) {
    if (!Dead(b, index) || b == instr.output()) continue;
    // Queued work runs after every earlier item; here, an earlier one may still read b.
    if (queued) {
      Recycle(b);
    } else {
      RecycleWhenUnread(b);
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::IssueCollective(int index) {
  const v1::Instruction& instr = program_.instructions(index);
  const std::vector<int> reads(instr.inputs().begin(), instr.inputs().end());
  std::vector<int> writes = {instr.output()};
  for (int b : reads) {
    if (Dead(b, index)) writes.push_back(b);  // an allreduce may take it over (RunCollective)
  }
  // A group of one calls no communicator (a Permute still does): a copy, here.
  const DecodedInstruction& d = decoded_[index];
  const bool local = instr.collective().kind() != v1::Collective::PERMUTE &&
                     d.axes_status.ok() && d.group_size == 1;
  if (local || !overlap_) {
    RETURN_IF_ERROR(comm_.WaitForBuffers(index, reads, writes));
    return RunCollectiveInstruction(index, /*queued=*/false);
  }
  return comm_.Issue(
      index, [this, index] { return RunCollectiveInstruction(index, /*queued=*/true); }, reads,
      writes);
}

absl::Status Executor::FlushAllReduces(AllReduceBucket* bucket) {
  std::vector<AllReduceBucket::Group> groups = bucket->Take([this](int i) {
    const v1::Instruction& instr = program_.instructions(i);
    // Sorted already; a malformed group is one of its own: RunInstruction reports it.
    return AllReduceBucket::Key{
        decoded_[i].axes_status.ok() ? decoded_[i].axes : std::vector<int>{-1 - i},
        instr.collective().reduce_op(), instr.dtype()};
  });
  for (AllReduceBucket::Group& g : groups) {
    RETURN_IF_ERROR(Enter(g.members.front()));
    std::vector<int> reads, writes;
    for (int i : g.members) {
      reads.push_back(program_.instructions(i).inputs(0));
      writes.push_back(program_.instructions(i).output());
    }
    const int first = g.members.front();
    RETURN_IF_ERROR(comm_.Issue(
        first, [this, g = std::move(g)] { return RunAllReduceGroup(g); }, reads, writes));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunAllReduceGroup(const AllReduceBucket::Group& g) {
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
  trace_->AddSpan(v1::TraceEvent::COLLECTIVE, comm_.CurrentThread(), first, start, bytes,
                  static_cast<int>(g.members.size()));
  return s;
}

absl::Status Executor::RunAllReduceGroupUntraced(const AllReduceBucket::Group& g) {
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
  }
  std::vector<Tensor*> together;
  for (Tensor& t : outs) together.push_back(&t);
  absl::Status s = AllReduceTogether(*communicator_, g.key.axes, g.key.op, together);
  if (!s.ok()) return fail(s);
  for (size_t k = 0; k < outs.size(); ++k) {
    buffers_[program_.instructions(g.members[k]).output()] = std::move(outs[k]);
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

absl::Status Executor::RunCollective(const v1::Collective& c, const DecodedInstruction& d,
                                     const Tensor& in, Tensor* out, Tensor* stealable) {
  RETURN_IF_ERROR(d.axes_status);
  RETURN_IF_ERROR(CheckCollective(c, d.axes));
  const std::vector<int>& axes = d.axes;
  const int g = static_cast<int>(d.group_size);
  const DType dtype = in.dtype();
  // Outputs come from pool_ uninitialised: every collective below writes all of them.
  switch (c.kind()) {
    case v1::Collective::ALLREDUCE: {
      if (g == 1) break;
      const int64_t n = in.num_elements();  // read before a move of `stealable` (which is `in`)
      // An input read for the last time is reduced in place; another (e.g. a pinned program input)
      // is only read, the result written straight into the output.
      if (stealable != nullptr) {
        *out = std::move(*stealable);
        return communicator_->AllReduce(axes, c.reduce_op(), dtype, TensorData(out), n);
      }
      *out = pool_.Take(dtype, in.shape());
      return communicator_->AllReduceInto(axes, c.reduce_op(), dtype, TensorData(in),
                                          TensorData(out), n);
    }
    case v1::Collective::ALLGATHER:
    case v1::Collective::ALLTOALL:
    case v1::Collective::REDUCE_SCATTER: {
      ASSIGN_OR_RETURN(const bool ran, RunBlockedCollective(c, axes, g, in, out));
      if (ran) return absl::OkStatus();
      break;
    }
    case v1::Collective::PERMUTE:
      // Same shape in and out: the lowering decides what the moved slice means.
      *out = pool_.Take(dtype, in.shape());  // Permute writes zeros where nothing arrives
      return communicator_->Permute(axes[0], c.shift(), c.wrap(), TensorData(in), TensorData(out),
                                    TensorBytes(in));
    case v1::Collective::BROADCAST: {
      if (c.root() < 0 || c.root() >= g) {
        return Invalid(
            absl::StrCat("BROADCAST root ", c.root(), " is not a rank of a group of ", g));
      }
      const int64_t bytes = TensorBytes(in);  // before a move of `stealable`
      *out = stealable != nullptr ? std::move(*stealable) : PooledCopy(in);
      if (g == 1) return absl::OkStatus();
      return communicator_->Broadcast(axes, c.root(), TensorData(out), bytes);
    }
    default:
      return Invalid(absl::StrCat("unknown collective kind ", static_cast<int>(c.kind())));
  }
  // A group of one: every collective is a copy.
  *out = stealable != nullptr ? std::move(*stealable) : PooledCopy(in);
  return absl::OkStatus();
}

absl::StatusOr<bool> Executor::RunBlockedCollective(const v1::Collective& c,
                                                    const std::vector<int>& axes, int g,
                                                    const Tensor& in, Tensor* out) {
  // The pieces along a split or concat axis lie blocked in the tensor's storage (blocked_chunks.h:
  // one run of each per combination of the dims before the axis), and the communicator reads or
  // writes them there, so nothing is packed or unpacked here.
  const DType dtype = in.dtype();
  const int64_t bytes = TensorBytes(in);
  const int split = c.split_axis(), concat = c.concat_axis();
  if (c.kind() == v1::Collective::ALLGATHER) {
    RETURN_IF_ERROR(CheckTensorAxis(in, concat, "concat_axis"));
    if (g == 1) return false;
    *out = pool_.Take(dtype, WithDimSize(in.shape(), concat, in.shape().dim(concat).size * g));
    RETURN_IF_ERROR(communicator_->AllGatherBlocked(axes, TensorData(in), bytes, TensorData(out),
                                                    BlocksBefore(in.shape(), concat)));
    return true;
  }
  RETURN_IF_ERROR(CheckTensorAxis(in, split, "split_axis"));
  if (c.kind() == v1::Collective::ALLTOALL) {
    RETURN_IF_ERROR(CheckTensorAxis(in, concat, "concat_axis"));
  }
  RETURN_IF_ERROR(CheckDivisible(in, split, g));
  if (g == 1) return false;
  const Shape piece = WithDimSize(in.shape(), split, in.shape().dim(split).size / g);
  if (c.kind() == v1::Collective::ALLTOALL) {
    *out = pool_.Take(dtype, WithDimSize(piece, concat, piece.dim(concat).size * g));
    RETURN_IF_ERROR(communicator_->AllToAllBlocked(axes, TensorData(in),
                                                   BlocksBefore(in.shape(), split),
                                                   TensorData(out), BlocksBefore(piece, concat),
                                                   bytes / g));
    return true;
  }
  *out = pool_.Take(dtype, piece);
  RETURN_IF_ERROR(communicator_->ReduceScatterBlocked(axes, c.reduce_op(), dtype, TensorData(in),
                                                      BlocksBefore(in.shape(), split),
                                                      in.num_elements() / g, TensorData(out)));
  return true;
}

}  // namespace meshrt
