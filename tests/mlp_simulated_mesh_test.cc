// The MLP forward graph lowered for many meshes and layouts, executed on the simulated mesh (one
// thread per processor, in-memory collectives), and compared with the single-process reference
// interpreter. This is layout invariance, the correctness contract of DESIGN.md §2.
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/random_feeds.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

// x[batch,d_in]·w1[d_in,hidden] -> relu -> ·w2[hidden,d_out] -> reduce_sum over d_out, plus a
// rename (layout change by renaming hidden), a reshape renaming both dims (moves splits between
// dims) and a reshape that splits d_out in two.
Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h");
  TensorRef r = b.Relu(h, "r");
  TensorRef y = b.Einsum({r, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(y);
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  TensorRef t = b.RenameDim(r, "hidden", "hidden2", "t");
  b.MarkOutput(b.ReduceMean(t, {"batch"}, "u"));
  TensorRef q = b.Reshape(r, Shape({{"batch_q", 8}, {"hidden_q", 32}}), "q");
  b.MarkOutput(b.ReduceMax(q, {"hidden_q"}, "qm"));
  TensorRef z = b.Reshape(y, Shape({{"batch", 8}, {"o1", 2}, {"o2", 4}}), "z");
  b.MarkOutput(b.Exp(b.Scale(z, 0.01f), "ez"));
  return b.Build().value();
}

struct Case {
  std::string mesh;
  std::string layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

void ExpectMatchesReference(const Graph& g, const Case& c, const KernelRunner& kernels,
                            int* collectives = nullptr) {
  SCOPED_TRACE(absl::StrCat("mesh ", c.mesh, " layout '", c.layout, "'"));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(c.mesh));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(c.layout, mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
  const TensorMap feeds = RandomFeeds(g, 7);
  ASSERT_OK_AND_ASSIGN(TensorMap expected, Interpret(g, feeds));
  SimulatedMeshOptions options;
  options.kernels = &kernels;
  ASSERT_OK_AND_ASSIGN(TensorMap actual, RunOnSimulatedMesh(program, feeds, options));
  for (const auto& [name, want] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_LE(MaxRelativeError(actual.at(name), want), 1e-5) << "tensor " << name;
  }
  if (collectives != nullptr) {
    for (const v1::Instruction& inst : program.instructions()) *collectives += inst.has_collective();
  }
}

// At least five layouts per mesh, including d_in split (the first einsum must allreduce) and a
// layout change through the rename of hidden.
const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"p:1", ""},
      {"p:1", "batch:p"},
      {"p:1", "d_in:p"},
      {"p:1", "hidden:p,o1:p"},
      {"p:1", "hidden:p,batch_q:p,o2:p"},
      {"p:4", ""},
      {"p:4", "batch:p"},
      {"p:4", "d_in:p"},
      {"p:4", "hidden:p"},
      {"p:4", "d_out:p,hidden2:p"},
      {"p:4", "batch:p,hidden_q:p"},
      {"p:4", "d_in:p,o2:p"},
      {"rows:2,cols:2", ""},
      {"rows:2,cols:2", "batch:rows,hidden:cols"},
      {"rows:2,cols:2", "d_in:rows,hidden:cols"},
      {"rows:2,cols:2", "batch:rows,d_in:cols,hidden2:cols"},
      {"rows:2,cols:2", "hidden:cols,hidden2:rows"},
      {"rows:2,cols:2", "batch:rows,hidden_q:rows,o2:cols,d_in:cols"},
      {"rows:2,cols:2", "d_out:rows,batch:cols,o1:rows"},
      {"x:2,y:2,z:2", ""},
      {"x:2,y:2,z:2", "batch:x,hidden:y,d_in:z"},
      {"x:2,y:2,z:2", "d_in:x,d_out:y,hidden2:z"},
      {"x:2,y:2,z:2", "batch:z,hidden:x,batch_q:x,hidden_q:y"},
      {"x:2,y:2,z:2", "batch:x,d_in:y,hidden:z,o2:y,hidden2:y"},
      {"x:2,y:2,z:2", "hidden:x,hidden2:y,hidden_q:z,d_out:z"},
  };
  return *cases;
}

class MlpLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(MlpLayoutTest, ReferenceKernelsMatchInterpreter) {
  ExpectMatchesReference(MlpGraph(), GetParam(), ReferenceKernels());
}

TEST_P(MlpLayoutTest, CpuKernelsMatchInterpreter) {
  ExpectMatchesReference(MlpGraph(), GetParam(), CpuKernels());
}

INSTANTIATE_TEST_SUITE_P(Meshes, MlpLayoutTest, ::testing::ValuesIn(Cases()));

TEST(MlpLayoutTest, SplitDinForcesAnAllreduceAndRenameMovesData) {
  int with_d_in = 0, with_rename = 0;
  ExpectMatchesReference(MlpGraph(), {"rows:2,cols:2", "d_in:rows,hidden:cols"},
                         ReferenceKernels(), &with_d_in);
  ExpectMatchesReference(MlpGraph(), {"rows:2,cols:2", "hidden:cols,hidden2:rows"},
                         ReferenceKernels(), &with_rename);
  EXPECT_GE(with_d_in, 2);    // allreduce over rows (d_in) and over cols (hidden)
  EXPECT_GE(with_rename, 2);  // allgather of hidden over cols, plus the second einsum's allreduce
}

// Reshapes kept local because a split dim stays outermost ([batch, len] -> [tokens] -> back, a
// regrouping [a, b] -> [x, y]), and ones that must move data, all equal to the interpreter.
TEST(MlpLayoutTest, LocalAndMovingReshapesMatchInterpreter) {
  GraphBuilder g;
  TensorRef x = g.Placeholder("x", Shape({{"batch", 8}, {"len", 6}, {"d", 2}}));
  TensorRef t = g.Reshape(x, Shape({{"tokens", 48}, {"d", 2}}), "t");
  g.MarkOutput(g.Exp(g.Scale(t, 0.1f), "et"));
  TensorRef back = g.Reshape(t, Shape({{"batch", 8}, {"len", 6}, {"d", 2}}), "back");
  g.MarkOutput(g.ReduceSum(back, {"len"}, "s"));
  TensorRef r = g.Reshape(x, Shape({{"xa", 4}, {"xb", 24}}), "r");
  g.MarkOutput(g.ReduceMax(r, {"xb"}, "rm"));
  const Graph graph = g.Build().value();
  for (const Case& c : std::vector<Case>{{"rows:2,cols:2", "batch:rows,tokens:rows"},
                                         {"rows:2,cols:2", "batch:rows,tokens:rows,d:cols"},
                                         {"rows:2,cols:2", "batch:rows,tokens:cols,xa:rows"},
                                         {"p:4", "batch:p,tokens:p,xa:p"},
                                         {"p:2", "len:p,tokens:p"},
                                         {"p:2", "d:p,xa:p"}}) {
    ExpectMatchesReference(graph, c, CpuKernels());
    ExpectMatchesReference(graph, c, ReferenceKernels());
  }
}

// The attention heads split and merge ([batch, len, d_model] <-> [batch, len, heads, d_kv]), a
// rename that changes mesh dim, a reshape swapping two mesh dims between dims, and one that carries
// a split through and moves it after: the plans of reshape_lowering_test, equal to the interpreter.
Graph ReshapeGraph() {
  GraphBuilder g;
  TensorRef x = g.Placeholder("x", Shape({{"batch", 8}, {"len", 4}, {"d_model", 16}}));
  TensorRef h = g.Reshape(x, Shape({{"batch", 8}, {"len", 4}, {"heads", 4}, {"d_kv", 4}}), "split");
  g.MarkOutput(g.Exp(g.Scale(h, 0.1f), "eh"));
  TensorRef m = g.Reshape(h, Shape({{"batch", 8}, {"len", 4}, {"d_model", 16}}), "merge");
  g.MarkOutput(g.ReduceSum(m, {"len"}, "ms"));
  TensorRef r = g.RenameDim(x, "batch", "batch2", "rename");
  g.MarkOutput(g.ReduceMax(r, {"d_model"}, "rm"));
  TensorRef t = g.Placeholder("t", Shape({{"a", 4}, {"b", 4}, {"c", 4}}));
  g.MarkOutput(g.Reshape(t, Shape({{"a2", 4}, {"b2", 4}, {"c2", 4}}), "swap"));
  TensorRef u = g.Placeholder("u", Shape({{"pa", 16}, {"pb", 8}}));
  g.MarkOutput(g.Reshape(u, Shape({{"px", 4}, {"py", 4}, {"pz", 8}}), "carry"));
  return g.Build().value();
}

TEST(MlpLayoutTest, ReshapesAndRenamesAcrossMeshDimsMatchInterpreter) {
  const Graph graph = ReshapeGraph();
  for (const Case& c : std::vector<Case>{
           {"rows:2,cols:2", "batch:rows,heads:cols"},
           {"rows:2,cols:2", "batch:rows,heads:cols,d_model:cols"},
           {"rows:2,cols:2", "batch:rows,d_kv:cols,d_model:cols"},
           {"rows:2,cols:2", "batch:rows,batch2:cols,a:rows,b:cols,a2:cols,b2:rows"},
           {"rows:2,cols:2", "len:rows,heads:cols,pa:rows,py:rows"},
           {"rows:4,cols:4", "batch:rows,batch2:cols,pa:cols,py:cols"},
           {"rows:4,cols:2", "heads:rows,batch2:rows,batch:cols,a:rows,a2:cols"},
           {"p:4", "heads:p,pa:p,py:p"},
           {"p:4", "d_kv:p,d_model:p,b:p,b2:p"},
           {"x:2,y:2,z:2", "batch:x,heads:y,batch2:z,a:x,b:y,a2:y,b2:x,c2:z"},
       }) {
    ExpectMatchesReference(graph, c, CpuKernels());
    ExpectMatchesReference(graph, c, ReferenceKernels());
  }
}

// Random valid layouts of the reshape graph: many different Reshard plans, all equal.
TEST(MlpLayoutTest, RandomLayoutsOfReshapesMatchInterpreter) {
  const Graph g = ReshapeGraph();
  const std::vector<std::string> dims = {"batch", "len", "d_model", "heads", "d_kv", "batch2", "a",
                                         "b",     "c",   "a2",      "b2",    "c2",   "pa",     "pb",
                                         "px",    "py",  "pz"};
  std::mt19937 rng(14);
  for (const char* mesh_text : {"rows:2,cols:2", "a:2,b:4", "x:2,y:2,z:2"}) {
    Mesh mesh = Mesh::Parse(mesh_text).value();
    int tries = 0, valid = 0;
    while (valid < 12 && tries < 2000) {
      ++tries;
      std::vector<std::string> rules;
      for (const std::string& d : dims) {
        int pick = static_cast<int>(rng() % (mesh.ndims() + 1));
        if (pick < mesh.ndims()) rules.push_back(absl::StrCat(d, ":", mesh.dims()[pick].name));
      }
      const std::string layout = absl::StrJoin(rules, ",");
      LayoutRules r = LayoutRules::Parse(layout, mesh).value();
      if (!ValidateLayouts(g, mesh, r).ok()) continue;
      ++valid;
      ExpectMatchesReference(g, {mesh_text, layout}, CpuKernels());
    }
    EXPECT_GE(valid, 5) << mesh_text;
  }
}

// Two einsum dims on one mesh dim: both the gather and the reduce-scatter plans are right.
TEST(MlpLayoutTest, EinsumPlansWithSharedMeshDimMatchInterpreter) {
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{256, 8}, {8, 256}}) {
    GraphBuilder g;
    TensorRef x = g.Placeholder("x", Shape({{"a", a}, {"c", 4}}));
    TensorRef w = g.Placeholder("w", Shape({{"b", b}, {"c", 4}}));
    g.MarkOutput(g.Einsum({x, w}, Shape({{"b", b}, {"c", 4}}), "z"));
    const Graph graph = g.Build().value();
    for (const Case& c : std::vector<Case>{{"m:2", "a:m,b:m"},
                                           {"m:4", "a:m,b:m"},
                                           {"m:2,n:2", "a:m,b:m,c:n"},
                                           {"m:2,n:2", "a:m,b:n"}}) {
      ExpectMatchesReference(graph, c, CpuKernels());
    }
  }
}

// Every valid assignment we can draw: each tensor dim of the graph goes to a random mesh dim or to
// none; layouts the rules make invalid are skipped (they are refused, which graph_test covers).
TEST(MlpLayoutTest, RandomValidLayouts) {
  const Graph g = MlpGraph();
  const std::vector<std::string> dims = {"batch", "d_in",  "hidden", "d_out", "hidden2",
                                         "batch_q", "hidden_q", "o1", "o2"};
  std::mt19937 rng(2024);
  int ran = 0;
  for (const char* mesh_text : {"p:2", "rows:2,cols:2", "a:2,b:4", "x:2,y:2,z:2"}) {
    Mesh mesh = Mesh::Parse(mesh_text).value();
    int tries = 0, valid = 0;
    while (valid < 12 && tries < 500) {
      ++tries;
      std::vector<std::string> rules;
      for (const std::string& d : dims) {
        int pick = static_cast<int>(rng() % (mesh.ndims() + 1));
        if (pick < mesh.ndims()) rules.push_back(absl::StrCat(d, ":", mesh.dims()[pick].name));
      }
      std::string layout = absl::StrJoin(rules, ",");
      LayoutRules r = LayoutRules::Parse(layout, mesh).value();
      if (!ValidateLayouts(g, mesh, r).ok()) continue;
      ++valid;
      ExpectMatchesReference(g, {mesh_text, layout}, CpuKernels());
    }
    EXPECT_GE(valid, 5) << mesh_text;
    ran += valid;
  }
  EXPECT_GE(ran, 20);
}

}  // namespace
}  // namespace meshrt
