#include "bench/instruction_times.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "core/planning/explain.h"
#include "kernels/cpu_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace bench {
namespace {

struct BufferType {
  Shape shape;
  DType dtype = DType::kFloat32;
};

DType DTypeOr(v1::DType d) { return DTypeFromProto(d).value_or(DType::kFloat32); }

absl::StatusOr<std::map<int, BufferType>> BufferTypes(const v1::Program& program) {
  std::map<int, BufferType> types;
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::FromProto(program.mesh()));
  for (const v1::ProgramTensor& t : program.inputs()) {
    ASSIGN_OR_RETURN(const Shape global, Shape::FromProto(t.shape(), t.name()));
    types[t.buffer()] = {SliceShape(global, TensorLayout::FromProto(t.layout()), mesh),
                         DTypeOr(t.dtype())};
  }
  for (const v1::ProgramVariable& v : program.variables()) {
    ASSIGN_OR_RETURN(Shape s, Shape::FromProto(v.initializer().slice_shape(), v.name()));
    types[v.buffer()] = {std::move(s), DTypeOr(v.dtype())};
  }
  for (const v1::Instruction& i : program.instructions()) {
    ASSIGN_OR_RETURN(Shape s, Shape::FromProto(i.slice_shape(), i.source_op()));
    types[i.output()] = {std::move(s), DTypeOr(i.dtype())};
  }
  return types;
}

Tensor Filled(const BufferType& t, std::mt19937& rng) {
  Tensor x(t.dtype, t.shape);
  if (t.dtype == DType::kInt32) {
    std::uniform_int_distribution<int32_t> d(0, 3);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.i32()[i] = d(rng);
  } else {
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = d(rng);
  }
  return x;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

absl::StatusOr<std::vector<double>> LocalInstructionSeconds(const v1::Program& program,
                                                            const std::vector<std::string>& fetches,
                                                            int reps) {
  ASSIGN_OR_RETURN(const auto types, BufferTypes(program));
  const std::vector<bool> runs = StepInstructions(program, &fetches);
  std::vector<double> seconds(program.instructions_size(), 0.0);
  std::mt19937 rng(11);
  for (int index = 0; index < program.instructions_size(); ++index) {
    const v1::Instruction& inst = program.instructions(index);
    if (!runs[index] || !inst.has_local()) continue;
    std::vector<Tensor> inputs;
    for (int b : inst.inputs()) {
      auto it = types.find(b);
      if (it == types.end()) {
        return absl::InvalidArgumentError(absl::StrCat("instruction #", index, " ('",
                                                       inst.source_op(), "') reads buffer ", b,
                                                       ", which nothing gives a shape"));
      }
      inputs.push_back(Filled(it->second, rng));
    }
    std::vector<const Tensor*> in;
    for (const Tensor& t : inputs) in.push_back(&t);
    const BufferType& out_type = types.at(inst.output());
    Tensor out = Tensor::Uninitialized(out_type.dtype, out_type.shape);
    if (!CpuKernels().Run(inst.local(), in, &out).ok()) {
      seconds[index] = -1;
      continue;
    }
    std::vector<double> times;
    for (int r = 0; r < std::max(1, reps); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)CpuKernels().Run(inst.local(), in, &out);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    seconds[index] = Median(std::move(times));
  }
  return seconds;
}

}  // namespace bench
}  // namespace meshrt
