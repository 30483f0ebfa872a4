// Tensors for the data path's tests: distinct element values, and byte-for-byte comparison.
#ifndef MESHRT_RPC_TEST_TENSORS_H_
#define MESHRT_RPC_TEST_TENSORS_H_

#include <cstdint>
#include <cstring>

#include "core/ir/tensor.h"

namespace meshrt {

// Elements 0.5, 1.5, 2.5, ... (float32) or -1000, -997, ... (int32): distinct, so a misplaced
// element shows, and no float is an integer an int32 would also hold.
inline Tensor Iota(DType dtype, const Shape& s) {
  Tensor t = Tensor::Uninitialized(dtype, s);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    if (dtype == DType::kFloat32) {
      t.f32()[i] = 0.5f + static_cast<float>(i);
    } else {
      t.i32()[i] = static_cast<int32_t>(3 * i - 1000);
    }
  }
  return t;
}

// Same dtype, shape and bytes.
inline bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(TensorData(a), TensorData(b), TensorBytes(a)) == 0;
}

}  // namespace meshrt

#endif  // MESHRT_RPC_TEST_TENSORS_H_
