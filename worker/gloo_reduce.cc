#include "worker/gloo_reduce.h"

#include <cstddef>
#include <cstdint>

namespace meshrt {
namespace {

// Element-wise reductions in the form Gloo calls them: c[i] = op(a[i], b[i]) where c may be the
// same array as a (never partially overlapping), so there is no loop-carried dependence.
// int32 sums and products wrap, matching ReduceInto in runtime/communicator.cc.
struct SumOp {
  static float Apply(float a, float b) { return a + b; }
  static int32_t Apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
struct ProdOp {
  static float Apply(float a, float b) { return a * b; }
  static int32_t Apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
};
struct MaxOp {
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct MinOp {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};

template <typename T, typename Op>
void Reduce(void* c_out, const void* a_in, const void* b_in, size_t n) {
  T* c = static_cast<T*>(c_out);
  const T* a = static_cast<const T*>(a_in);
  const T* b = static_cast<const T*>(b_in);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) c[i] = Op::Apply(a[i], b[i]);
}

template <typename T>
gloo::AllreduceOptions::Func ReduceFor(v1::ReduceOp op) {
  switch (op) {
    case v1::REDUCE_SUM:
      return &Reduce<T, SumOp>;
    case v1::REDUCE_MAX:
      return &Reduce<T, MaxOp>;
    case v1::REDUCE_MIN:
      return &Reduce<T, MinOp>;
    case v1::REDUCE_PROD:
      return &Reduce<T, ProdOp>;
    default:
      return nullptr;
  }
}

}  // namespace

gloo::AllreduceOptions::Func GlooReduceFunction(v1::ReduceOp op, DType dtype) {
  return dtype == DType::kFloat32 ? ReduceFor<float>(op) : ReduceFor<int32_t>(op);
}

}  // namespace meshrt
