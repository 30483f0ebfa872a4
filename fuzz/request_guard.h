// THE FUZZER'S LOCAL SIZE GUARD — a stand-in for the coordinator's request caps (issue 12,
// deliverable 5: core/limits.h, being written separately). Replace both functions with calls to
// those caps once they land, so the fuzzer checks the caps themselves.
//
// Why: a request can be valid and still legitimately huge (a 10^9-processor mesh, a 10^12-element
// tensor, a while_loop unrolled 10^9 times). Lowering one is not a bug the fuzzer should report
// as an out-of-memory or a timeout, so such inputs are skipped:
//   - a mesh of more than kMaxProcessors processors,
//   - any tensor (declared in the request, or inferred by Graph::Build, loop bodies included) of
//     more than kMaxElements elements,
//   - more than kMaxUnrolledOps ops after unrolling every while_loop by its trip_count.
// Products are computed without overflow. Inputs the coordinator would refuse anyway (sizes < 1,
// malformed attrs) are left to the code under test.
#ifndef MESHRT_FUZZ_REQUEST_GUARD_H_
#define MESHRT_FUZZ_REQUEST_GUARD_H_

#include <cstdint>

#include "core/graph.h"
#include "proto/session.pb.h"

namespace meshrt {
namespace fuzz {

inline constexpr int64_t kMaxProcessors = 64;
inline constexpr int64_t kMaxElements = int64_t{1} << 20;
inline constexpr int64_t kMaxUnrolledOps = int64_t{1} << 14;

namespace internal {

inline int64_t SizeOf(const v1::Dim& d) { return d.size(); }
inline int64_t SizeOf(const Dim& d) { return d.size; }

// True when the product of the dims' sizes exceeds `cap` (sizes < 1 are left to validation).
template <typename Dims>
bool ProductExceeds(const Dims& dims, int64_t cap) {
  int64_t n = 1;
  for (const auto& d : dims) {
    const int64_t size = SizeOf(d);
    if (size < 1) return false;
    if (size > cap / n) return true;
    n *= size;
  }
  return false;
}

// Declared shapes and unrolled op count of `graph`, whose ops each run `repeat` times.
inline bool GraphProtoExceeds(const v1::Graph& graph, int64_t repeat, int64_t* unrolled_ops) {
  for (const v1::Op& op : graph.ops()) {
    *unrolled_ops += repeat;
    if (*unrolled_ops > kMaxUnrolledOps) return true;
    if (ProductExceeds(op.shape().dims(), kMaxElements)) return true;
    if (op.value().has_shape() && ProductExceeds(op.value().shape().dims(), kMaxElements)) {
      return true;
    }
    if (op.has_body()) {
      auto trip = op.attrs().find("trip_count");
      int64_t trips = trip == op.attrs().end() ? 1 : trip->second.i();
      if (trips < 1) trips = 1;  // 0 still validates the body; < 0 is refused by validation
      if (trips > kMaxUnrolledOps / repeat) return true;
      if (GraphProtoExceeds(op.body(), repeat * trips, unrolled_ops)) return true;
    }
  }
  return false;
}

}  // namespace internal

// Before anything is built: the mesh, the declared shapes, the unrolled op count.
inline bool ExceedsFuzzCaps(const v1::CreateSessionRequest& request) {
  if (internal::ProductExceeds(request.mesh().dims(), kMaxProcessors)) return true;
  int64_t unrolled_ops = 0;
  return internal::GraphProtoExceeds(request.graph(), 1, &unrolled_ops);
}

// After Graph::Build: every inferred tensor type, loop bodies included (built the same way the
// while_loop's own validation builds them).
inline bool ExceedsFuzzCaps(const Graph& graph) {
  for (int index : graph.topological_order()) {
    const v1::Op& op = graph.op(index);
    if (graph.HasTensor(op.name()) &&
        internal::ProductExceeds(graph.type(op.name()).shape.dims(), kMaxElements)) {
      return true;
    }
    if (op.has_body()) {
      absl::StatusOr<Graph> body = Graph::Build(op.body());
      if (body.ok() && ExceedsFuzzCaps(*body)) return true;
    }
  }
  return false;
}

}  // namespace fuzz
}  // namespace meshrt

#endif  // MESHRT_FUZZ_REQUEST_GUARD_H_
