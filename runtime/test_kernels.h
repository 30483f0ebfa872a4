// Test helpers for the runtime: a tiny KernelRunner with a few op types whose results are easy to
// compute by hand, iota tensors, and a text-format program parser. Test-only.
#ifndef MESHRT_RUNTIME_TEST_KERNELS_H_
#define MESHRT_RUNTIME_TEST_KERNELS_H_

#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/ir/tensor.h"
#include "core/ops/kernel_runner.h"
#include "google/protobuf/text_format.h"
#include "proto/program.pb.h"
#include "util/logging.h"

namespace meshrt {

// Op types (float32 and int32 alike):
//   add               out = in0 + in1 (same shapes)
//   sum_all           out (scalar) = sum of every element of in0
//   sum_leading       out = in0 summed over its first dim
//   fail_if_negative  out = in0, or InvalidArgument when an element is negative
//   slow_if_negative  out = in0, after sleeping 600 ms when an element is negative
// Anything else is Unimplemented. Thread-safe (stateless).
class TestKernels : public KernelRunner {
 public:
  using KernelRunner::Run;
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* output,
                   const KernelContext&) const override {
    if (inputs.empty()) return absl::InvalidArgumentError("no inputs");
    const Tensor& in = *inputs[0];
    const int64_t n = in.num_elements();
    auto get = [](const Tensor& t, int64_t i) -> double {
      return t.dtype() == DType::kFloat32 ? t.f32()[i] : t.i32()[i];
    };
    auto set = [output](int64_t i, double v) {
      if (output->dtype() == DType::kFloat32) {
        output->f32()[i] = static_cast<float>(v);
      } else {
        output->i32()[i] = static_cast<int32_t>(v);
      }
    };
    if (op.type() == "add") {
      if (inputs.size() != 2 || inputs[1]->shape() != in.shape() || output->num_elements() != n) {
        return absl::InvalidArgumentError("add: shapes differ");
      }
      for (int64_t i = 0; i < n; ++i) set(i, get(in, i) + get(*inputs[1], i));
    } else if (op.type() == "sum_all") {
      if (output->num_elements() != 1) return absl::InvalidArgumentError("sum_all: not scalar");
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += get(in, i);
      set(0, s);
    } else if (op.type() == "sum_leading") {
      const int64_t rows = in.shape().dim(0).size;
      const int64_t inner = n / rows;
      if (output->num_elements() != inner) {
        return absl::InvalidArgumentError("sum_leading: bad output shape");
      }
      for (int64_t j = 0; j < inner; ++j) {
        double s = 0;
        for (int64_t r = 0; r < rows; ++r) s += get(in, r * inner + j);
        set(j, s);
      }
    } else if (op.type() == "fail_if_negative") {
      for (int64_t i = 0; i < n; ++i) {
        if (get(in, i) < 0) {
          return absl::InvalidArgumentError(absl::StrCat("negative value ", get(in, i)));
        }
        set(i, get(in, i));
      }
    } else if (op.type() == "slow_if_negative") {
      for (int64_t i = 0; i < n; ++i) {
        if (get(in, i) < 0) {
          absl::SleepFor(absl::Milliseconds(600));
          break;
        }
      }
      for (int64_t i = 0; i < n; ++i) set(i, get(in, i));
    } else {
      return absl::UnimplementedError(absl::StrCat("TestKernels lacks op type '", op.type(), "'"));
    }
    return absl::OkStatus();
  }
};

inline Tensor IotaFloat(Shape shape) {
  std::vector<float> v(shape.num_elements());
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::Float(std::move(shape), std::move(v));
}

inline Tensor IotaInt(Shape shape) {
  std::vector<int32_t> v(shape.num_elements());
  std::iota(v.begin(), v.end(), 0);
  return Tensor::Int(std::move(shape), std::move(v));
}

// x [n:4] replicated on a 1-processor mesh; y = x + x (instruction 0); z = allreduce(y) over the
// only axis (instruction 1, a small allreduce the executor defers to the end of the step).
inline constexpr char kAddThenAllreduceProgram[] = R"pb(
  mesh { dims { name: "x" size: 1 } }
  num_buffers: 3
  inputs {
    name: "x"
    buffer: 0
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
  instructions {
    output: 1
    inputs: [ 0, 0 ]
    dtype: DT_FLOAT32
    source_op: "y"
    slice_shape { dims { name: "n" size: 4 } }
    local { type: "add" }
  }
  instructions {
    output: 2
    inputs: 1
    dtype: DT_FLOAT32
    source_op: "z"
    slice_shape { dims { name: "n" size: 4 } }
    collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }
  }
  outputs {
    name: "z"
    buffer: 2
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
)pb";

// Parses a v1::Program written in protobuf text format; CHECKs that it parses.
inline v1::Program ParseProgram(const std::string& text) {
  v1::Program program;
  MESHRT_CHECK(google::protobuf::TextFormat::ParseFromString(text, &program), text);
  return program;
}

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_TEST_KERNELS_H_
