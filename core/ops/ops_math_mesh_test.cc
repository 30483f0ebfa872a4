// Layout invariance of the math ops: one graph per family (elementwise, reductions, normalisation
// and cross-entropy), lowered for several layouts on each of the meshes p:1, p:4, rows:2,cols:2 and
// x:2,y:2,z:2 (splitting and not splitting the reduced / normalised dims), run on the simulated
// mesh with the reference and the fast CPU kernels, and compared tensor by tensor with the
// reference interpreter. Then the lowering structure: which collectives each op emits.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

// Builds a graph proto op by op.
class G {
 public:
  G& In(const std::string& name, const char* shape) {
    v1::Op* op = proto_.add_ops();
    op->set_name(name);
    op->set_type("placeholder");
    *op->mutable_shape() = Shape::Parse(shape).value().ToProto();
    return *this;
  }
  // `dims` lists dim names; `scalar` (if not NaN) becomes attrs.scalar.
  G& Op(const std::string& name, const std::string& type, std::vector<std::string> inputs,
        std::vector<std::string> dims = {}, float scalar = kNone) {
    v1::Op* op = proto_.add_ops();
    op->set_name(name);
    op->set_type(type);
    for (const std::string& i : inputs) op->add_inputs(i);
    for (const std::string& d : dims) op->add_dims(d);
    if (!std::isnan(scalar)) (*op->mutable_attrs())["scalar"].set_f(scalar);
    last_ = op;
    proto_.add_outputs(name);
    return *this;
  }
  // Sets an attribute of the last op.
  G& Attr(const std::string& key, const v1::AttrValue& v) {
    (*last_->mutable_attrs())[key] = v;
    return *this;
  }
  G& Shaped(const char* shape) {
    *last_->mutable_shape() = Shape::Parse(shape).value().ToProto();
    return *this;
  }
  Graph Build() const {
    absl::StatusOr<Graph> g = Graph::Build(proto_);
    EXPECT_TRUE(g.ok()) << g.status();
    return *std::move(g);
  }

  static constexpr float kNone = std::numeric_limits<float>::quiet_NaN();

 private:
  v1::Graph proto_;
  v1::Op* last_ = nullptr;
};

v1::AttrValue B(bool b) {
  v1::AttrValue v;
  v.set_b(b);
  return v;
}
v1::AttrValue Str(const std::string& s) {
  v1::AttrValue v;
  v.set_s(s);
  return v;
}
v1::AttrValue F(float f) {
  v1::AttrValue v;
  v.set_f(f);
  return v;
}

// Every unary and binary op, where and cast, with broadcasting in every direction
// (x[b,v] with y[v], y[v] with x[b,v] -> [v,b], z[h,b] with x -> [h,b,v]).
Graph ElementwiseGraph() {
  G g;
  g.In("x", "b:4,v:8").In("y", "v:8").In("z", "h:4,b:4");
  g.Op("ax", "abs", {"x"}).Op("pos", "add", {"ax"}, {}, 0.5f);
  for (const char* t : {"exp", "square", "tanh", "sigmoid", "gelu", "relu", "sign", "neg"}) {
    g.Op(absl::StrCat("u_", t), t, {"x"});
  }
  for (const char* t : {"log", "sqrt", "rsqrt", "reciprocal"})
    g.Op(absl::StrCat("u_", t), t, {"pos"});
  g.Op("gelu_erf", "gelu", {"x"}).Attr("approximate", B(false));
  g.Op("scaled", "scale", {"x"}, {}, 3.0f);
  g.Op("ci", "cast", {"x4"}).Attr("dtype", Str("int32"));
  g.Op("x4", "mul", {"x"}, {}, 4.0f);
  g.Op("y4", "mul", {"y"}, {}, 4.0f).Op("cy", "cast", {"y4"}).Attr("dtype", Str("int32"));
  g.Op("ci_sq", "square", {"ci"}).Op("ci_abs", "abs", {"ci"}).Op("ci_plus", "add", {"ci"}, {}, 3);
  g.Op("ci_max", "maximum", {"cy", "ci"})
      .Op("cf", "cast", {"ci_max"})
      .Attr("dtype", Str("float32"));
  g.Op("bxy", "add", {"x", "y"}).Op("syx", "sub", {"y", "x"}).Op("mzx", "mul", {"z", "x"});
  g.Op("dxp", "div", {"x", "pos"}).Op("mn", "minimum", {"x", "y"}).Op("mx", "maximum", {"z", "x"});
  g.Op("pw", "pow", {"pos", "y"}).Op("eq", "equal", {"ci", "cy"}).Op("lt", "less", {"x", "y"});
  g.Op("gt", "greater", {"y", "x"}).Op("land", "logical_and", {"lt", "gt"});
  g.Op("lor", "logical_or", {"eq", "lt"}).Op("w", "where", {"lt", "x", "z"});
  g.Op("w2", "where", {"gt", "y"}, {}, -1.0f).Op("w3", "where", {"eq", "ci", "cy"});
  g.Op("rsub", "sub", {"x"}, {}, 1.0f).Attr("scalar_first", B(true));
  g.Op("zlt", "less", {"z"}, {}, 0.25f);
  return g.Build();
}

// Every reduction, over one dim, several dims and all dims; float32 and int32.
Graph ReduceGraph() {
  G g;
  g.In("x", "b:4,s:4,v:8");
  g.Op("r_sum", "reduce_sum", {"x"}, {"v"}).Op("r_mean", "reduce_mean", {"x"}, {"s", "v"});
  g.Op("r_max", "reduce_max", {"x"}, {"b"}).Op("r_min", "reduce_min", {"x"}, {"v"});
  g.Op("r_min_all", "reduce_min", {"x"}).Op("r_sum_all", "reduce_sum", {"x"});
  g.Op("big", "greater", {"x"}, {}, 0.8f).Op("r_any", "reduce_any", {"big"}, {"v"});
  g.Op("notsmall", "greater", {"x"}, {}, -0.8f).Op("r_all", "reduce_all", {"notsmall"}, {"v"});
  g.Op("r_all_bs", "reduce_all", {"notsmall"}, {"b", "s"});
  g.Op("r_lse", "reduce_logsumexp", {"x"}, {"v"});
  g.Op("x50", "mul", {"x"}, {}, 50.0f).Op("r_lse_big", "reduce_logsumexp", {"x50"}, {"b", "v"});
  g.Op("r_lse_all", "reduce_logsumexp", {"x"});
  g.Op("x10", "mul", {"x"}, {}, 10.0f).Op("ci", "cast", {"x10"}).Attr("dtype", Str("int32"));
  g.Op("i_sum", "reduce_sum", {"ci"}, {"s"}).Op("i_max", "reduce_max", {"ci"}, {"v"});
  g.Op("i_min", "reduce_min", {"ci"}, {"b", "v"}).Op("i_any", "reduce_any", {"ci"}, {"v"});
  return g.Build();
}

// softmax, log_softmax, layer_norm, rms_norm, softmax_cross_entropy and the fused gradients over
// one and two dims, with and without scale and bias, targets in the logits' order and in another
// order.
Graph NormGraph() {
  G g;
  g.In("logits", "b:4,s:4,v:8").In("t_raw", "b:4,s:4,v:8").In("gain", "v:8").In("bias", "v:8");
  g.In("gain_s", "s:4");
  g.Op("sm", "softmax", {"logits"}, {"v"}).Op("sm_sv", "softmax", {"logits"}, {"s", "v"});
  g.Op("smg", "softmax_grad", {"sm", "t_raw"}, {"v"});
  g.Op("smg_sv", "softmax_grad", {"sm_sv", "t_raw"}, {"s", "v"});
  g.Op("lsm", "log_softmax", {"logits"}, {"v"}).Op("lsm_b", "log_softmax", {"logits"}, {"b"});
  g.Op("ln", "layer_norm", {"logits", "gain", "bias"}, {"v"});
  g.Op("ln_sv", "layer_norm", {"logits"}, {"s", "v"});
  g.Op("ln_gs", "layer_norm", {"logits", "gain_s"}, {"s", "v"});
  g.Op("rms", "rms_norm", {"logits", "gain"}, {"v"}).Op("rms_b", "rms_norm", {"logits"}, {"b"});
  // The fused norm gradients (t_raw as dy), with a scale over a normalised dim and without.
  g.Op("lng", "layer_norm_grad", {"logits", "gain", "t_raw"}, {"v"}).Attr("epsilon", F(0.01f));
  g.Op("lng_sv", "layer_norm_grad", {"logits", "t_raw"}, {"s", "v"});
  g.Op("lng_gs", "layer_norm_grad", {"logits", "gain_s", "t_raw"}, {"v", "s"});
  g.Op("rmsg", "rms_norm_grad", {"logits", "gain", "t_raw"}, {"v"});
  g.Op("rmsg_b", "rms_norm_grad", {"logits", "t_raw"}, {"b"}).Attr("epsilon", F(0.5f));
  g.Op("targets", "softmax", {"t_raw"}, {"v"});
  g.Op("xent", "softmax_cross_entropy", {"logits", "targets"}, {"v"});
  g.Op("t_vbs", "einsum", {"t_raw"}).Shaped("v:8,b:4,s:4");
  g.Op("targets2", "softmax", {"t_vbs"}, {"v"});
  g.Op("xent2", "softmax_cross_entropy", {"logits", "targets2"}, {"v"});
  g.Op("targets_sv", "softmax", {"t_raw"}, {"s", "v"});
  g.Op("xent_sv", "softmax_cross_entropy", {"logits", "targets_sv"}, {"s", "v"});
  return g.Build();
}

TensorMap RandomFeeds(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TensorMap feeds;
  for (const std::string& name : g.Placeholders()) {
    Tensor t(DType::kFloat32, g.type(name).shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
    feeds[name] = std::move(t);
  }
  return feeds;
}

int CountCollectives(const v1::Program& p) {
  int n = 0;
  for (const v1::Instruction& inst : p.instructions()) n += inst.has_collective();
  return n;
}

struct Case {
  std::string mesh;
  std::string layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

// Runs `g` under `c` with both kernel runners; every tensor must equal the interpreter's. Returns
// the program.
v1::Program ExpectMatchesReference(const Graph& g, const Case& c) {
  SCOPED_TRACE(absl::StrCat("mesh ", c.mesh, " layout '", c.layout, "'"));
  const Mesh mesh = Mesh::Parse(c.mesh).value();
  const LayoutRules rules = LayoutRules::Parse(c.layout, mesh).value();
  absl::StatusOr<v1::Program> program = Lower(g, mesh, rules);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  const TensorMap feeds = RandomFeeds(g, 11);
  absl::StatusOr<TensorMap> want = Interpret(g, feeds);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!want.ok()) return {};
  for (const KernelRunner* kernels : {&ReferenceKernels(), &CpuKernels()}) {
    SCOPED_TRACE(kernels == &CpuKernels() ? "CpuKernels" : "ReferenceKernels");
    SimulatedMeshOptions options;
    options.kernels = kernels;
    absl::StatusOr<TensorMap> got = RunOnSimulatedMesh(*program, feeds, options);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) continue;
    for (const auto& [name, value] : *want) {
      EXPECT_TRUE(got->count(name)) << name;
      if (!got->count(name)) continue;
      EXPECT_LE(MaxRelativeError(got->at(name), value), 1e-5) << "tensor " << name;
    }
  }
  return *program;
}

// Dims: b, v, s, h (never s and h in one tensor). Each mesh has layouts that split the reduced /
// normalised dims (v, s, b) and layouts that do not.
std::vector<Case> Cases() {
  return {
      {"p:1", ""},
      {"p:1", "v:p"},
      {"p:1", "b:p"},
      {"p:1", "s:p"},
      {"p:4", ""},
      {"p:4", "b:p"},
      {"p:4", "v:p"},
      {"p:4", "s:p,h:p"},
      {"rows:2,cols:2", ""},
      {"rows:2,cols:2", "b:rows,v:cols"},
      {"rows:2,cols:2", "v:rows,s:cols,h:cols"},
      {"rows:2,cols:2", "s:rows,v:cols"},
      {"rows:2,cols:2", "b:cols,h:rows"},
      {"x:2,y:2,z:2", ""},
      {"x:2,y:2,z:2", "b:x,s:y,v:z,h:y"},
      {"x:2,y:2,z:2", "v:x,h:z"},
      {"x:2,y:2,z:2", "s:x,v:y,b:z,h:x"},
      {"x:2,y:2,z:2", "b:y,v:x"},
  };
}

class MathMeshTest : public ::testing::TestWithParam<Case> {};

TEST_P(MathMeshTest, ElementwiseNeverCommunicates) {
  const v1::Program p = ExpectMatchesReference(ElementwiseGraph(), GetParam());
  EXPECT_EQ(CountCollectives(p), 0);
}

TEST_P(MathMeshTest, Reductions) { ExpectMatchesReference(ReduceGraph(), GetParam()); }

TEST_P(MathMeshTest, NormalisationAndCrossEntropy) {
  ExpectMatchesReference(NormGraph(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Meshes, MathMeshTest, ::testing::ValuesIn(Cases()));

// "KIND OP(mesh dims) slice-shape" for each collective of `source_op`, in program order.
std::vector<std::string> CollectivesOf(const v1::Program& p, const std::string& source_op) {
  std::vector<std::string> out;
  for (const v1::Instruction& inst : p.instructions()) {
    if (!inst.has_collective() || inst.source_op() != source_op) continue;
    const v1::Collective& c = inst.collective();
    std::vector<std::string> axes;
    for (int a : c.mesh_axes()) axes.push_back(p.mesh().dims(a).name());
    out.push_back(absl::StrCat(v1::Collective::Kind_Name(c.kind()), " ",
                               v1::ReduceOp_Name(c.reduce_op()), "(", absl::StrJoin(axes, ","),
                               ") ", Shape::FromProto(inst.slice_shape()).value().ToString()));
  }
  return out;
}

// The local op types `source_op` runs, in program order.
std::vector<std::string> LocalsOf(const v1::Program& p, const std::string& source_op) {
  std::vector<std::string> out;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.has_local() && inst.source_op() == source_op) out.push_back(inst.local().type());
  }
  return out;
}

v1::Program LowerFor(const Graph& g, const std::string& mesh_text, const std::string& layout) {
  const Mesh mesh = Mesh::Parse(mesh_text).value();
  absl::StatusOr<v1::Program> p = Lower(g, mesh, LayoutRules::Parse(layout, mesh).value());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : v1::Program();
}

bool HasGatherOrAllToAll(const v1::Program& p) {
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.has_collective() && (inst.collective().kind() == v1::Collective::ALLGATHER ||
                                  inst.collective().kind() == v1::Collective::ALLTOALL)) {
      return true;
    }
  }
  return false;
}

using Strings = std::vector<std::string>;

TEST(MathLoweringTest, SoftmaxOverSplitVocabAllreducesMaxThenSumAndNeverGathers) {
  const Graph g = NormGraph();
  const v1::Program p = LowerFor(g, "rows:2,cols:2", "b:rows,v:cols");
  EXPECT_EQ(CollectivesOf(p, "sm"), Strings({"ALLREDUCE REDUCE_MAX(cols) [b:2, s:4]",
                                             "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "lsm"), CollectivesOf(p, "sm"));
  EXPECT_EQ(CollectivesOf(p, "xent"), Strings({"ALLREDUCE REDUCE_MAX(cols) [b:2, s:4]",
                                               "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]",
                                               "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "ln"), Strings({"ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]",
                                             "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "rms"), Strings({"ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  // log_softmax over the split batch dim allreduces over rows; nothing else communicates.
  EXPECT_EQ(CollectivesOf(p, "lsm_b"), Strings({"ALLREDUCE REDUCE_MAX(rows) [s:4, v:4]",
                                                "ALLREDUCE REDUCE_SUM(rows) [s:4, v:4]"}));
  EXPECT_EQ(LocalsOf(p, "sm"), Strings({"reduce_max", "sub", "exp", "reduce_sum", "div"}));
  EXPECT_FALSE(HasGatherOrAllToAll(p));
}

TEST(MathLoweringTest, TwoSplitNormalisedDimsAllreduceOverBothMeshDimsAtOnce) {
  const v1::Program p = LowerFor(NormGraph(), "rows:2,cols:2", "s:rows,v:cols");
  EXPECT_EQ(CollectivesOf(p, "sm_sv"), Strings({"ALLREDUCE REDUCE_MAX(rows,cols) [b:4]",
                                                "ALLREDUCE REDUCE_SUM(rows,cols) [b:4]"}));
  EXPECT_EQ(CollectivesOf(p, "sm"), Strings({"ALLREDUCE REDUCE_MAX(cols) [b:4, s:2]",
                                             "ALLREDUCE REDUCE_SUM(cols) [b:4, s:2]"}));
  EXPECT_FALSE(HasGatherOrAllToAll(p));
}

TEST(MathLoweringTest, UnsplitNormalisedDimsRunOneLocalOp) {
  const v1::Program p = LowerFor(NormGraph(), "rows:2,cols:2", "b:rows,s:cols");
  for (const char* op : {"sm", "lsm", "ln", "rms", "xent"}) {
    EXPECT_TRUE(CollectivesOf(p, op).empty()) << op;
  }
  EXPECT_EQ(LocalsOf(p, "sm"), Strings({"softmax"}));
  EXPECT_EQ(LocalsOf(p, "ln"), Strings({"layer_norm"}));
  EXPECT_EQ(LocalsOf(p, "xent"), Strings({"softmax_cross_entropy"}));
  // Over b (split on rows) they do communicate.
  EXPECT_EQ(CollectivesOf(p, "rms_b"), Strings({"ALLREDUCE REDUCE_SUM(rows) [s:2, v:8]"}));
  // A mesh dim of size 1 splits nothing.
  const v1::Program p1 = LowerFor(NormGraph(), "p:1", "v:p");
  EXPECT_EQ(CountCollectives(p1), 0);
  EXPECT_EQ(LocalsOf(p1, "sm"), Strings({"softmax"}));
}

TEST(MathLoweringTest, NormGradOverSplitModelDimAllreducesItsRowSumsAndNeverGathers) {
  const v1::Program p = LowerFor(NormGraph(), "rows:2,cols:2", "b:rows,v:cols");
  // layer_norm_grad: the sums of x, of xc^2, of g and of g xhat, over the mesh dim splitting v,
  // each [b, s] on b's half of the rows.
  const std::string sum = "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]";
  EXPECT_EQ(CollectivesOf(p, "lng"), Strings({sum, sum, sum, sum}));
  EXPECT_EQ(CollectivesOf(p, "rmsg"), Strings({sum, sum}));  // x^2 and g xhat
  EXPECT_EQ(LocalsOf(p, "rmsg"), Strings({"square", "reduce_sum", "mul", "add", "rsqrt", "mul",
                                          "mul", "mul", "reduce_sum", "mul", "mul", "sub", "mul"}));
  // Two split normalised dims: over both mesh dims at once.
  const v1::Program q = LowerFor(NormGraph(), "rows:2,cols:2", "s:rows,v:cols");
  const std::string both = "ALLREDUCE REDUCE_SUM(rows,cols) [b:4]";
  EXPECT_EQ(CollectivesOf(q, "lng_sv"), Strings({both, both, both, both}));
  EXPECT_EQ(CollectivesOf(q, "lng_gs"), Strings({both, both, both, both}));
  EXPECT_FALSE(HasGatherOrAllToAll(p));
  EXPECT_FALSE(HasGatherOrAllToAll(q));
  // Normalised dims not split: one local op each, no collectives.
  const v1::Program local = LowerFor(NormGraph(), "rows:2,cols:2", "b:rows,s:cols");
  for (const char* op : {"lng", "rmsg"}) {
    EXPECT_TRUE(CollectivesOf(local, op).empty()) << op;
  }
  EXPECT_EQ(LocalsOf(local, "lng"), Strings({"layer_norm_grad"}));
  EXPECT_EQ(LocalsOf(local, "rmsg"), Strings({"rms_norm_grad"}));
  // Over the split batch dim it does communicate.
  EXPECT_EQ(CollectivesOf(local, "rmsg_b"), Strings({"ALLREDUCE REDUCE_SUM(rows) [s:2, v:8]",
                                                     "ALLREDUCE REDUCE_SUM(rows) [s:2, v:8]"}));
}

TEST(MathLoweringTest, ReductionsAllreduceWithTheirOwnOp) {
  const v1::Program p = LowerFor(ReduceGraph(), "rows:2,cols:2", "b:rows,v:cols");
  EXPECT_EQ(CollectivesOf(p, "r_sum"), Strings({"ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_min"), Strings({"ALLREDUCE REDUCE_MIN(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_max"), Strings({"ALLREDUCE REDUCE_MAX(rows) [s:4, v:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_any"), Strings({"ALLREDUCE REDUCE_MAX(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_all"), Strings({"ALLREDUCE REDUCE_MIN(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_all_bs"), Strings({"ALLREDUCE REDUCE_MIN(rows) [v:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_lse"), Strings({"ALLREDUCE REDUCE_MAX(cols) [b:2, s:4]",
                                                "ALLREDUCE REDUCE_SUM(cols) [b:2, s:4]"}));
  EXPECT_EQ(CollectivesOf(p, "r_min_all"), Strings({"ALLREDUCE REDUCE_MIN(rows,cols) []"}));
  EXPECT_EQ(CollectivesOf(p, "i_min"), Strings({"ALLREDUCE REDUCE_MIN(rows,cols) [s:4]"}));
  EXPECT_EQ(LocalsOf(p, "r_any"), Strings({"reduce_any"}));
  EXPECT_FALSE(HasGatherOrAllToAll(p));
  // Nothing split that is reduced: no collectives for the reductions over s.
  EXPECT_TRUE(CollectivesOf(p, "i_sum").empty());
}

}  // namespace
}  // namespace meshrt
