// Human-readable account of a lowered program: every tensor's layout and slice shape, and every
// step that communicates, with its mesh dims and bytes. Used by the demo and `meshrt explain`.
#ifndef MESHRT_CORE_EXPLAIN_H_
#define MESHRT_CORE_EXPLAIN_H_

#include <cstdint>
#include <string>

#include "proto/program.pb.h"

namespace meshrt {

struct CollectiveCost {
  int64_t slice_bytes = 0;  // bytes of the slice each worker contributes
  int64_t sent_bytes = 0;   // bytes each worker sends with a ring / pairwise algorithm
  int group_size = 1;
};

// Cost of instruction `index` of `program` (zero for local steps).
CollectiveCost CostOf(const v1::Program& program, int index);

// Multi-line report: header (mesh, rules), a table of tensors, a table of communication steps and
// the total bytes sent per worker.
std::string ExplainProgram(const v1::Program& program);

}  // namespace meshrt

#endif  // MESHRT_CORE_EXPLAIN_H_
