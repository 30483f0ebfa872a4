// Test helpers for the data and index op families: a terse graph writer, seeded feeds (float32 and
// int32, optionally with ties), the simulated-mesh-vs-interpreter check, and a digest of the
// collectives a lowered program emits.
#ifndef MESHRT_CORE_TESTING_DATA_INDEX_TEST_UTIL_H_
#define MESHRT_CORE_TESTING_DATA_INDEX_TEST_UTIL_H_

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace testing_util {

// One attribute: {"begin", 2}, {"new_dim", "e"}, {"exclusive", true}, {"on_value", 2.0f},
// {"sizes", std::vector<int64_t>{3, 5}}.
struct Attr {
  Attr(std::string k, int v) : key(std::move(k)) { value.set_i(v); }
  Attr(std::string k, float v) : key(std::move(k)) { value.set_f(v); }
  Attr(std::string k, bool v) : key(std::move(k)) { value.set_b(v); }
  Attr(std::string k, const char* v) : key(std::move(k)) { value.set_s(v); }
  Attr(std::string k, const std::vector<int64_t>& v) : key(std::move(k)) {
    for (int64_t x : v) value.mutable_ints()->add_values(x);
  }
  std::string key;
  v1::AttrValue value;
};

// Writes a v1::Graph op by op.
class GraphWriter {
 public:
  v1::Op& Placeholder(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32) {
    v1::Op& op = Op(name, "placeholder", {});
    *op.mutable_shape() = shape.ToProto();
    op.set_dtype(DTypeToProto(dtype));
    return op;
  }
  v1::Op& Op(const std::string& name, const std::string& type,
             const std::vector<std::string>& inputs, const std::vector<std::string>& dims = {},
             const std::vector<Attr>& attrs = {}) {
    v1::Op* op = graph_.add_ops();
    op->set_name(name);
    op->set_type(type);
    for (const std::string& i : inputs) op->add_inputs(i);
    for (const std::string& d : dims) op->add_dims(d);
    for (const Attr& a : attrs) (*op->mutable_attrs())[a.key] = a.value;
    return *op;
  }
  absl::StatusOr<Graph> Build() const { return Graph::Build(graph_); }
  const v1::Graph& proto() const { return graph_; }

 private:
  v1::Graph graph_;
};

// Seeded feeds for every placeholder: float32 uniform in [-1, 1) (small whole numbers 0..3 for
// names in `tied`, so orderings have ties), int32 uniform in [int_lo, int_hi].
inline TensorMap RandomFeeds(const Graph& g, uint32_t seed, int int_lo, int int_hi,
                             const std::set<std::string>& tied = {}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ints(int_lo, int_hi), small(0, 3);
  TensorMap feeds;
  for (const std::string& name : g.Placeholders()) {
    const TensorType& type = g.type(name);
    Tensor t(type.dtype, type.shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (type.dtype == DType::kInt32) {
        t.i32()[i] = ints(rng);
      } else {
        t.f32()[i] = tied.count(name) ? static_cast<float>(small(rng)) : real(rng);
      }
    }
    feeds[name] = std::move(t);
  }
  return feeds;
}

// Lowers `g` for (mesh, layout), runs it on the simulated mesh with `kernels`, and expects every
// tensor to equal the interpreter's: int32 exactly, float32 within 1e-5 (relative, or absolute
// below 1). Returns the program through `program` when given.
inline void ExpectMatchesInterpreter(const Graph& g, const TensorMap& feeds,
                                     const std::string& mesh_text, const std::string& layout,
                                     const KernelRunner& kernels, v1::Program* program = nullptr) {
  SCOPED_TRACE(absl::StrCat("mesh ", mesh_text, " layout '", layout, "'"));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(layout, mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program lowered, Lower(g, mesh, rules));
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  SimulatedMeshOptions options;
  options.kernels = &kernels;
  ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(lowered, feeds, options));
  for (const auto& [name, expected] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    const Tensor& actual = got.at(name);
    ASSERT_EQ(actual.dtype(), expected.dtype()) << name;
    ASSERT_EQ(actual.shape(), expected.shape()) << name;
    if (expected.dtype() == DType::kInt32) {
      EXPECT_EQ(std::vector<int32_t>(actual.ints().begin(), actual.ints().end()),
                std::vector<int32_t>(expected.ints().begin(), expected.ints().end()))
          << "tensor " << name;
    } else {
      EXPECT_LE(MaxRelativeError(actual, expected), 1e-5) << "tensor " << name;
    }
  }
  if (program != nullptr) *program = std::move(lowered);
}

// The collectives emitted for graph op `source_op`, in order, as "allgather(p) [b:4, s:4]",
// "allreduce REDUCE_SUM(p) [...]", "alltoall(p) [...]", "broadcast@ROOT(p) [...]" (output slice
// shape), or the kind's proto name.
inline std::vector<std::string> CollectivesOf(const v1::Program& p, const std::string& source_op) {
  std::vector<std::string> out;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.source_op() != source_op || !inst.has_collective()) continue;
    const v1::Collective& c = inst.collective();
    std::string axes;
    for (int a : c.mesh_axes())
      absl::StrAppend(&axes, axes.empty() ? "" : ",", p.mesh().dims(a).name());
    std::string kind = c.kind() == v1::Collective::ALLGATHER  ? "allgather"
                       : c.kind() == v1::Collective::ALLTOALL ? "alltoall"
                       : c.kind() == v1::Collective::BROADCAST
                           ? absl::StrCat("broadcast@", c.root())
                       : c.kind() == v1::Collective::ALLREDUCE
                           ? absl::StrCat("allreduce ", v1::ReduceOp_Name(c.reduce_op()))
                           : v1::Collective::Kind_Name(c.kind());
    out.push_back(absl::StrCat(kind, "(", axes, ") ",
                               Shape::FromProto(inst.slice_shape()).value().ToString()));
  }
  return out;
}

}  // namespace testing_util
}  // namespace meshrt

#endif  // MESHRT_CORE_TESTING_DATA_INDEX_TEST_UTIL_H_
