#include "core/ops/op_cost.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"

namespace meshrt {

int64_t SliceBytes(const TensorType& type) { return 4 * type.shape.num_elements(); }

namespace cost_internal {

SliceCost ReadAllWriteOutput(const std::vector<TensorType>& inputs, const TensorType& output,
                             double flops) {
  SliceCost cost;
  cost.flops = flops;
  for (const TensorType& in : inputs) cost.bytes_read += SliceBytes(in);
  cost.bytes_written = SliceBytes(output);
  return cost;
}

}  // namespace cost_internal

namespace {

using cost_internal::ReadAllWriteOutput;

SliceCost EinsumCost(const std::vector<TensorType>& inputs, const TensorType& output) {
  if (inputs.size() < 2) {
    const int64_t in = inputs.empty() ? 0 : inputs[0].shape.num_elements();
    const bool sums = in > output.shape.num_elements();
    return ReadAllWriteOutput(inputs, output, sums ? static_cast<double>(in) : 0);
  }
  std::map<std::string, int64_t> dims;
  for (const Dim& d : output.shape.dims()) dims[d.name] = d.size;
  for (const TensorType& in : inputs) {
    for (const Dim& d : in.shape.dims()) dims[d.name] = d.size;
  }
  double product = 2;
  for (const auto& entry : dims) product *= static_cast<double>(entry.second);
  return ReadAllWriteOutput(inputs, output, product * static_cast<double>(inputs.size() - 1));
}

}  // namespace

SliceCost FamilyDefaultCost(OpFamily family, const v1::Op& op,
                            const std::vector<TensorType>& inputs, const TensorType& output) {
  const double out_elements = static_cast<double>(output.shape.num_elements());
  const double in_elements =
      inputs.empty() ? 0 : static_cast<double>(inputs[0].shape.num_elements());
  switch (family) {
    case OpFamily::kEinsum:
      return EinsumCost(inputs, output);
    case OpFamily::kElementwise: {
      const double per = std::max<double>(1, static_cast<double>(inputs.size()) - 1);
      return ReadAllWriteOutput(inputs, output, per * out_elements);
    }
    case OpFamily::kReduce:
      return ReadAllWriteOutput(inputs, output, in_elements);
    case OpFamily::kReshape:
    case OpFamily::kData: {
      SliceCost cost;
      cost.bytes_read = cost.bytes_written = SliceBytes(output);
      return cost;
    }
    case OpFamily::kIndex:
      return ReadAllWriteOutput(inputs, output, std::max(in_elements, out_elements));
    case OpFamily::kSpatial:
      return ReadAllWriteOutput(inputs, output, 0);
    case OpFamily::kSource: {
      // A placeholder is fed and a variable kept between steps: neither is computed in a step.
      if (IsFed(op) || IsVariable(op)) return SliceCost{};
      return ReadAllWriteOutput(inputs, output, 0);
    }
    case OpFamily::kControl:
      return SliceCost{};
  }
  return SliceCost{};
}

SliceCost ConvCost(const v1::Op&, const std::vector<TensorType>& inputs, const TensorType& output) {
  double flops = 0;
  if (inputs.size() == 2 && !inputs[1].shape.dims().empty()) {
    const double out_channels = static_cast<double>(inputs[1].shape.dims().back().size);
    if (out_channels > 0) {
      flops = 2 * static_cast<double>(output.shape.num_elements()) *
              static_cast<double>(inputs[1].shape.num_elements()) / out_channels;
    }
  }
  return ReadAllWriteOutput(inputs, output, flops);
}

absl::StatusOr<SliceCost> OpSliceCost(const v1::Op& op, const std::vector<TensorType>& inputs,
                                      const TensorType& output) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpLabel(op),
        ": no cost for an unregistered op type (see `meshrt ops` for the known ones)"));
  }
  if (info->cost != nullptr) return info->cost(op, inputs, output);
  return FamilyDefaultCost(info->family, op, inputs, output);
}

}  // namespace meshrt
