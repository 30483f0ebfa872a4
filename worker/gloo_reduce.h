// Element-wise reduce functions in the form Gloo's allreduce takes them, for every ReduceOp on
// float32 and int32. int32 sums and products wrap, matching ReduceInto (runtime/communicator.h).
// Stateless and thread-safe.
#ifndef MESHRT_WORKER_GLOO_REDUCE_H_
#define MESHRT_WORKER_GLOO_REDUCE_H_

#include "core/ir/tensor.h"
#include "gloo/allreduce.h"
#include "proto/program.pb.h"

namespace meshrt {

// c[i] = op(a[i], b[i]) for n elements; c may be the same array as a or b. Null for REDUCE_INVALID or
// an unknown op.
gloo::AllreduceOptions::Func GlooReduceFunction(v1::ReduceOp op, DType dtype);

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_REDUCE_H_
