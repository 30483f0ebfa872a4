#include "core/ir/step_fusion.h"

#include <algorithm>

#include "core/ir/shape.h"

namespace meshrt {
namespace {

bool SameSliceShape(const v1::Instruction& a, const v1::Instruction& b) {
  auto x = Shape::FromProto(a.slice_shape(), "slice_shape");
  auto y = Shape::FromProto(b.slice_shape(), "slice_shape");
  return x.ok() && y.ok() && *x == *y;
}

// What the matchers ask of a program and its step: who writes and reads each buffer.
class Matcher {
 public:
  Matcher(const v1::Program& program, const std::vector<bool>& pinned,
          const std::vector<bool>& runs)
      : program_(program),
        pinned_(pinned),
        runs_(runs),
        n_(std::max(program.num_buffers(), 0)),
        readers_(n_, 0),
        writer_(n_, -1),
        writes_(n_) {
    for (int i = 0; i < program.instructions_size(); ++i) {
      if (!runs[i]) continue;
      const v1::Instruction& instr = program.instructions(i);
      for (int b : instr.inputs()) {
        if (valid(b)) ++readers_[b];
      }
      const int out = instr.output();
      if (!valid(out)) continue;
      writer_[out] = writer_[out] == -1 ? i : -2;  // -2: several writers
      writes_[out].push_back(i);
    }
  }

  bool valid(int b) const { return b >= 0 && b < n_; }

  // Running local op `i` of `type` with `inputs` inputs and no predicate.
  bool Local(int i, const char* type, int inputs) const {
    const v1::Instruction& instr = program_.instructions(i);
    return runs_[i] && instr.kind_case() == v1::Instruction::kLocal &&
           instr.local().type() == type && instr.inputs_size() == inputs && !instr.has_predicate();
  }

  // The one running writer of buffer b when b is read once and not pinned, else -1.
  int SingleUseWriter(int b) const {
    return valid(b) && readers_[b] == 1 && !pinned_[b] && writer_[b] >= 0 ? writer_[b] : -1;
  }

  // Whether a running instruction in (from, to) writes buffer b.
  bool WrittenBetween(int b, int from, int to) const {
    if (!valid(b)) return false;
    const std::vector<int>& w = writes_[b];  // ascending
    auto after = std::upper_bound(w.begin(), w.end(), from);
    for (; after != w.end() && *after < to; ++after) {
      if (runs_[*after]) return true;  // absorbed instructions no longer run
    }
    return false;
  }

  // Whether buffer b holds a scalar: its writer's slice, or the input or variable it holds.
  bool Scalar(int b) const {
    if (!valid(b)) return false;
    if (writer_[b] >= 0) return program_.instructions(writer_[b]).slice_shape().dims_size() == 0;
    for (const v1::ProgramTensor& t : program_.inputs()) {
      if (t.buffer() == b) return t.shape().dims_size() == 0;
    }
    for (const v1::ProgramVariable& v : program_.variables()) {
      if (v.buffer() == b) return v.shape().dims_size() == 0;
    }
    return false;
  }

 private:
  const v1::Program& program_;
  const std::vector<bool>& pinned_;
  const std::vector<bool>& runs_;  // the caller's: absorbed instructions stop matching
  const int n_;
  std::vector<int> readers_, writer_;
  std::vector<std::vector<int>> writes_;  // per buffer, the running instructions writing it
};

// S = x -/+ mul(einsum(...), s) or x -/+ mul(y, s) at `s`: the fusion, if any.
bool MatchScaledUpdate(const v1::Program& program, const Matcher& m, int s, FusedUpdate* f) {
  const bool sub = m.Local(s, "sub", 2);
  if (!sub && !m.Local(s, "add", 2)) return false;
  const v1::Instruction& si = program.instructions(s);
  for (int mul_input : {1, 0}) {
    if (sub && mul_input == 0) continue;  // x - m only
    const int mul = m.SingleUseWriter(si.inputs(mul_input));
    if (mul < 0 || mul >= s || !m.Local(mul, "mul", 2)) continue;
    const v1::Instruction& mi = program.instructions(mul);
    for (int einsum_input : {0, 1}) {
      const int e = m.SingleUseWriter(mi.inputs(einsum_input));
      if (e < 0 || e >= mul) continue;
      const v1::Instruction& ei = program.instructions(e);
      if (!m.Local(e, "einsum", ei.inputs_size())) continue;
      // One declared slice shape for the three (the accumulation writes x's layout).
      if (!SameSliceShape(ei, mi) || !SameSliceShape(ei, si)) continue;
      // The einsum's inputs and the scalar are read at s instead: they must not change before.
      bool stable = !m.WrittenBetween(mi.inputs(1 - einsum_input), mul, s);
      for (int b : ei.inputs()) stable = stable && !m.WrittenBetween(b, e, s);
      if (!stable) continue;
      *f = FusedUpdate{e, mul, mul_input, einsum_input};
      return true;
    }
    // No einsum to fold in: still one pass for x -/+ y * s, reading y and s at S.
    if (SameSliceShape(mi, si) && (m.Scalar(mi.inputs(0)) || m.Scalar(mi.inputs(1))) &&
        !m.WrittenBetween(mi.inputs(0), mul, s) && !m.WrittenBetween(mi.inputs(1), mul, s)) {
      *f = FusedUpdate{-1, mul, mul_input, 0};
      return true;
    }
  }
  return false;
}

// S = mul(dy, greater(x, s)) at `s`, the mask read once.
bool MatchMaskedProduct(const v1::Program& program, const Matcher& m, int s, FusedUpdate* f) {
  if (!m.Local(s, "mul", 2)) return false;
  const v1::Instruction& si = program.instructions(s);
  if (si.local().attrs().count("scalar") != 0) return false;
  for (int mask_input : {1, 0}) {
    const int g = m.SingleUseWriter(si.inputs(mask_input));
    if (g < 0 || g >= s || !m.Local(g, "greater", 1)) continue;
    const v1::Instruction& gi = program.instructions(g);
    const auto attr = gi.local().attrs().find("scalar");
    if (attr == gi.local().attrs().end() || gi.local().attrs().count("scalar_first") != 0 ||
        attr->second.value_case() != v1::AttrValue::kF || !SameSliceShape(gi, si) ||
        m.WrittenBetween(gi.inputs(0), g, s)) {
      continue;
    }
    *f = FusedUpdate();
    f->mask = g;
    f->mul_input = mask_input;
    return true;
  }
  return false;
}

// S = softmax(add(a, b)) (or log_softmax) at `s`, the sum read once.
bool MatchAddSoftmax(const v1::Program& program, const Matcher& m, int s, FusedUpdate* f) {
  if (!m.Local(s, "softmax", 1) && !m.Local(s, "log_softmax", 1)) return false;
  const v1::Instruction& si = program.instructions(s);
  const int add = m.SingleUseWriter(si.inputs(0));
  if (add < 0 || add >= s || !m.Local(add, "add", 2)) return false;
  const v1::Instruction& ai = program.instructions(add);
  if (ai.local().attrs().count("scalar") != 0 || !SameSliceShape(ai, si) ||
      m.WrittenBetween(ai.inputs(0), add, s) || m.WrittenBetween(ai.inputs(1), add, s)) {
    return false;
  }
  *f = FusedUpdate();
  f->add = add;
  return true;
}

}  // namespace

std::vector<bool> StepPinnedBuffers(const v1::Program& program,
                                    const std::vector<std::string>* fetches,
                                    const std::vector<bool>& runs) {
  std::vector<bool> pinned(std::max(program.num_buffers(), 0), false);
  auto pin = [&](int b) {
    if (b >= 0 && b < static_cast<int>(pinned.size())) pinned[b] = true;
  };
  for (const v1::ProgramTensor& t : program.inputs()) pin(t.buffer());
  for (const v1::ProgramTensor& t : program.outputs()) {
    if (fetches == nullptr ||
        std::find(fetches->begin(), fetches->end(), t.name()) != fetches->end()) {
      pin(t.buffer());
    }
  }
  for (const v1::ProgramVariable& v : program.variables()) {
    pin(v.buffer());
    pin(v.update_buffer());
  }
  if (fetches != nullptr) {
    for (int i = 0; i < program.instructions_size() && i < static_cast<int>(runs.size()); ++i) {
      const v1::Instruction& inst = program.instructions(i);
      if (runs[i] && inst.has_predicate()) pin(inst.predicate());
    }
  }
  return pinned;
}

std::map<int, FusedUpdate> FindFusions(const v1::Program& program, const std::vector<bool>& pinned,
                                       std::vector<bool>* runs) {
  std::map<int, FusedUpdate> fused;
  const Matcher m(program, pinned, *runs);
  // One pattern at a time over the whole program, so an instruction an earlier pattern made an S
  // (or absorbed) is not taken by a later one.
  for (auto match : {MatchScaledUpdate, MatchMaskedProduct, MatchAddSoftmax}) {
    for (int s = 0; s < program.instructions_size(); ++s) {
      FusedUpdate f;
      if (fused.count(s) != 0 || !match(program, m, s, &f)) continue;
      bool free = true;  // no op of the group is an S already
      for (int op : f.ops()) free = free && (op < 0 || fused.count(op) == 0);
      if (!free) continue;
      fused[s] = f;
      for (int op : f.ops()) {
        if (op >= 0) (*runs)[op] = false;
      }
    }
  }
  return fused;
}

FusionKind FusionKindOf(const FusedUpdate& f) {
  if (f.add >= 0) return FusionKind::kAddSoftmax;
  if (f.mask >= 0) return FusionKind::kMaskedProduct;
  return f.einsum >= 0 ? FusionKind::kScaledEinsumUpdate : FusionKind::kScaledUpdate;
}

v1::Instruction FusedInstruction(const v1::Program& program, int s, const FusedUpdate& f) {
  const v1::Instruction& si = program.instructions(s);
  v1::Instruction fused;
  fused.set_output(si.output());
  fused.set_dtype(si.dtype());
  *fused.mutable_slice_shape() = si.slice_shape();
  fused.set_source_op(si.source_op());
  v1::Op* op = fused.mutable_local();
  op->set_name(si.local().name());
  auto inputs_of = [&](int i) -> const google::protobuf::RepeatedField<int32_t>& {
    return program.instructions(i).inputs();
  };
  if (f.add >= 0) {
    *op = si.local();  // S's dims and attrs
    op->set_type("_add_" + si.local().type());
    fused.mutable_inputs()->CopyFrom(inputs_of(f.add));
    return fused;
  }
  if (f.mask >= 0) {
    op->set_type("_masked_mul");
    (*op->mutable_attrs())["scalar"] =
        program.instructions(f.mask).local().attrs().at("scalar");  // the matcher checked it
    fused.add_inputs(si.inputs(1 - f.mul_input));
    fused.add_inputs(inputs_of(f.mask)[0]);
    return fused;
  }
  (*op->mutable_attrs())["sign"].set_f(si.local().type() == "sub" ? -1.0f : 1.0f);
  fused.add_inputs(si.inputs(1 - f.mul_input));  // x
  if (f.einsum < 0) {
    op->set_type("_scaled_add");
    for (int b : inputs_of(f.mul)) fused.add_inputs(b);
    return fused;
  }
  op->set_type("_scaled_einsum_add");
  fused.add_inputs(inputs_of(f.mul)[1 - f.einsum_input]);  // the scalar
  for (int b : inputs_of(f.einsum)) fused.add_inputs(b);
  return fused;
}

bool IsReduceOp(v1::ReduceOp op) {
  return op == v1::REDUCE_SUM || op == v1::REDUCE_MAX || op == v1::REDUCE_MIN ||
         op == v1::REDUCE_PROD;
}

int64_t DeferredAllReduceBytes(const v1::Instruction& instr, int num_buffers) {
  auto valid = [&](int b) { return b >= 0 && b < num_buffers; };
  if (instr.kind_case() != v1::Instruction::kCollective ||
      instr.collective().kind() != v1::Collective::ALLREDUCE || instr.inputs_size() != 1 ||
      !valid(instr.inputs(0)) || !valid(instr.output()) ||
      !IsReduceOp(instr.collective().reduce_op())) {
    return 0;
  }
  auto shape = Shape::FromProto(instr.slice_shape(), "slice_shape");
  if (!shape.ok()) return 0;
  const int64_t bytes = shape->num_elements() * 4;
  return bytes <= kDeferredAllReduceBytes ? bytes : 0;
}

}  // namespace meshrt
