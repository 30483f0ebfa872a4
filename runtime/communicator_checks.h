// The argument checks every Communicator implementation makes (runtime/communicator.h's
// InvalidArgument cases), written once so that LocalCollectiveHub's and GlooCommunicator's
// errors read the same. Each takes the call's `context` (CollectiveContext) and returns OK or
// InvalidArgument starting with it. Pure functions; thread-safe.
#ifndef MESHRT_RUNTIME_COMMUNICATOR_CHECKS_H_
#define MESHRT_RUNTIME_COMMUNICATOR_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "proto/program.pb.h"

namespace meshrt {

// "AllReduce over mesh axes [rows] at processor (1,0)": `sorted_axes` as NormalizeMeshAxes
// returned them.
std::string CollectiveContext(const Mesh& mesh, absl::string_view kind,
                              const std::vector<int>& sorted_axes,
                              const std::vector<int64_t>& coordinate);
// A buffer of `size` (bytes or elements) must have a size >= 0 and, when not empty, an address.
absl::Status CheckBuffer(absl::string_view context, int64_t size, const void* buffer);
// The input of an out-of-place call: not null when `size` > 0.
absl::Status CheckInput(absl::string_view context, int64_t size, const void* in);
// `op` is one of sum, max, min, prod.
absl::Status CheckReduceOp(absl::string_view context, v1::ReduceOp op);
// The error CheckReduceOp returns, for an implementation whose own lookup found no reduction.
absl::Status InvalidReduceOp(absl::string_view context, v1::ReduceOp op);
// A Broadcast's root is a rank of its group of `g`.
absl::Status CheckRoot(absl::string_view context, int root_rank, int g);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_COMMUNICATOR_CHECKS_H_
