// Reshape, rename_dim and the Reshard plans under them: which collectives and local slices are
// emitted (counted by kind, with their slice shapes), and that the plan's cost is what explain
// reports and never more than gathering whatever differs.
#include <map>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/planning/explain.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

std::string SliceOf(const v1::Instruction& inst) {
  return Shape::FromProto(inst.slice_shape()).value().ToString();
}

// Every communicating step and local slice made for graph op `op`, in order:
// "allgather(rows) axis 0 [a:8, c:6]", "alltoall(m) split 1 concat 0 [...]", "slice(cols) axis 0
// [...]", "allreduce(m) [...]", "reduce_scatter(m) axis 1 [...]" (output slice shapes).
std::vector<std::string> StepsOf(const v1::Program& p, const std::string& op) {
  std::vector<std::string> out;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.source_op() != op) continue;
    if (inst.has_local_slice()) {
      out.push_back(absl::StrCat("slice(", p.mesh().dims(inst.local_slice().mesh_axis()).name(),
                                 ") axis ", inst.local_slice().axis(), " ", SliceOf(inst)));
    }
    if (!inst.has_collective()) continue;
    const v1::Collective& c = inst.collective();
    std::string axes;
    for (int a : c.mesh_axes()) absl::StrAppend(&axes, axes.empty() ? "" : ",", p.mesh().dims(a).name());
    switch (c.kind()) {
      case v1::Collective::ALLGATHER:
        out.push_back(absl::StrCat("allgather(", axes, ") axis ", c.concat_axis(), " ", SliceOf(inst)));
        break;
      case v1::Collective::ALLTOALL:
        out.push_back(absl::StrCat("alltoall(", axes, ") split ", c.split_axis(), " concat ",
                                   c.concat_axis(), " ", SliceOf(inst)));
        break;
      case v1::Collective::REDUCE_SCATTER:
        out.push_back(absl::StrCat("reduce_scatter(", axes, ") axis ", c.split_axis(), " ", SliceOf(inst)));
        break;
      default:
        out.push_back(absl::StrCat(absl::AsciiStrToLower(v1::Collective::Kind_Name(c.kind())), "(",
                                   axes, ") ", SliceOf(inst)));
    }
  }
  return out;
}

// Instructions of the whole program by kind: collective kinds, "slice", and "local" ops.
std::map<std::string, int> CountsOf(const v1::Program& p) {
  std::map<std::string, int> n;
  for (const v1::Instruction& inst : p.instructions()) {
    if (inst.has_collective()) {
      ++n[absl::AsciiStrToLower(v1::Collective::Kind_Name(inst.collective().kind()))];
    } else if (inst.has_local_slice()) {
      ++n["slice"];
    } else {
      ++n["local"];
    }
  }
  return n;
}

int Collectives(const v1::Program& p) {
  int n = 0;
  for (const v1::Instruction& inst : p.instructions()) n += inst.has_collective();
  return n;
}

int64_t SentBytes(const v1::Program& p) {
  int64_t sent = 0;
  for (int i = 0; i < p.instructions_size(); ++i) sent += CostOf(p, i).sent_bytes;
  return sent;
}

v1::Program LowerOrDie(const Graph& g, const std::string& mesh, const std::string& layout) {
  Mesh m = Mesh::Parse(mesh).value();
  auto p = Lower(g, m, LayoutRules::Parse(layout, m).value());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : v1::Program();
}

std::string SliceShapeOf(const v1::Program& p, const std::string& tensor) {
  for (const v1::ProgramTensor& t : p.outputs()) {
    if (t.name() != tensor) continue;
    return SliceShape(Shape::FromProto(t.shape()).value(), TensorLayout::FromProto(t.layout()),
                      Mesh::FromProto(p.mesh()).value())
        .ToString();
  }
  return "?";
}

// [batch, len, d_model] -> [batch, len, heads, d_kv] (the attention heads split) and back.
Graph Heads() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"len", 4}, {"d_model", 16}}));
  TensorRef h = b.Reshape(x, Shape({{"batch", 8}, {"len", 4}, {"heads", 4}, {"d_kv", 4}}), "split");
  b.MarkOutput(b.Reshape(h, Shape({{"batch", 8}, {"len", 4}, {"d_model", 16}}), "merge"));
  return b.Build().value();
}

TEST(ReshapeLoweringTest, HeadsSplitAndMergeUnderBatchSplitAreLocal) {
  for (const char* mesh : {"p:4", "rows:2,cols:2"}) {
    v1::Program p = LowerOrDie(Heads(), mesh, mesh[0] == 'p' ? "batch:p" : "batch:rows");
    EXPECT_EQ(CountsOf(p), (std::map<std::string, int>{{"local", 2}})) << mesh;
    EXPECT_EQ(SliceShapeOf(p, "split"), mesh[0] == 'p' ? "[batch:2, len:4, heads:4, d_kv:4]"
                                                       : "[batch:4, len:4, heads:4, d_kv:4]");
  }
}

TEST(ReshapeLoweringTest, HeadsSplitOverAMeshDimIsLocal) {
  // heads is the outermost dim split off d_model: slicing d_model is slicing heads. The split needs
  // one local slice of the whole x (no communication); d_model split alike makes it free.
  v1::Program p = LowerOrDie(Heads(), "rows:2,cols:2", "batch:rows,heads:cols");
  EXPECT_EQ(StepsOf(p, "split"),
            (std::vector<std::string>{"slice(cols) axis 2 [batch:4, len:4, d_model:8]"}));
  EXPECT_EQ(SliceShapeOf(p, "split"), "[batch:4, len:4, heads:2, d_kv:4]");
  // The merge back to a whole d_model must gather the heads: the one collective, of half x.
  EXPECT_EQ(StepsOf(p, "merge"), (std::vector<std::string>{
                                     "allgather(cols) axis 2 [batch:4, len:4, heads:4, d_kv:4]"}));
  EXPECT_EQ(CountsOf(p), (std::map<std::string, int>{{"allgather", 1}, {"local", 2}, {"slice", 1}}));

  v1::Program q = LowerOrDie(Heads(), "rows:2,cols:2", "batch:rows,heads:cols,d_model:cols");
  EXPECT_EQ(CountsOf(q), (std::map<std::string, int>{{"local", 2}}));
  EXPECT_EQ(SliceShapeOf(q, "merge"), "[batch:4, len:4, d_model:8]");
  // d_kv is never gathered: it stays whole in every slice.
  EXPECT_EQ(SliceShapeOf(q, "split"), "[batch:4, len:4, heads:2, d_kv:4]");
}

TEST(ReshapeLoweringTest, HeadsMergeWithTheInnerDimSplitIsOneAlltoall) {
  // d_kv is inside the merged group: its split moves to heads (the outermost, in step with d_model)
  // by one alltoall, and the merge is local — not a gather of x and a slice.
  GraphBuilder b;
  TensorRef h =
      b.Placeholder("h", Shape({{"batch", 8}, {"len", 4}, {"heads", 4}, {"d_kv", 4}}));
  b.MarkOutput(b.Reshape(h, Shape({{"batch", 8}, {"len", 4}, {"d_model", 16}}), "merge"));
  v1::Program p = LowerOrDie(b.Build().value(), "m:2", "d_kv:m,d_model:m");
  EXPECT_EQ(StepsOf(p, "merge"), (std::vector<std::string>{
                                     "alltoall(m) split 2 concat 3 [batch:8, len:4, heads:2, d_kv:4]"}));
  EXPECT_EQ(SliceShapeOf(p, "merge"), "[batch:8, len:4, d_model:8]");
}

TEST(ReshapeLoweringTest, ASplitCarriedThroughTheReshapeMovesOnTheCheaperSide) {
  // [a:4, b:6] -> [x:2, y:2, z:6] with a and y split: a is in step with x (the outer half of a), so
  // the reshape is local with x split, and one alltoall of half the tensor moves the split to y.
  // Moving it before the reshape would gather all of it (a is whole after, y is not in x's input).
  GraphBuilder b;
  TensorRef t = b.Placeholder("t", Shape({{"a", 4}, {"b", 6}}));
  b.MarkOutput(b.Reshape(t, Shape({{"x", 2}, {"y", 2}, {"z", 6}}), "r"));
  v1::Program p = LowerOrDie(b.Build().value(), "m:2", "a:m,y:m");
  EXPECT_EQ(StepsOf(p, "r"),
            (std::vector<std::string>{"alltoall(m) split 1 concat 0 [x:2, y:1, z:6]"}));
  EXPECT_EQ(SentBytes(p), 2 * 6 * 4 / 2);  // half of a 12-float slice
}

TEST(ReshapeLoweringTest, MergesAndSplitsThatAreNotInStepMoveTheLeast) {
  // [a, b] -> [ab] with b split and ab whole: b must be gathered (nothing is in step with it).
  GraphBuilder b;
  TensorRef z = b.Placeholder("z", Shape({{"a", 4}, {"b", 6}}));
  b.MarkOutput(b.Reshape(z, Shape({{"ab", 24}}), "ab"));
  v1::Program p = LowerOrDie(b.Build().value(), "m:2", "b:m");
  EXPECT_EQ(StepsOf(p, "ab"), (std::vector<std::string>{"allgather(m) axis 1 [a:4, b:6]"}));
  // [ab] -> [a, b] with ab split and b wanted split: a is in step with ab, so the split goes
  // through the reshape to a and moves to b by one alltoall (not a gather of ab and a slice).
  GraphBuilder c;
  TensorRef y = c.Placeholder("y", Shape({{"ab", 24}}));
  c.MarkOutput(c.Reshape(y, Shape({{"a", 4}, {"b", 6}}), "split"));
  v1::Program q = LowerOrDie(c.Build().value(), "m:2", "ab:m,b:m");
  EXPECT_EQ(StepsOf(q, "split"),
            (std::vector<std::string>{"alltoall(m) split 1 concat 0 [a:4, b:3]"}));
  // [a:4, b:6] -> [x:12, y:2] with b and y split: no dim is in step with y (its blocks are every
  // other element), so b is gathered before and y sliced after.
  GraphBuilder d;
  TensorRef w = d.Placeholder("w", Shape({{"a", 4}, {"b", 6}}));
  d.MarkOutput(d.Reshape(w, Shape({{"x", 12}, {"y", 2}}), "xy"));
  v1::Program r = LowerOrDie(d.Build().value(), "m:2", "b:m,y:m");
  EXPECT_EQ(StepsOf(r, "xy"), (std::vector<std::string>{"allgather(m) axis 1 [a:4, b:6]",
                                                         "slice(m) axis 1 [x:12, y:1]"}));
}

TEST(ReshapeLoweringTest, ASliceGoesBeforeTheGatherItMakesSmaller) {
  // [a:rows, b] -> [a2, b2:cols]: slice b over cols first, then gather a over rows: the gather
  // moves a quarter of the tensor, not half (processors that gather over rows share their cols
  // coordinate, so they hold the same block of b).
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 8}, {"b", 6}}));
  b.MarkOutput(b.Reshape(x, Shape({{"a2", 8}, {"b2", 6}}), "y"));
  v1::Program p = LowerOrDie(b.Build().value(), "rows:2,cols:2", "a:rows,b2:cols");
  EXPECT_EQ(StepsOf(p, "y"), (std::vector<std::string>{"slice(cols) axis 1 [a:4, b:3]",
                                                        "allgather(rows) axis 0 [a:8, b:3]"}));
  EXPECT_EQ(SentBytes(p), 8 * 3 * 4 / 2);
}

TEST(ReshapeLoweringTest, RenameAcrossMeshDims) {
  // a:rows renamed to b:cols. rows must leave the layout, which only a gather over rows does (an
  // alltoall over rows keeps a split over rows). On a 2x2 mesh the gather and a slice are the
  // cheapest plan: parking rows on c by alltoall, slicing b and gathering c sends as much.
  GraphBuilder g;
  TensorRef x = g.Placeholder("x", Shape({{"a", 16}, {"c", 16}}));
  g.MarkOutput(g.RenameDim(x, "a", "b", "r"));
  const Graph graph = g.Build().value();
  v1::Program p = LowerOrDie(graph, "rows:2,cols:2", "a:rows,b:cols");
  EXPECT_EQ(StepsOf(p, "r"), (std::vector<std::string>{"allgather(rows) axis 0 [a:16, c:16]",
                                                        "slice(cols) axis 0 [a:8, c:16]"}));
  EXPECT_EQ(SentBytes(p), 16 * 16 * 4 / 2);
  // On 4x4 the exchange is smaller: one alltoall moves rows onto c, b is sliced, and the gather of
  // c is over a quarter of the tensor: 3/8 of it sent, not 3/4.
  v1::Program q = LowerOrDie(graph, "rows:4,cols:4", "a:rows,b:cols");
  EXPECT_EQ(StepsOf(q, "r"), (std::vector<std::string>{"alltoall(rows) split 1 concat 0 [a:16, c:4]",
                                                        "slice(cols) axis 0 [a:4, c:4]",
                                                        "allgather(rows) axis 1 [a:4, c:16]"}));
  EXPECT_EQ(CountsOf(q)["allgather"], 1);
  EXPECT_EQ(SentBytes(q), 3 * 16 * 4 * 4 / 4 + 3 * 4 * 16 * 4 / 4);
  // Renaming to a dim split over the same mesh dim, or a size-1 one, moves nothing.
  EXPECT_EQ(Collectives(LowerOrDie(graph, "rows:2,cols:2", "a:rows,b:rows")), 0);
  EXPECT_EQ(Collectives(LowerOrDie(graph, "rows:2,cols:1", "a:rows,b:cols")), 1);
}

TEST(ReshapeLoweringTest, SwappingMeshDimsBetweenDimsIsAlltoallsOnly) {
  // [a:rows, b:cols, c] -> [a2:cols, b2:rows, c2]: a cycle of moves. Parking rows on c breaks it
  // with three alltoalls of a quarter each (3/8 of a slice sent) — a gather to break it costs 1/2.
  GraphBuilder g;
  TensorRef x = g.Placeholder("x", Shape({{"a", 4}, {"b", 4}, {"c", 4}}));
  g.MarkOutput(g.Reshape(x, Shape({{"a2", 4}, {"b2", 4}, {"c2", 4}}), "y"));
  v1::Program p = LowerOrDie(g.Build().value(), "rows:2,cols:2", "a:rows,b:cols,a2:cols,b2:rows");
  EXPECT_EQ(CountsOf(p), (std::map<std::string, int>{{"alltoall", 3}, {"local", 1}}));
  EXPECT_EQ(SentBytes(p), 3 * (16 * 4) / 2);
  EXPECT_EQ(SliceShapeOf(p, "y"), "[a2:2, b2:2, c2:4]");
  // Without a third dim to park on, one split is gathered: half a slice, then one alltoall.
  GraphBuilder h;
  TensorRef z = h.Placeholder("z", Shape({{"a", 4}, {"b", 4}}));
  h.MarkOutput(h.Reshape(z, Shape({{"a2", 4}, {"b2", 4}}), "y"));
  v1::Program q = LowerOrDie(h.Build().value(), "rows:2,cols:2", "a:rows,b:cols,a2:cols,b2:rows");
  EXPECT_EQ(CountsOf(q), (std::map<std::string, int>{
                             {"allgather", 1}, {"alltoall", 1}, {"local", 1}, {"slice", 1}}));
}

// The plan's bytes are what explain reports for what Reshard emits, and no plan costs more than
// gathering every split that differs and slicing: on random layouts of random shapes.
TEST(ReshardPlanTest, CostIsExplainsAndNeverAboveGatherThenSlice) {
  std::mt19937 rng(14);
  for (const char* mesh_text : {"p:4", "rows:2,cols:2", "rows:4,cols:2", "x:2,y:2,z:2"}) {
    const Mesh mesh = Mesh::Parse(mesh_text).value();
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<Dim> dims;
      const int rank = 1 + static_cast<int>(rng() % 4);
      for (int d = 0; d < rank; ++d) dims.push_back({absl::StrCat("d", d), int64_t{4} << (rng() % 3)});
      const Shape shape(dims);
      auto random_layout = [&] {
        TensorLayout l{std::vector<int>(rank, kReplicated)};
        for (int axis = 0; axis < mesh.ndims(); ++axis) {
          const int d = static_cast<int>(rng() % (rank + 1));
          if (d < rank && l.mesh_axis[d] == kReplicated) l.mesh_axis[d] = axis;
        }
        return l;
      };
      const TensorLayout from = random_layout(), to = random_layout();
      SCOPED_TRACE(absl::StrCat(mesh_text, " ", from.ToString(shape, mesh), " -> ",
                                to.ToString(shape, mesh)));
      ProgramBuilder b(mesh, LayoutRules());
      ASSERT_OK_AND_ASSIGN(LaidOutTensor in, b.AddInput("in", shape, DType::kFloat32, from));
      ASSERT_OK_AND_ASSIGN(ReshardPlan plan, b.PlanReshard(in, to, "r"));
      ASSERT_OK_AND_ASSIGN(LaidOutTensor out, b.Reshard(in, to, "r"));
      EXPECT_EQ(out.layout, to);
      const v1::Program program = std::move(b).Finish();
      EXPECT_EQ(SentBytes(program), plan.sent_bytes);
      // Gather whatever differs, then slice: each gather over g sends (g-1)/g of its output.
      int64_t naive = 0;
      TensorLayout cur = from;
      for (int d = 0; d < rank; ++d) {
        if (cur.mesh_axis[d] == kReplicated || cur.mesh_axis[d] == to.mesh_axis[d]) continue;
        const int64_t g = mesh.size(cur.mesh_axis[d]);
        cur.mesh_axis[d] = kReplicated;
        naive += (g - 1) * SliceShape(shape, cur, mesh).num_elements() * 4 / g;
      }
      EXPECT_LE(plan.sent_bytes, naive);
    }
  }
}

}  // namespace
}  // namespace meshrt
