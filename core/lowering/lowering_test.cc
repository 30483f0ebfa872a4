// Lowering structure: which collectives are emitted, over which mesh dims, with which slice shapes.
#include "core/lowering/lowering.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// "kind(mesh dims) slice_shape [axis info]" for every communicating step, in order.
std::vector<std::string> Collectives(const v1::Program& p) {
  std::vector<std::string> out;
  for (const v1::Instruction& inst : p.instructions()) {
    std::string axes;
    if (inst.has_collective()) {
      for (int a : inst.collective().mesh_axes()) {
        absl::StrAppend(&axes, axes.empty() ? "" : ",", p.mesh().dims(a).name());
      }
    }
    std::string shape = Shape::FromProto(inst.slice_shape()).value().ToString();
    if (inst.has_collective()) {
      const v1::Collective& c = inst.collective();
      switch (c.kind()) {
        case v1::Collective::ALLREDUCE:
          out.push_back(absl::StrCat("allreduce ", v1::ReduceOp_Name(c.reduce_op()), "(", axes,
                                     ") ", shape));
          break;
        case v1::Collective::ALLGATHER:
          out.push_back(absl::StrCat("allgather(", axes, ") axis ", c.concat_axis(), " ", shape));
          break;
        case v1::Collective::REDUCE_SCATTER:
          out.push_back(absl::StrCat("reduce_scatter(", axes, ") axis ", c.split_axis(), " ", shape));
          break;
        case v1::Collective::ALLTOALL:
          out.push_back(absl::StrCat("alltoall(", axes, ") split ", c.split_axis(), " concat ",
                                     c.concat_axis(), " ", shape));
          break;
        default:
          out.push_back("other");
      }
    } else if (inst.has_local_slice()) {
      out.push_back(absl::StrCat("slice(", p.mesh().dims(inst.local_slice().mesh_axis()).name(),
                                 ") axis ", inst.local_slice().axis(), " ", shape));
    }
  }
  return out;
}

std::string SliceShapeOf(const v1::Program& p, const std::string& tensor) {
  for (const v1::ProgramTensor& t : p.outputs()) {
    if (t.name() != tensor) continue;
    for (const v1::Instruction& inst : p.instructions()) {
      if (inst.output() == t.buffer()) return Shape::FromProto(inst.slice_shape()).value().ToString();
    }
    for (const v1::ProgramTensor& in : p.inputs()) {
      if (in.buffer() == t.buffer()) {
        Mesh m = Mesh::FromProto(p.mesh()).value();
        return SliceShape(Shape::FromProto(in.shape()).value(), TensorLayout::FromProto(in.layout()), m)
            .ToString();
      }
    }
  }
  return "?";
}

Graph Mlp() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  TensorRef y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  return b.Build().value();
}

v1::Program LowerOrDie(const Graph& g, const std::string& mesh, const std::string& layout) {
  Mesh m = Mesh::Parse(mesh).value();
  auto p = Lower(g, m, LayoutRules::Parse(layout, m).value());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : v1::Program();
}

TEST(LoweringTest, DataAndModelParallelMlp) {
  v1::Program p = LowerOrDie(Mlp(), "rows:2,cols:2", "batch:rows,hidden:cols");
  // Only the second einsum reduces a split dim (hidden over cols). Its partial sum stays partial
  // through reduce_sum over d_out, so a step resolves only s; y's own resolve (the first one) runs
  // only when y is fetched, and is marked so.
  EXPECT_EQ(Collectives(p),
            (std::vector<std::string>{"allreduce REDUCE_SUM(cols) [batch:4, d_out:8]",
                                      "allreduce REDUCE_SUM(cols) [batch:4]"}));
  for (const v1::ProgramTensor& t : p.outputs()) {
    EXPECT_EQ(t.resolved_on_fetch(), t.name() == "y") << t.name();
  }
  EXPECT_EQ(SliceShapeOf(p, "x"), "[batch:4, d_in:16]");
  EXPECT_EQ(SliceShapeOf(p, "w1"), "[d_in:16, hidden:16]");
  EXPECT_EQ(SliceShapeOf(p, "h"), "[batch:4, hidden:16]");
  EXPECT_EQ(SliceShapeOf(p, "s"), "[batch:4]");
}

TEST(LoweringTest, SplitContractedDimAllreduces) {
  v1::Program p = LowerOrDie(Mlp(), "rows:2,cols:2", "d_in:rows,d_out:cols");
  EXPECT_EQ(Collectives(p),
            (std::vector<std::string>{"allreduce REDUCE_SUM(rows) [batch:8, hidden:32]",
                                      "allreduce REDUCE_SUM(cols) [batch:8]"}));
}

TEST(LoweringTest, PureDataParallelNeedsNoCommunicationForward) {
  v1::Program p = LowerOrDie(Mlp(), "b:4", "batch:b");
  EXPECT_TRUE(Collectives(p).empty());
  EXPECT_EQ(SliceShapeOf(p, "y"), "[batch:2, d_out:8]");
}

TEST(LoweringTest, OneMeshAxisOnTwoEinsumDimsGathersOne) {
  // a and b never share a tensor, so "a:m,b:m" is valid; the einsum x[a]·y[b] -> [] would put m on
  // both. The first reduced dim (a) keeps m; y's b is gathered before the local product.
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}}));
  TensorRef y = b.Placeholder("y", Shape({{"b", 6}}));
  b.Einsum({x, y}, Shape(), "z");
  v1::Program p = LowerOrDie(b.Build().value(), "m:2", "a:m,b:m");
  EXPECT_EQ(Collectives(p), (std::vector<std::string>{"allgather(m) axis 0 [b:6]",
                                                     "allreduce REDUCE_SUM(m) []"}));
}

TEST(LoweringTest, EinsumPicksReduceScatterWhenGatheringTheReducedOperandCostsMore) {
  // z[b] = sum_a x[a] * w[b] with a and b both on m. Gathering x (1024 floats) would cost more than
  // gathering w (8 floats) and reduce-scattering z's partial sums onto b.
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 1024}}));
  TensorRef w = b.Placeholder("w", Shape({{"b", 8}}));
  b.Einsum({x, w}, Shape({{"b", 8}}), "z");
  v1::Program p = LowerOrDie(b.Build().value(), "m:2", "a:m,b:m");
  EXPECT_EQ(Collectives(p), (std::vector<std::string>{"allgather(m) axis 0 [b:8]",
                                                     "reduce_scatter(m) axis 0 [b:4]"}));
  // With the sizes the other way round, gathering the reduced operand is cheaper.
  GraphBuilder c;
  TensorRef x2 = c.Placeholder("x", Shape({{"a", 8}}));
  TensorRef w2 = c.Placeholder("w", Shape({{"b", 1024}}));
  c.Einsum({x2, w2}, Shape({{"b", 1024}}), "z");
  v1::Program q = LowerOrDie(c.Build().value(), "m:2", "a:m,b:m");
  EXPECT_EQ(Collectives(q), (std::vector<std::string>{"allgather(m) axis 0 [a:8]"}));
}

TEST(LoweringTest, RenameGathersOrSlices) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"hidden", 6}}));
  TensorRef g = b.RenameDim(x, "hidden", "hidden_all", "g");   // hidden:cols -> whole
  b.RenameDim(g, "batch", "batch_split", "t");                 // batch whole -> batch_split:cols
  Graph graph = b.Build().value();
  v1::Program p = LowerOrDie(graph, "cols:2", "hidden:cols,batch_split:cols");
  EXPECT_EQ(Collectives(p), (std::vector<std::string>{"allgather(cols) axis 1 [batch:8, hidden:6]",
                                                     "slice(cols) axis 0 [batch:4, hidden_all:6]"}));
}

TEST(LoweringTest, MovingASplitBetweenDimsIsOneAlltoall) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}, {"b", 6}}));
  b.Reshape(x, Shape({{"a2", 4}, {"b2", 6}}), "y");
  v1::Program p = LowerOrDie(b.Build().value(), "rows:2", "a:rows,b2:rows");
  EXPECT_EQ(Collectives(p),
            (std::vector<std::string>{"alltoall(rows) split 1 concat 0 [a:4, b:3]"}));
  EXPECT_EQ(SliceShapeOf(p, "y"), "[a2:4, b2:3]");
}

TEST(LoweringTest, ReshapeMergingDimsMovesTheSplitToTheOutermostOneByAlltoall) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}, {"b", 6}, {"c", 2}}));
  b.Reshape(x, Shape({{"ab", 24}, {"c", 2}}), "y");
  // Invalid: x has b and c on m.
  Mesh m = Mesh::Parse("m:2").value();
  EXPECT_FALSE(Lower(b.Build().value(), m, LayoutRules::Parse("b:m,c:m", m).value()).ok());
  // b is inside the merged group: its split moves to a (the group's outermost dim, in step with
  // ab) by one alltoall, and the reshape is then local (not an allgather of all of x and a slice).
  v1::Program q = LowerOrDie(b.Build().value(), "m:2", "b:m,ab:m");
  EXPECT_EQ(Collectives(q),
            (std::vector<std::string>{"alltoall(m) split 0 concat 1 [a:2, b:6, c:2]"}));
  EXPECT_EQ(SliceShapeOf(q, "y"), "[ab:12, c:2]");
  // c is kept intact by the reshape, so its split survives without communication.
  v1::Program r = LowerOrDie(b.Build().value(), "m:2", "c:m");
  EXPECT_TRUE(Collectives(r).empty());
}

TEST(LoweringTest, ReshapesThatKeepASplitDimOutermostAreLocal) {
  // [batch, len] -> [tokens] and back, with batch and tokens split alike: every processor's rows
  // are its tokens, so nothing moves (it used to be an allgather and a slice each way).
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"len", 6}}));
  TensorRef t = b.Reshape(x, Shape({{"tokens", 48}}), "t");
  b.Reshape(t, Shape({{"batch", 8}, {"len", 6}}), "back");
  v1::Program p = LowerOrDie(b.Build().value(), "rows:2,cols:2", "batch:rows,tokens:rows");
  EXPECT_TRUE(Collectives(p).empty()) << ::testing::PrintToString(Collectives(p));
  EXPECT_EQ(SliceShapeOf(p, "t"), "[tokens:24]");
  EXPECT_EQ(SliceShapeOf(p, "back"), "[batch:4, len:6]");
  // Regrouping [a:4, b:6] -> [x:2, y:12]: a and x cut the elements into the same blocks.
  GraphBuilder c;
  TensorRef y = c.Placeholder("y", Shape({{"a", 4}, {"b", 6}}));
  c.Reshape(y, Shape({{"x", 2}, {"y", 12}}), "r");
  v1::Program q = LowerOrDie(c.Build().value(), "m:2", "a:m,x:m");
  EXPECT_TRUE(Collectives(q).empty()) << ::testing::PrintToString(Collectives(q));
  EXPECT_EQ(SliceShapeOf(q, "r"), "[x:1, y:12]");
  // Not in step: an inner dim's split cannot stay ([a, b] -> [ab] with b split): b is gathered.
  GraphBuilder d;
  TensorRef z = d.Placeholder("z", Shape({{"a", 4}, {"b", 6}}));
  d.Reshape(z, Shape({{"ab", 24}}), "ab");
  v1::Program r = LowerOrDie(d.Build().value(), "m:2", "b:m,ab:m");
  EXPECT_FALSE(Collectives(r).empty());
  EXPECT_EQ(SliceShapeOf(r, "ab"), "[ab:12]");
  // In step but not divisible: [a:3, b:8] -> [x:6, y:4] with x on m:2 (a:3 cannot split in two).
  GraphBuilder e;
  TensorRef w = e.Placeholder("w", Shape({{"a", 3}, {"b", 8}}));
  e.Reshape(w, Shape({{"x", 6}, {"y", 4}}), "xy");
  v1::Program s2 = LowerOrDie(e.Build().value(), "m:2", "x:m");
  EXPECT_EQ(SliceShapeOf(s2, "xy"), "[x:3, y:4]");
}

TEST(LoweringTest, ReduceMeanOverSplitDimScalesAfterAllreduce) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 4}, {"b", 6}}));
  b.ReduceMean(x, {"b"}, "m");
  b.ReduceMax(x, {"a"}, "mx");
  v1::Program p = LowerOrDie(b.Build().value(), "r:2,c:3", "a:r,b:c");
  std::vector<std::string> c = Collectives(p);
  std::sort(c.begin(), c.end());
  EXPECT_EQ(c, (std::vector<std::string>{"allreduce REDUCE_MAX(r) [b:2]",
                                         "allreduce REDUCE_SUM(c) [a:2]"}));
  int scales = 0;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.has_local() && inst.local().type() == "scale") {
      ++scales;
      EXPECT_FLOAT_EQ(inst.local().attrs().at("scalar").f(), 1.0f / 6);
    }
  }
  EXPECT_EQ(scales, 1);
}

TEST(LoweringTest, SizeOneMeshAxesNeverCommunicate) {
  v1::Program p = LowerOrDie(Mlp(), "rows:1,cols:1", "d_in:rows,hidden:cols");
  EXPECT_TRUE(Collectives(p).empty());
}

}  // namespace
}  // namespace meshrt
