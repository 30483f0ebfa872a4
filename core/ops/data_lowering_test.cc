// The data-movement family lowered for many meshes and layouts — above all layouts that split the
// dim an op slices, pads, concatenates, splits or unstacks (which Mesh-TensorFlow refused) — run on
// the simulated mesh with both kernel runners and compared with the reference interpreter; plus
// the structure of what the lowering emits.
#include <random>

#include "absl/strings/str_join.h"
#include "core/testing/data_index_test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using testing_util::CollectivesOf;
using testing_util::ExpectMatchesInterpreter;
using testing_util::GraphWriter;
using testing_util::RandomFeeds;

// Every data op, float32 and int32, on x[b:4, s:8, h:4] and y[b:4, t:4, h:4].
Graph DataGraph() {
  GraphWriter w;
  w.Placeholder("x", Shape({{"b", 4}, {"s", 8}, {"h", 4}}));
  w.Placeholder("y", Shape({{"b", 4}, {"t", 4}, {"h", 4}}));
  w.Placeholder("xi", Shape({{"b", 4}, {"s", 8}}), DType::kInt32);
  w.Op("sl", "slice", {"x"}, {"s"}, {{"begin", 2}, {"size", 4}, {"new_dim", "s4"}});
  w.Op("sl_win", "slice", {"x"}, {"s"}, {{"begin", 5}, {"size", 2}, {"new_dim", "s2"}});
  w.Op("sl_one", "slice", {"x"}, {"s"}, {{"begin", 1}, {"size", 1}, {"new_dim", "s1"}});
  w.Op("sl_all", "slice", {"x"}, {"s"}, {{"size", 8}, {"new_dim", "s8"}});
  w.Op("sl_h", "slice", {"y"}, {"h"}, {{"begin", 2}, {"size", 2}, {"new_dim", "h2"}});
  w.Op("pd", "pad", {"x"}, {"s"}, {{"before", 1}, {"after", 3}, {"new_dim", "s12"}});
  w.Op("pd_none", "pad", {"y"}, {"t"}, {{"new_dim", "t0"}});
  w.Op("cc", "concat", {"x", "y"}, {"s", "t"}, {{"new_dim", "st"}});
  w.Op("cc_same", "concat", {"y", "y"}, {"t"}, {{"new_dim", "t8"}});
  w.Op("sp", "split", {"x"}, {"s"}, {{"index", 1}, {"num", 2}, {"new_dim", "s4"}});
  w.Op("sp_sizes", "split", {"x"}, {"s"},
       {{"index", 2}, {"sizes", std::vector<int64_t>{3, 3, 2}}, {"new_dim", "s2"}});
  w.Op("st", "stack", {"sl", "sp"}, {}, {{"new_dim", "k2"}, {"axis", 1}});
  w.Op("st4", "stack", {"sp", "sl", "sp", "sl"}, {}, {{"new_dim", "k4"}, {"axis", 3}});
  w.Op("us", "unstack", {"x"}, {"s"}, {{"index", 5}});
  w.Op("us_h", "unstack", {"y"}, {"h"}, {{"index", 0}});
  *w.Op("rd", "replace_dims", {"x"}, {"s"}).mutable_shape() =
      Shape({{"s_a", 2}, {"s_b", 4}}).ToProto();
  w.Op("sli", "slice", {"xi"}, {"s"}, {{"begin", 3}, {"size", 4}, {"new_dim", "s4"}});
  w.Op("cci", "concat", {"xi", "xi"}, {"s"}, {{"new_dim", "s16"}});
  w.Op("pdi", "pad", {"xi"}, {"s"}, {{"before", 4}, {"new_dim", "s12"}});
  w.Op("usi", "unstack", {"xi"}, {"s"}, {{"index", 7}});
  return w.Build().value();
}

struct Case {
  std::string mesh;
  std::string layout;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"p:1", ""},
      {"p:1", "s:p"},
      {"p:1", "s:p,st:p,s12:p"},
      {"p:4", ""},
      {"p:4", "s:p"},                             // every op along s refused by Mesh-TensorFlow
      {"p:4", "s:p,s4:p,st:p,s12:p,s8:p,s16:p"},  // ...and the outputs split the same way
      {"p:4", "t:p"},
      {"p:4", "h:p"},
      {"p:4", "b:p"},
      {"p:4", "st:p,t8:p,k4:p,t0:p"},
      {"p:4", "s:p,t:p,s_b:p"},
      {"p:4", "t:p,t0:p,s4:p"},
      {"rows:2,cols:2", ""},
      {"rows:2,cols:2", "s:rows,h:cols"},
      {"rows:2,cols:2", "s:rows,t:cols,st:cols,s4:cols"},
      {"rows:2,cols:2", "b:rows,s:cols,s2:cols,k2:cols,s8:cols"},
      {"rows:2,cols:2", "s12:rows,s:cols,t8:rows,t:cols,h2:rows"},
      {"rows:2,cols:2", "h:rows,s:cols,s_a:cols,k4:cols,s16:rows"},
      {"x:2,y:2,z:2", ""},
      {"x:2,y:2,z:2", "s:x,h:y,b:z"},
      {"x:2,y:2,z:2", "s:x,t:y,st:z,s2:y"},
      {"x:2,y:2,z:2", "b:x,s:y,h:z,s12:y,s4:y,t:y"},
      {"x:2,y:2,z:2", "s:z,t:z,st:x,h2:y,k4:x,s16:y,s8:x"},
  };
  return *cases;
}

class DataLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(DataLayoutTest, ReferenceKernelsMatchInterpreter) {
  const Graph g = DataGraph();
  ExpectMatchesInterpreter(g, RandomFeeds(g, 3, -50, 50), GetParam().mesh, GetParam().layout,
                           ReferenceKernels());
}

TEST_P(DataLayoutTest, CpuKernelsMatchInterpreter) {
  const Graph g = DataGraph();
  ExpectMatchesInterpreter(g, RandomFeeds(g, 4, -50, 50), GetParam().mesh, GetParam().layout,
                           CpuKernels());
}

INSTANTIATE_TEST_SUITE_P(Meshes, DataLayoutTest, ::testing::ValuesIn(Cases()));

// Random valid rule sets over every dim of the graph.
TEST(DataLayoutTest, RandomValidLayouts) {
  const Graph g = DataGraph();
  const std::vector<std::string> dims = {"b",   "s",  "h",  "t",  "s4", "s2", "s1",  "s8",  "h2",
                                         "s12", "t0", "st", "t8", "k2", "k4", "s_a", "s_b", "s16"};
  std::mt19937 rng(11);
  int ran = 0;
  for (const std::string mesh_text : {"p:2", "p:4", "rows:2,cols:2", "x:2,y:2,z:2"}) {
    const Mesh mesh = Mesh::Parse(mesh_text).value();
    int valid = 0;
    for (int tries = 0; valid < 6 && tries < 2000; ++tries) {
      std::vector<std::string> rules;
      for (const std::string& d : dims) {
        // Half the dims stay whole, so that valid rule sets are not too rare.
        if (rng() % 2 == 0) continue;
        rules.push_back(absl::StrCat(d, ":", mesh.dims()[rng() % mesh.ndims()].name));
      }
      const std::string layout = absl::StrJoin(rules, ",");
      if (!ValidateLayouts(g, mesh, LayoutRules::Parse(layout, mesh).value()).ok()) continue;
      ++valid;
      ExpectMatchesInterpreter(g, RandomFeeds(g, 5 + valid, -9, 9), mesh_text, layout,
                               ReferenceKernels());
    }
    EXPECT_GE(valid, 4) << mesh_text;
    ran += valid;
  }
  EXPECT_GE(ran, 20);
}

v1::Program Lowered(const std::string& mesh_text, const std::string& layout) {
  const Graph g = DataGraph();
  v1::Program p;
  ExpectMatchesInterpreter(g, RandomFeeds(g, 1, -5, 5), mesh_text, layout, ReferenceKernels(), &p);
  return p;
}

TEST(DataLoweringTest, UnsplitDimsNeverCommunicate) {
  const v1::Program p = Lowered("p:4", "b:p");
  for (const char* op : {"sl", "sl_win", "pd", "cc", "sp", "st", "us", "sli", "cci", "usi"}) {
    EXPECT_TRUE(CollectivesOf(p, op).empty()) << op;
  }
}

TEST(DataLoweringTest, SplitDimIsGatheredOnceThenTheOutputSlicedLocally) {
  const v1::Program p = Lowered("p:4", "s:p,s4:p,st:p,s12:p");
  // Whole-dim gathers: the input's s (8 elements per row) for slice, pad and both concat inputs.
  EXPECT_EQ(CollectivesOf(p, "sl"), (std::vector<std::string>{"allgather(p) [b:4, s:8, h:4]"}));
  EXPECT_EQ(CollectivesOf(p, "pd"), (std::vector<std::string>{"allgather(p) [b:4, s:8, h:4]"}));
  EXPECT_EQ(CollectivesOf(p, "cc"), (std::vector<std::string>{"allgather(p) [b:4, s:8, h:4]"}));
  // The outputs are split over p again without communication: 4 of 4, 12 / 4, 12 / 4.
  for (const v1::ProgramTensor& t : p.outputs()) {
    if (t.name() == "sl" || t.name() == "cc" || t.name() == "pd") {
      EXPECT_NE(TensorLayout::FromProto(t.layout()).mesh_axis[1], kReplicated) << t.name();
    }
  }
}

TEST(DataLoweringTest, RangeInsideOnePartIsBroadcastFromItsHolder) {
  // p:4 splits s:8 into parts of 2: [1, 2) lies in part 0, [5, 7) spans two parts.
  const v1::Program p = Lowered("p:4", "s:p");
  EXPECT_EQ(CollectivesOf(p, "sl_one"),
            (std::vector<std::string>{"broadcast@0(p) [b:4, s1:1, h:4]"}));
  EXPECT_EQ(CollectivesOf(p, "sl_win"), (std::vector<std::string>{"allgather(p) [b:4, s:8, h:4]"}));
  // unstack: the element, not the whole dim.
  EXPECT_EQ(CollectivesOf(p, "us"), (std::vector<std::string>{"broadcast@2(p) [b:4, h:4]"}));
  EXPECT_EQ(CollectivesOf(p, "usi"), (std::vector<std::string>{"broadcast@3(p) [b:4]"}));
  // p:2: parts of 4, and [5, 7) is inside part 1.
  const v1::Program q = Lowered("p:2", "s:p");
  EXPECT_EQ(CollectivesOf(q, "sl_win"),
            (std::vector<std::string>{"broadcast@1(p) [b:4, s2:2, h:4]"}));
  EXPECT_EQ(CollectivesOf(q, "sp_sizes"),
            (std::vector<std::string>{"broadcast@1(p) [b:4, s2:2, h:4]"}));
  // Split over two mesh dims, the holder is found along the one that splits s.
  const v1::Program r = Lowered("rows:2,cols:2", "b:rows,s:cols");
  EXPECT_EQ(CollectivesOf(r, "us"), (std::vector<std::string>{"broadcast@1(cols) [b:2, h:4]"}));
}

TEST(DataLoweringTest, RenamesAndStacksOnlyReshard) {
  // The whole dim under a new name that the rules split over another mesh dim: one reshard.
  const v1::Program p = Lowered("rows:2,cols:2", "s:rows,s8:cols");
  EXPECT_EQ(CollectivesOf(p, "sl_all").size(), 1u);
  EXPECT_TRUE(CollectivesOf(Lowered("p:4", "s:p,s8:p"), "sl_all").empty());
  EXPECT_TRUE(CollectivesOf(Lowered("p:4", "t:p,t0:p"), "pd_none").empty());
  // stack never communicates, even when its new dim is split.
  EXPECT_TRUE(CollectivesOf(Lowered("p:4", "k4:p"), "st4").empty());
  EXPECT_TRUE(CollectivesOf(Lowered("rows:2,cols:2", "k2:rows,s4:cols"), "st").empty());
}

}  // namespace
}  // namespace meshrt
