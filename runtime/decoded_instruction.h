// DecodedInstruction: one instruction of a lowered program with its wire fields parsed once for one
// processor (runtime/executor.h decodes every instruction once and runs only decoded data): the
// dtype and slice shape, the registered op of a local op, the op its kernel runs (with
// `_slice_begin` / `_global_sizes` set for ops that compute from global positions), and a
// collective's mesh axes and group size.
//
// Decoding never fails: a field that does not parse keeps its error, which the executor reports at
// the point where it used to parse the field (so a malformed instruction that never runs is no
// error, and one that does gets the same InvalidArgument as before).
//
// Thread-safety: immutable once made; readable from any thread.
#ifndef MESHRT_RUNTIME_DECODED_INSTRUCTION_H_
#define MESHRT_RUNTIME_DECODED_INSTRUCTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "core/ops/ops.h"
#include "proto/program.pb.h"

namespace meshrt {

struct DecodedInstruction {
  // The dtype's error, else the slice shape's (InvalidArgument, as the executor reports them).
  absl::Status parse_status;
  DType dtype = DType::kFloat32;
  Shape slice_shape;
  // Local ops: the registered op (null when its type is not registered), and the op with its
  // slice's position when the op needs it (OpInfo::needs_slice_begin and a global shape);
  // `prepared_status` is the error of a global shape or layout that does not parse or fit.
  const OpInfo* op_info = nullptr;
  std::optional<v1::Op> prepared;
  absl::Status prepared_status;
  // Collectives: the sorted mesh axes and the size of their group, or the axes' error.
  absl::Status axes_status;
  std::vector<int> axes;
  int64_t group_size = 1;

  // The op a local instruction's kernel runs: `prepared` if set, else the program's.
  const v1::Op& op(const v1::Instruction& instr) const {
    return prepared.has_value() ? *prepared : instr.local();
  }
};

// Decodes `instr` for the processor at `coordinate` of `mesh` (a coordinate in the mesh).
DecodedInstruction DecodeInstruction(const v1::Instruction& instr, const Mesh& mesh,
                                     const std::vector<int64_t>& coordinate);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_DECODED_INSTRUCTION_H_
