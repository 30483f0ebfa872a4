// RequestLimits (core/ir/limits.h): every cap passes a request exactly at the limit and refuses one
// just over it, with the code, a message naming the culprit, and the flag that raises the limit.
#include "core/ir/limits.h"

#include <string>

#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using absl::StatusCode;

v1::Op Placeholder(const std::string& name, const std::vector<Dim>& dims) {
  v1::Op op;
  op.set_name(name);
  op.set_type("placeholder");
  *op.mutable_shape() = Shape(dims).ToProto();
  return op;
}

// `n` placeholders p0..p{n-1}, each [a:2].
v1::Graph Placeholders(int n) {
  v1::Graph g;
  for (int i = 0; i < n; ++i) *g.add_ops() = Placeholder(absl::StrCat("p", i), {{"a", 2}});
  return g;
}

// "prod" = the einsum (elementwise product) of `n` placeholders [a:2].
v1::Graph ProductOf(int n) {
  v1::Graph g = Placeholders(n);
  v1::Op* prod = g.add_ops();
  prod->set_name("prod");
  prod->set_type("einsum");
  *prod->mutable_shape() = Shape({{"a", 2}}).ToProto();
  for (int i = 0; i < n; ++i) prod->add_inputs(absl::StrCat("p", i));
  return g;
}

v1::Mesh MeshOf(const std::vector<Dim>& dims) {
  v1::Mesh m;
  for (const Dim& d : dims) {
    v1::Dim* pd = m.add_dims();
    pd->set_name(d.name);
    pd->set_size(d.size);
  }
  return m;
}

// Loops nested `depth` deep: the top graph runs a while_loop whose body runs one, and so on. Every
// tensor is [a:4] except in the innermost body, which sums the outer product "o" [a:4, b:4] of its
// carried value with itself. Every level is a valid while_loop.
v1::Graph NestedLoops(int depth) {
  GraphBuilder inner;
  TensorRef s = inner.Placeholder("s", Shape({{"a", 4}}));
  TensorRef o = inner.Einsum({s, inner.RenameDim(s, "a", "b")}, Shape({{"a", 4}, {"b", 4}}), "o");
  inner.MarkOutput(inner.ReduceSum(o, {"b"}, "d"));
  v1::Graph body = inner.proto();
  for (int level = 0; level < depth; ++level) {
    v1::Graph g;
    const bool top = level == depth - 1;
    *g.add_ops() = Placeholder("s", {{"a", 4}});
    v1::Op* loop = g.add_ops();
    loop->set_name(top ? "loop" : absl::StrCat("loop", level));
    loop->set_type("while_loop");
    loop->add_inputs("s");
    *loop->mutable_body() = body;
    (*loop->mutable_attrs())["trip_count"].set_i(2);
    (*loop->mutable_attrs())["carried"].mutable_strings()->add_values("s");
    (*loop->mutable_attrs())["output"].set_i(0);
    g.add_outputs(loop->name());
    body = std::move(g);
  }
  return body;
}

TEST(RequestLimitsTest, DefaultsAreValidAndZeroIsRefusedByFlag) {
  EXPECT_TRUE(CheckRequestLimits(RequestLimits()).ok());
  RequestLimits l;
  l.max_while_loop_depth = 0;
  EXPECT_TRUE(StatusIs(CheckRequestLimits(l), StatusCode::kInvalidArgument,
                       {"--max_while_loop_depth is 0", ">= 1"}));
}

TEST(RequestLimitsTest, GraphBytes) {
  RequestLimits l;
  l.max_graph_bytes = 1000;
  EXPECT_TRUE(CheckGraphBytes(1000, l).ok());
  EXPECT_TRUE(StatusIs(CheckGraphBytes(1001, l), StatusCode::kResourceExhausted,
                       {"1001 bytes", "limit of 1000", "--max_graph_bytes"}));
}

TEST(RequestLimitsTest, OpCountIncludesWhileLoopBodies) {
  RequestLimits l;
  l.max_ops = 5;
  EXPECT_TRUE(CheckGraphStructure(Placeholders(5), l).ok());
  EXPECT_TRUE(StatusIs(CheckGraphStructure(Placeholders(6), l), StatusCode::kResourceExhausted,
                       {"at least 6 ops", "limit of 5", "--max_ops"}));
  // NestedLoops(1): 2 ops on top, 4 in the body, which runs twice: 10 ops of program.
  l.max_ops = 10;
  EXPECT_TRUE(CheckGraphStructure(NestedLoops(1), l).ok());
  l.max_ops = 5;
  EXPECT_TRUE(StatusIs(CheckGraphStructure(NestedLoops(1), l), StatusCode::kResourceExhausted,
                       {"in the graph in the body of while_loop 'loop'", "--max_ops"}));
}

// Lowering repeats a loop's body trip_count times: a loop of 10^9 trips is refused, not unrolled.
TEST(RequestLimitsTest, UnrolledWhileLoopsCountTripsTimesTheirBody) {
  RequestLimits l;
  l.max_ops = 9;
  EXPECT_TRUE(StatusIs(CheckGraphStructure(NestedLoops(1), l), StatusCode::kResourceExhausted,
                       {"more than 9 ops once its while_loops are unrolled", "while_loop 'loop'",
                        "2 times", "--max_ops"}));
  v1::Graph huge = NestedLoops(1);
  (*huge.mutable_ops(1)->mutable_attrs())["trip_count"].set_i(int64_t{1} << 40);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(huge, RequestLimits()), StatusCode::kResourceExhausted,
                       {"1099511627776 times", "--max_ops"}));
  // Nested: 2^20 trips of a loop of 2^20 trips saturates without overflow.
  v1::Graph nested = NestedLoops(2);
  (*nested.mutable_ops(1)->mutable_attrs())["trip_count"].set_i(int64_t{1} << 40);
  (*nested.mutable_ops(1)->mutable_body()->mutable_ops(1)->mutable_attrs())["trip_count"].set_i(
      int64_t{1} << 40);
  EXPECT_EQ(CheckGraphStructure(nested, RequestLimits()).code(), StatusCode::kResourceExhausted);
}

// A million ops are refused by their count before Build looks at one of them: these ops have no
// names, which Build would refuse first with another message.
TEST(RequestLimitsTest, MillionOpGraphIsRefusedByCountBeforeBuild) {
  v1::Graph g;
  g.mutable_ops()->Reserve(1000000);
  for (int i = 0; i < 1000000; ++i) g.add_ops();
  absl::Status s = Graph::Build(g, RequestLimits()).status();
  EXPECT_TRUE(
      StatusIs(s, StatusCode::kResourceExhausted, {"1000000 ops", "limit of 200000", "--max_ops"}));
}

TEST(RequestLimitsTest, InputsPerOp) {
  RequestLimits l;
  l.max_inputs_per_op = 8;
  ASSERT_OK(Graph::Build(ProductOf(8), l).status());
  EXPECT_TRUE(StatusIs(Graph::Build(ProductOf(9), l).status(), StatusCode::kInvalidArgument,
                       {"op 'prod' (einsum)", "9 inputs", "limit of 8", "--max_inputs_per_op"}));
}

TEST(RequestLimitsTest, NameLengthOfOpsInputsDimsAndAttrs) {
  RequestLimits l;
  l.max_name_length = 16;
  const std::string ok(16, 'n'), long_name(17, 'n');
  ASSERT_OK(CheckGraphStructure(Placeholders(1), l));
  v1::Graph g;
  *g.add_ops() = Placeholder(ok, {{ok, 2}});
  ASSERT_OK(Graph::Build(g, l).status());

  g.mutable_ops(0)->set_name(long_name);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"op #0", "17 bytes long", "limit of 16", "--max_name_length"}));
  g.mutable_ops(0)->set_name("x");
  g.mutable_ops(0)->mutable_shape()->mutable_dims(0)->set_name(long_name);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"op 'x' (placeholder), its shape dim", "--max_name_length"}));
  g.mutable_ops(0)->mutable_shape()->mutable_dims(0)->set_name("a");
  (*g.mutable_ops(0)->mutable_attrs())[long_name].set_i(1);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"op 'x' (placeholder), an attr", "--max_name_length"}));
  g.mutable_ops(0)->mutable_attrs()->clear();
  g.mutable_ops(0)->add_inputs(long_name);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"op 'x' (placeholder), an input", "--max_name_length"}));
  g.mutable_ops(0)->clear_inputs();
  g.add_outputs(long_name);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"graph output", "--max_name_length"}));
}

TEST(RequestLimitsTest, DimsPerShapeDeclaredAndInferred) {
  RequestLimits l;
  l.max_dims_per_shape = 3;
  v1::Graph g;
  *g.add_ops() = Placeholder("x", {{"a", 2}, {"b", 2}, {"c", 2}});
  ASSERT_OK(Graph::Build(g, l).status());
  *g.add_ops() = Placeholder("y", {{"a", 2}, {"b", 2}, {"c", 2}, {"d", 2}});
  EXPECT_TRUE(StatusIs(
      CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
      {"op 'y' (placeholder), its shape", "4 dims", "limit of 3", "--max_dims_per_shape"}));
  // Inferred: x [a,b,c] + z [d] broadcasts to 4 dims; every declared shape has at most 3.
  g.mutable_ops()->RemoveLast();
  *g.add_ops() = Placeholder("z", {{"d", 2}});
  v1::Op* add = g.add_ops();
  add->set_name("xz");
  add->set_type("add");
  add->add_inputs("x");
  add->add_inputs("z");
  ASSERT_OK(CheckGraphStructure(g, l));
  EXPECT_TRUE(StatusIs(Graph::Build(g, l).status(), StatusCode::kInvalidArgument,
                       {"tensor 'xz' (made by op 'xz', add)", "4 dims", "--max_dims_per_shape"}));
}

TEST(RequestLimitsTest, AttrListLength) {
  RequestLimits l;
  l.max_attr_list_length = 4;
  v1::Graph g = Placeholders(1);
  auto* ints = (*g.mutable_ops(0)->mutable_attrs())["sizes"].mutable_ints();
  for (int i = 0; i < 4; ++i) ints->add_values(i);
  ASSERT_OK(CheckGraphStructure(g, l));
  ints->add_values(4);
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, l), StatusCode::kInvalidArgument,
                       {"op 'p0' (placeholder)", "attr 'sizes' lists 5 values", "limit of 4",
                        "--max_attr_list_length"}));
}

TEST(RequestLimitsTest, WhileLoopNesting) {
  RequestLimits l;
  l.max_while_loop_depth = 3;
  ASSERT_OK(Graph::Build(NestedLoops(3), l).status());
  EXPECT_TRUE(
      StatusIs(Graph::Build(NestedLoops(4), l).status(), StatusCode::kInvalidArgument,
               {"op 'loop0' (while_loop)", "depth 4", "limit of 3", "--max_while_loop_depth"}));
}

// A thousand levels are refused at the limit, without walking (or recursing) any deeper.
TEST(RequestLimitsTest, DeepNestingIsRefusedAtTheLimit) {
  v1::Graph g;
  v1::Graph* level = &g;
  for (int i = 0; i < 1000; ++i) {
    v1::Op* op = level->add_ops();
    op->set_name(absl::StrCat("l", i));
    op->set_type("while_loop");
    level = op->mutable_body();
  }
  EXPECT_TRUE(StatusIs(CheckGraphStructure(g, RequestLimits()), StatusCode::kInvalidArgument,
                       {"op 'l8' (while_loop) in the body of while_loop 'l7', in the body of "
                        "while_loop 'l6'",
                        "depth 9", "--max_while_loop_depth"}));
}

TEST(RequestLimitsTest, ElementsPerTensorAfterShapeInference) {
  RequestLimits l;
  l.max_elements_per_tensor = 1 << 20;
  // Each input has 2^10 elements; their einsum [a, b] has 2^20 (at the limit), and with c 2^21.
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 1024}}));
  TensorRef y = b.Placeholder("y", Shape({{"b", 1024}}));
  b.Einsum({x, y}, Shape({{"a", 1024}, {"b", 1024}}), "outer");
  ASSERT_OK(Graph::Build(b.proto(), l).status());
  TensorRef z = b.Placeholder("z", Shape({{"c", 2}}));
  b.Einsum({x, y, z}, Shape({{"a", 1024}, {"b", 1024}, {"c", 2}}), "outer3");
  EXPECT_TRUE(StatusIs(Graph::Build(b.proto(), l).status(), StatusCode::kResourceExhausted,
                       {"tensor 'outer3' (made by op 'outer3', einsum)", "2097152 elements",
                        "limit of 1048576", "--max_elements_per_tensor"}));
}

// Tensors inside a while_loop body are held to the limits of the graph around it, with the same
// code as outside (the loop's own error wrapping keeps the context).
TEST(RequestLimitsTest, ElementsPerTensorInsideWhileLoopBodies) {
  RequestLimits l;
  l.max_elements_per_tensor = 16;
  ASSERT_OK(Graph::Build(NestedLoops(2), l).status());
  l.max_elements_per_tensor = 15;  // only the innermost body's "o" has more than 4
  EXPECT_TRUE(StatusIs(Graph::Build(NestedLoops(2), l).status(), StatusCode::kResourceExhausted,
                       {"op 'loop' (while_loop): body", "op 'loop0' (while_loop): body",
                        "tensor 'o' (made by op 'o', einsum)", "16 elements", "limit of 15",
                        "--max_elements_per_tensor"}));
  // Without limits the same graph builds, and a later limited Build on this thread is not
  // affected by the earlier one.
  ASSERT_OK(Graph::Build(NestedLoops(2)).status());
  l.max_elements_per_tensor = 16;
  ASSERT_OK(Graph::Build(NestedLoops(2), l).status());
}

// An element count past int64 is an overflow error, with or without limits: x [a:2^40] + y [b:2^40]
// broadcasts to [a, b], 2^80 elements.
TEST(RequestLimitsTest, ElementCountOverflowIsRefused) {
  v1::Graph g;
  *g.add_ops() = Placeholder("x", {{"a", int64_t{1} << 40}});
  *g.add_ops() = Placeholder("y", {{"b", int64_t{1} << 40}});
  v1::Op* add = g.add_ops();
  add->set_name("xy");
  add->set_type("add");
  add->add_inputs("x");
  add->add_inputs("y");
  EXPECT_TRUE(StatusIs(
      Graph::Build(g).status(), StatusCode::kInvalidArgument,
      {"tensor 'xy' (made by op 'xy', add)", "product of the sizes passes", "at dim 'b'"}));
  RequestLimits l;
  l.max_elements_per_tensor = INT64_MAX;
  EXPECT_TRUE(StatusIs(Graph::Build(g, l).status(), StatusCode::kInvalidArgument,
                       {"tensor 'xy'", "product of the sizes passes", "at dim 'b'"}));
}

TEST(RequestLimitsTest, MeshDims) {
  RequestLimits l;
  l.max_mesh_dims = 2;
  EXPECT_TRUE(CheckMeshLimits(MeshOf({{"a", 2}, {"b", 2}}), l).ok());
  EXPECT_TRUE(StatusIs(CheckMeshLimits(MeshOf({{"a", 2}, {"b", 2}, {"c", 2}}), l),
                       StatusCode::kInvalidArgument,
                       {"mesh has 3 dims", "limit of 2", "--max_mesh_dims"}));
  l.max_name_length = 4;
  EXPECT_TRUE(StatusIs(CheckMeshLimits(MeshOf({{"rows_", 2}}), l), StatusCode::kInvalidArgument,
                       {"mesh dim 'rows_'", "--max_name_length"}));
}

TEST(RequestLimitsTest, MeshProcessors) {
  const RequestLimits l;
  EXPECT_EQ(l.max_mesh_processors, 4096);
  EXPECT_TRUE(CheckMeshLimits(MeshOf({{"rows", 64}, {"cols", 64}}), l).ok());
  EXPECT_TRUE(StatusIs(CheckMeshLimits(MeshOf({{"rows", 4097}}), l), StatusCode::kResourceExhausted,
                       {"mesh rows:4097", "more than 4096 processors", "--max_mesh_processors"}));
  // 2^32 processors (an int cast of it was 0) and 10^9: refused, naming the dim the product passes
  // the limit at.
  EXPECT_TRUE(
      StatusIs(CheckMeshLimits(MeshOf({{"rows", 65536}, {"cols", 65536}}), l),
               StatusCode::kResourceExhausted,
               {"mesh rows:65536,cols:65536", "at mesh dim 'rows'", "--max_mesh_processors"}));
  EXPECT_TRUE(StatusIs(CheckMeshLimits(MeshOf({{"a", 1000}, {"b", 1000}, {"c", 1000}}), l),
                       StatusCode::kResourceExhausted,
                       {"at mesh dim 'b'", "--max_mesh_processors"}));
  // Sizes whose product overflows int64 do not wrap into range.
  EXPECT_TRUE(StatusIs(
      CheckMeshLimits(MeshOf({{"a", 1}, {"b", int64_t{1} << 62}, {"c", int64_t{1} << 62}}), l),
      StatusCode::kResourceExhausted, {"at mesh dim 'b'"}));
  EXPECT_TRUE(StatusIs(CheckMeshLimits(MeshOf({{"a", 0}}), l), StatusCode::kInvalidArgument,
                       {"mesh dim 'a' has size 0"}));
}

}  // namespace
}  // namespace meshrt
