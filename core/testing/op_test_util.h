// Test helpers for op families: terse tensors, ops written in text format, and "infer the output
// type, then run the reference kernel". Header-only; tests only.
#ifndef MESHRT_CORE_TESTING_OP_TEST_UTIL_H_
#define MESHRT_CORE_TESTING_OP_TEST_UTIL_H_

#include <string>
#include <vector>

#include "core/ir/tensor.h"
#include "core/ops/kernel_runner.h"
#include "core/ops/ops.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace meshrt {
namespace op_test {

inline Shape S(const char* text) { return Shape::Parse(text).value(); }
inline Tensor F(const char* shape, std::vector<float> v) {
  return Tensor::Float(S(shape), std::move(v));
}
inline Tensor I(const char* shape, std::vector<int32_t> v) {
  return Tensor::Int(S(shape), std::move(v));
}

// `text` is an Op in text format without name or inputs; the op is named t, its inputs a, b, c...
inline v1::Op ParseOp(const std::string& text, size_t num_inputs) {
  v1::Op op;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &op)) << text;
  op.set_name("t");
  for (size_t i = 0; i < num_inputs; ++i) op.add_inputs(std::string(1, static_cast<char>('a' + i)));
  return op;
}

inline std::vector<TensorType> Types(const std::vector<Tensor>& in) {
  std::vector<TensorType> types;
  for (const Tensor& t : in) types.push_back({t.shape(), t.dtype()});
  return types;
}

// Infers the output type, then runs the reference kernel.
inline absl::StatusOr<Tensor> InferAndRun(const std::string& text, const std::vector<Tensor>& in) {
  const v1::Op op = ParseOp(text, in.size());
  ASSIGN_OR_RETURN(TensorType type, InferOutputType(op, Types(in)));
  Tensor out(type.dtype, type.shape);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : in) ptrs.push_back(&t);
  RETURN_IF_ERROR(ReferenceKernels().Run(op, ptrs, &out));
  return out;
}

}  // namespace op_test
}  // namespace meshrt

#endif  // MESHRT_CORE_TESTING_OP_TEST_UTIL_H_
