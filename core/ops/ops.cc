#include "core/ops/ops.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

std::string OpLabel(const v1::Op& op) { return absl::StrCat("op '", op.name(), "' (", op.type(), ")"); }

absl::Status OpError(const v1::Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(OpLabel(op), ": ", msg));
}

namespace {

absl::StatusOr<TensorType> InferPlaceholder(const v1::Op& op, const std::vector<TensorType>&) {
  ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(op.shape(), OpLabel(op)));
  DType dtype = DType::kFloat32;
  if (op.dtype() != v1::DT_INVALID) {
    auto d = DTypeFromProto(op.dtype());
    if (!d.ok()) return OpError(op, d.status().message());
    dtype = *d;
  }
  return TensorType{shape, dtype};
}

absl::StatusOr<TensorType> InferConstant(const v1::Op& op, const std::vector<TensorType>&) {
  if (!op.has_value()) return OpError(op, "needs a `value`");
  ASSIGN_OR_RETURN(Tensor v, Tensor::FromProto(op.value(), OpLabel(op)));
  return TensorType{v.shape(), v.dtype()};
}

absl::StatusOr<TensorType> InferReshape(const v1::Op& op, const std::vector<TensorType>& inputs) {
  ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(op.shape(), OpLabel(op) + " new shape"));
  if (shape.num_elements() != inputs[0].shape.num_elements()) {
    return OpError(op, absl::StrCat("cannot reshape ", inputs[0].shape.ToString(), " (",
                                    inputs[0].shape.num_elements(), " elements) to ",
                                    shape.ToString(), " (", shape.num_elements(), ")"));
  }
  return TensorType{shape, inputs[0].dtype};
}

absl::StatusOr<TensorType> InferRenameDim(const v1::Op& op,
                                          const std::vector<TensorType>& inputs) {
  ASSIGN_OR_RETURN(std::string old_name, StringAttr(op, "old"));
  ASSIGN_OR_RETURN(std::string new_name, StringAttr(op, "new"));
  const Shape& s = inputs[0].shape;
  int i = s.IndexOf(old_name);
  if (i < 0) {
    return OpError(op, absl::StrCat("renames dim '", old_name, "' but input '", op.inputs(0),
                                    "' has shape ", s.ToString()));
  }
  if (new_name != old_name && s.Contains(new_name)) {
    return OpError(op, absl::StrCat("new name '", new_name, "' is already a dim of ",
                                    s.ToString()));
  }
  std::vector<Dim> dims = s.dims();
  dims[i].name = new_name;
  return TensorType{Shape(std::move(dims)), inputs[0].dtype};
}

absl::StatusOr<TensorType> InferEinsum(const v1::Op& op, const std::vector<TensorType>& in);

std::vector<OpInfo> BuiltinOps() {
  std::vector<OpInfo> ops = {
      {"placeholder", OpFamily::kSource, 0, 0, false, "a tensor fed at run time", "",
       false, &InferPlaceholder},
      {"constant", OpFamily::kSource, 0, 0, false, "a tensor given in the graph", "", false,
       &InferConstant},
      {"einsum", OpFamily::kEinsum, 1, -1, true,
       "product of the inputs, summed over every dim not in the output shape", "", false,
       &InferEinsum},
      // Elementwise ops and reductions: the math family (ops_math_*.cc).
      {"reshape", OpFamily::kReshape, 1, 1, true, "same elements, new shape (row-major)", "",
       false, &InferReshape},
      {"rename_dim", OpFamily::kReshape, 1, 1, true, "rename dim attrs.old to attrs.new", "",
       false, &InferRenameDim},
  };
  ops[0].source = SourceKind::kFed;  // placeholder
  // Moving elements is linear: a partial sum stays one through a reshape or a rename.
  for (OpInfo& op : ops) {
    if (op.family == OpFamily::kReshape) op.linear = &LinearInItsInput;
  }
  for (OpInfo& op : ops) {
    switch (op.family) {
      case OpFamily::kSource:
        op.collectives = "local slice";
        break;
      case OpFamily::kEinsum:
        op.collectives = "allreduce(sum) + reshard";
        break;
      default:
        op.collectives = "allgather / alltoall / local slice";
        break;
    }
  }
  return ops;
}

// The registry. Function-local, so registration from other files' static initializers is safe.
absl::Mutex& RegistryMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}
std::vector<OpInfo>& Registry() {
  static std::vector<OpInfo>* ops = new std::vector<OpInfo>(BuiltinOps());
  return *ops;
}

// A gradient facet registered before its op (static initializers of different files run in any
// order); RegisterOps attaches it.
struct PendingGradient {
  GradientFn gradient = nullptr;
  bool zero_gradient = false;
};
std::map<std::string, PendingGradient>& PendingGradients() {
  static auto* pending = new std::map<std::string, PendingGradient>();
  return *pending;
}

OpInfo* FindLocked(absl::string_view type) {
  for (OpInfo& info : Registry()) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

void AttachLocked(OpInfo& info, const PendingGradient& facet) {
  MESHRT_CHECK(info.gradient == nullptr && !info.zero_gradient,
               "gradient facet registered twice for op type ", info.type);
  info.gradient = facet.gradient;
  info.zero_gradient = facet.zero_gradient;
}

void RegisterGradientLocked(const std::string& type, const PendingGradient& facet) {
  if (OpInfo* info = FindLocked(type); info != nullptr) {
    AttachLocked(*info, facet);
    return;
  }
  MESHRT_CHECK(PendingGradients().emplace(type, facet).second,
               "gradient facet registered twice for op type ", type);
}

absl::StatusOr<TensorType> InferEinsum(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(Shape out, Shape::FromProto(op.shape(), OpLabel(op) + " output shape"));
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return OpError(op, absl::StrCat("inputs '", op.inputs(0), "' and '", op.inputs(i),
                                      "' have different dtypes"));
    }
  }
  // One size per dim name across the inputs and the output: a clash is a mistake at this op (the
  // graph-wide check would find it only when the graph is built).
  std::map<std::string, std::pair<int64_t, std::string>> sizes;  // dim -> size, where first seen
  for (size_t i = 0; i <= in.size(); ++i) {
    const Shape& shape = i < in.size() ? in[i].shape : out;
    const std::string where =
        i < in.size() ? absl::StrCat("'", op.inputs(i), "'") : std::string("the output shape");
    for (const Dim& d : shape.dims()) {
      auto [it, added] = sizes.emplace(d.name, std::make_pair(d.size, where));
      if (!added && it->second.first != d.size) {
        return OpError(op, absl::StrCat("dim '", d.name, "' is ", it->second.first, " in ",
                                        it->second.second, " but ", d.size, " in ", where));
      }
    }
  }
  return TensorType{out, in[0].dtype};
}

}  // namespace

bool LinearInItsInput(const v1::Op&, const std::vector<bool>& partial, const std::vector<DType>&,
                      DType) {
  return partial.size() == 1;
}

std::string FamilyName(OpFamily family) {
  switch (family) {
    case OpFamily::kSource:
      return "source";
    case OpFamily::kEinsum:
      return "einsum";
    case OpFamily::kElementwise:
      return "elementwise";
    case OpFamily::kReduce:
      return "reduce";
    case OpFamily::kReshape:
      return "reshape";
    case OpFamily::kData:
      return "data";
    case OpFamily::kIndex:
      return "index";
    case OpFamily::kSpatial:
      return "spatial";
    case OpFamily::kControl:
      return "control";
  }
  return "?";
}

bool RegisterOps(std::vector<OpInfo> ops) {
  absl::MutexLock lock(&RegistryMutex());
  std::vector<OpInfo>& registry = Registry();
  for (OpInfo& op : ops) {
    for (const OpInfo& existing : registry) {
      MESHRT_CHECK(existing.type != op.type, "op type registered twice: ", op.type);
    }
    auto pending = PendingGradients().find(op.type);
    if (pending != PendingGradients().end()) {
      AttachLocked(op, pending->second);
      PendingGradients().erase(pending);
    }
    registry.push_back(std::move(op));
  }
  return true;
}

bool RegisterGradients(std::vector<GradientRule> rules) {
  absl::MutexLock lock(&RegistryMutex());
  for (const GradientRule& rule : rules) {
    MESHRT_CHECK(rule.gradient != nullptr, "null gradient rule for op type ", rule.type);
    RegisterGradientLocked(rule.type, PendingGradient{rule.gradient, false});
  }
  return true;
}

bool RegisterReferenceKernels(std::vector<ReferenceKernelRule> rules) {
  absl::MutexLock lock(&RegistryMutex());
  for (const ReferenceKernelRule& rule : rules) {
    OpInfo* info = FindLocked(rule.type);
    MESHRT_CHECK(info != nullptr, "reference kernel for unregistered op type ", rule.type);
    MESHRT_CHECK(info->reference == nullptr && rule.reference != nullptr,
                 "reference kernel registered twice (or null) for op type ", rule.type);
    info->reference = rule.reference;
  }
  return true;
}

bool RegisterZeroGradients(std::vector<std::string> types) {
  absl::MutexLock lock(&RegistryMutex());
  for (const std::string& type : types) {
    RegisterGradientLocked(type, PendingGradient{nullptr, true});
  }
  return true;
}

absl::Status CheckGradientFacets() {
  std::vector<std::string> problems;
  {
    absl::MutexLock lock(&RegistryMutex());
    for (const auto& [type, facet] : PendingGradients()) {
      problems.push_back(absl::StrCat("a gradient facet for unknown op type '", type, "'"));
    }
  }
  for (const OpInfo& info : AllOps()) {
    if (info.differentiable != (info.gradient != nullptr)) {
      problems.push_back(absl::StrCat("op type '", info.type, "' is ",
                                      info.differentiable ? "" : "not ",
                                      "marked differentiable but has ",
                                      info.gradient != nullptr ? "a" : "no", " gradient rule"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(problems, "; "));
}

std::vector<OpInfo> AllOps() {
  std::vector<OpInfo> ops;
  {
    absl::MutexLock lock(&RegistryMutex());
    ops = Registry();
  }
  std::sort(ops.begin(), ops.end(),
            [](const OpInfo& a, const OpInfo& b) { return a.type < b.type; });
  return ops;
}

const OpInfo* FindOp(absl::string_view type) {
  // Entries are never removed or moved after static initialisation (registration only appends,
  // and happens before main), so the pointer stays valid.
  absl::MutexLock lock(&RegistryMutex());
  return FindLocked(type);
}

absl::StatusOr<float> FloatAttr(const v1::Op& op, absl::string_view name) {
  auto it = op.attrs().find(std::string(name));
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kF) {
    return OpError(op, absl::StrCat("needs float attribute '", name, "'"));
  }
  return it->second.f();
}

absl::StatusOr<std::string> StringAttr(const v1::Op& op, absl::string_view name) {
  auto it = op.attrs().find(std::string(name));
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kS ||
      it->second.s().empty()) {
    return OpError(op, absl::StrCat("needs string attribute '", name, "'"));
  }
  return it->second.s();
}

absl::StatusOr<int64_t> IntAttr(const v1::Op& op, absl::string_view name) {
  auto it = op.attrs().find(std::string(name));
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kI) {
    return OpError(op, absl::StrCat("needs integer attribute '", name, "'"));
  }
  return it->second.i();
}

absl::StatusOr<std::vector<int64_t>> IntListAttr(const v1::Op& op, absl::string_view name) {
  auto it = op.attrs().find(std::string(name));
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kInts) {
    return OpError(op, absl::StrCat("needs integer-list attribute '", name, "'"));
  }
  return std::vector<int64_t>(it->second.ints().values().begin(), it->second.ints().values().end());
}

float FloatAttrOr(const v1::Op& op, absl::string_view name, float fallback) {
  auto it = op.attrs().find(std::string(name));
  if (it == op.attrs().end()) return fallback;
  if (it->second.value_case() == v1::AttrValue::kI) return static_cast<float>(it->second.i());
  return it->second.value_case() == v1::AttrValue::kF ? it->second.f() : fallback;
}

int64_t IntAttrOr(const v1::Op& op, absl::string_view name, int64_t fallback) {
  auto it = op.attrs().find(std::string(name));
  return it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kI ? it->second.i()
                                                                                : fallback;
}

bool BoolAttrOr(const v1::Op& op, absl::string_view name, bool fallback) {
  auto it = op.attrs().find(std::string(name));
  return it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kB ? it->second.b()
                                                                                : fallback;
}

std::string StringAttrOr(const v1::Op& op, absl::string_view name, const std::string& fallback) {
  auto it = op.attrs().find(std::string(name));
  return it != op.attrs().end() && it->second.value_case() == v1::AttrValue::kS ? it->second.s()
                                                                                : fallback;
}

namespace {
SourceKind SourceOf(const v1::Op& op) {
  const OpInfo* info = FindOp(op.type());
  return info == nullptr ? SourceKind::kNone : info->source;
}
}  // namespace

bool IsFed(const v1::Op& op) { return SourceOf(op) == SourceKind::kFed; }
bool IsVariable(const v1::Op& op) { return SourceOf(op) == SourceKind::kVariable; }

bool IsFloating(DType dtype) { return dtype == DType::kFloat32; }

absl::StatusOr<TensorType> InferOutputType(const v1::Op& op,
                                           const std::vector<TensorType>& inputs) {
  const OpInfo* info = FindOp(op.type());
  if (info == nullptr) {
    std::vector<std::string> known;
    for (const OpInfo& i : AllOps()) known.push_back(i.type);
    return absl::InvalidArgumentError(absl::StrCat("op '", op.name(), "' has unknown type '",
                                                   op.type(), "'; known types: ",
                                                   absl::StrJoin(known, " ")));
  }
  const int n = static_cast<int>(inputs.size());
  if (n < info->min_inputs || (info->max_inputs >= 0 && n > info->max_inputs)) {
    std::string want = info->max_inputs < 0 ? absl::StrCat("at least ", info->min_inputs)
                       : info->min_inputs == info->max_inputs
                           ? absl::StrCat(info->min_inputs)
                           : absl::StrCat(info->min_inputs, " to ", info->max_inputs);
    return OpError(op, absl::StrCat("takes ", want, " input(s) but has ", n));
  }
  if (info->infer == nullptr) {
    return absl::InternalError(absl::StrCat("no shape inference for registered op ", op.type()));
  }
  if (info->input_dtypes == InputDTypes::kFloating) {
    for (int i = 0; i < n; ++i) {
      if (IsFloating(inputs[i].dtype)) continue;
      const std::string name = i < op.inputs_size() ? op.inputs(i) : absl::StrCat(i);
      return OpError(op, absl::StrCat("input '", name, "' is ", DTypeName(inputs[i].dtype),
                                      "; ", op.type(), " needs float32 (cast it first)"));
    }
  }
  return info->infer(op, inputs);
}

}  // namespace meshrt
