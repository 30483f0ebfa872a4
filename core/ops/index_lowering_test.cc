// The indexing family lowered for many meshes and layouts — above all layouts splitting the dim
// an op indexes, ranks, accumulates or sorts along — run on the simulated mesh with both kernel
// runners and compared with the reference interpreter (int32 results exactly); plus the structure
// of what the lowering emits.
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

// Every index op. `xt` and `xi` hold small whole numbers, so rankings have ties; ids hold indices
// in [-1, 8], some outside the vocabulary [0, 8).
Graph IndexGraph() {
  GraphWriter w;
  w.Placeholder("ids", Shape({{"b", 4}, {"q", 4}}), DType::kInt32);
  w.Placeholder("emb", Shape({{"v", 8}, {"e", 4}}));
  w.Placeholder("embi", Shape({{"v", 8}, {"e", 4}}), DType::kInt32);
  w.Placeholder("wb", Shape({{"b", 4}, {"v", 8}}));
  w.Placeholder("logits", Shape({{"b", 4}, {"v", 8}}));
  w.Placeholder("xs", Shape({{"b", 4}, {"s", 8}}));
  w.Placeholder("xt", Shape({{"b", 4}, {"s", 8}}));
  w.Placeholder("xi", Shape({{"b", 4}, {"s", 8}}), DType::kInt32);
  w.Placeholder("c", Shape({{"b", 4}}));
  *w.Op("oh", "one_hot", {"ids"}).mutable_shape() = Shape({{"d", 8}}).ToProto();
  v1::Op& ohi = w.Op("ohi", "one_hot", {"ids"}, {}, {{"on_value", 5.0f}, {"off_value", -1.0f}});
  *ohi.mutable_shape() = Shape({{"d", 8}}).ToProto();
  ohi.set_dtype(v1::DT_INT32);
  w.Op("g", "gather", {"emb", "ids"}, {"v"});
  w.Op("gi", "gather", {"embi", "ids"}, {"v"});
  v1::Op& rv = w.Op("rv", "range", {});
  *rv.mutable_shape() = Shape({{"v", 8}}).ToProto();
  rv.set_dtype(v1::DT_INT32);
  w.Op("g_rows", "gather", {"emb", "ids", "rv"}, {"v"});  // explicit row ids
  w.Op("am", "argmax", {"logits"}, {"v"});
  w.Op("g_am", "gather", {"wb", "am"}, {"v"});  // batch gather: b in both
  *w.Op("oh_am", "one_hot", {"am"}).mutable_shape() = Shape({{"v", 8}}).ToProto();
  v1::Op& r = w.Op("r", "range", {});
  *r.mutable_shape() = Shape({{"s", 8}}).ToProto();
  r.set_dtype(v1::DT_INT32);
  *w.Op("rf", "range", {}).mutable_shape() = Shape({{"v", 8}}).ToProto();
  w.Op("tk", "top_k", {"xs"}, {"s"}, {{"k", 3}, {"new_dim", "k3"}});
  w.Op("tk_i", "top_k", {"xt"}, {"s"}, {{"k", 3}, {"new_dim", "k3"}, {"output", "indices"}});
  w.Op("tk_int", "top_k", {"xi"}, {"s"}, {{"k", 4}, {"new_dim", "k4"}, {"output", "indices"}});
  w.Op("tk_ids", "top_k", {"xt", "r"}, {"s"}, {{"k", 2}, {"new_dim", "k2"}, {"output", "indices"}});
  w.Op("tk_all", "top_k", {"xs"}, {"s"}, {{"k", 8}, {"new_dim", "k8"}});
  w.Op("am_t", "argmax", {"xt"}, {"s"});
  w.Op("am_i", "argmax", {"xi"}, {"s"});
  w.Op("cs", "cumsum", {"xs"}, {"s"});
  w.Op("cs_ex", "cumsum", {"xs"}, {"s"}, {{"exclusive", true}});
  w.Op("cs_c", "cumsum", {"xs", "c"}, {"s"}, {{"exclusive", true}});
  w.Op("cs_i", "cumsum", {"xi"}, {"s"});
  w.Op("cs_b", "cumsum", {"xs"}, {"b"});
  w.Op("so", "sort", {"xs"}, {"s"});
  w.Op("so_d", "sort", {"xt"}, {"s"}, {{"descending", true}, {"output", "indices"}});
  w.Op("so_i", "sort", {"xi"}, {"s"}, {{"output", "indices"}});
  w.Op("so_b", "sort", {"xi"}, {"b"});
  return w.Build().value();
}

TensorMap Feeds(const Graph& g, uint32_t seed) { return RandomFeeds(g, seed, -1, 8, {"xt"}); }

struct Case {
  std::string mesh;
  std::string layout;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"p:1", ""},
      {"p:1", "v:p,s:p"},
      {"p:4", ""},
      {"p:4", "v:p,s:p"},  // vocab and the ranked / accumulated dim split
      {"p:4", "d:p,s:p"},
      {"p:4", "v:p,q:p,s:p,k8:p"},  // gather: vocab and an index dim on one mesh dim
      {"p:4", "b:p"},
      {"p:4", "e:p,s:p,k4:p"},
      {"p:4", "q:p,k4:p,k8:p"},
      {"rows:2,cols:2", ""},
      {"rows:2,cols:2", "v:rows,s:cols"},
      {"rows:2,cols:2", "b:rows,v:cols,s:cols,k2:cols"},
      {"rows:2,cols:2", "v:rows,q:rows,e:cols,s:rows,k4:cols"},
      {"rows:2,cols:2", "d:rows,b:cols,v:rows"},
      {"rows:2,cols:2", "s:rows,k8:cols,k4:rows,v:cols"},
      {"x:2,y:2,z:2", ""},
      {"x:2,y:2,z:2", "v:x,s:y,b:z"},
      {"x:2,y:2,z:2", "v:x,q:x,e:y,s:z,k4:y,k2:x"},
      {"x:2,y:2,z:2", "b:x,s:y,v:z,q:y,k8:z"},
  };
  return *cases;
}

class IndexLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(IndexLayoutTest, ReferenceKernelsMatchInterpreter) {
  const Graph g = IndexGraph();
  ExpectMatchesInterpreter(g, Feeds(g, 3), GetParam().mesh, GetParam().layout, ReferenceKernels());
}

TEST_P(IndexLayoutTest, CpuKernelsMatchInterpreter) {
  const Graph g = IndexGraph();
  ExpectMatchesInterpreter(g, Feeds(g, 4), GetParam().mesh, GetParam().layout, CpuKernels());
}

INSTANTIATE_TEST_SUITE_P(Meshes, IndexLayoutTest, ::testing::ValuesIn(Cases()));

TEST(IndexLayoutTest, RandomValidLayouts) {
  const Graph g = IndexGraph();
  const std::vector<std::string> dims = {"b", "q", "v", "d", "e", "s", "k2", "k4", "k8"};
  std::mt19937 rng(17);
  int ran = 0;
  for (const std::string mesh_text : {"p:2", "p:4", "rows:2,cols:2", "x:2,y:2,z:2"}) {
    const Mesh mesh = Mesh::Parse(mesh_text).value();
    int valid = 0;
    for (int tries = 0; valid < 6 && tries < 2000; ++tries) {
      std::vector<std::string> rules;
      for (const std::string& d : dims) {
        if (rng() % 3 == 0) continue;
        rules.push_back(absl::StrCat(d, ":", mesh.dims()[rng() % mesh.ndims()].name));
      }
      const std::string layout = absl::StrJoin(rules, ",");
      if (!ValidateLayouts(g, mesh, LayoutRules::Parse(layout, mesh).value()).ok()) continue;
      ++valid;
      ExpectMatchesInterpreter(g, Feeds(g, 5 + valid), mesh_text, layout, ReferenceKernels());
    }
    EXPECT_GE(valid, 4) << mesh_text;
    ran += valid;
  }
  EXPECT_GE(ran, 20);
}

v1::Program Lowered(const std::string& mesh_text, const std::string& layout) {
  const Graph g = IndexGraph();
  v1::Program p;
  ExpectMatchesInterpreter(g, Feeds(g, 1), mesh_text, layout, ReferenceKernels(), &p);
  return p;
}

TEST(IndexLoweringTest, OneHotAndRangeNeverCommunicate) {
  const v1::Program p = Lowered("rows:2,cols:2", "v:rows,d:cols,s:cols");
  for (const char* op : {"oh", "ohi", "oh_am", "r", "rf"}) {
    EXPECT_TRUE(CollectivesOf(p, op).empty()) << op;
  }
}

TEST(IndexLoweringTest, GatherOverSplitVocabIsOneAllreduce) {
  const v1::Program p = Lowered("p:4", "v:p");
  EXPECT_EQ(CollectivesOf(p, "g"),
            (std::vector<std::string>{"allreduce REDUCE_SUM(p) [b:4, q:4, e:4]"}));
  EXPECT_EQ(CollectivesOf(p, "gi"),
            (std::vector<std::string>{"allreduce REDUCE_SUM(p) [b:4, q:4, e:4]"}));
  // When p also splits an output dim (q), the weights are gathered instead.
  const v1::Program q = Lowered("p:4", "v:p,q:p");
  EXPECT_EQ(CollectivesOf(q, "g"), (std::vector<std::string>{"allgather(p) [v:8, e:4]"}));
  EXPECT_EQ(CollectivesOf(q, "g_rows"),
            (std::vector<std::string>{"allgather(p) [v:8, e:4]", "allgather(p) [v:8]"}));
  EXPECT_EQ(CollectivesOf(p, "g_rows"),
            (std::vector<std::string>{"allreduce REDUCE_SUM(p) [b:4, q:4, e:4]"}));
  EXPECT_TRUE(CollectivesOf(Lowered("p:4", "e:p"), "g").empty());
}

TEST(IndexLoweringTest, TopKAndArgmaxGatherOnlyCandidates) {
  const v1::Program p = Lowered("p:4", "s:p,v:p");
  // s:8 in parts of 2: min(3, 2) = 2 candidates per part, 8 in all (here the whole dim).
  EXPECT_EQ(CollectivesOf(p, "tk"), (std::vector<std::string>{"allgather(p) [b:4, s:8]"}));
  EXPECT_EQ(CollectivesOf(p, "tk_i"),
            (std::vector<std::string>{"allgather(p) [b:4, s:8]", "allgather(p) [b:4, s:8]"}));
  // argmax: one value and one index per part.
  EXPECT_EQ(CollectivesOf(p, "am_t"),
            (std::vector<std::string>{"allgather(p) [b:4, s:4]", "allgather(p) [b:4, s:4]"}));
  // p:2, parts of 4: 3 candidates per part, 6 gathered of 8.
  const v1::Program q = Lowered("p:2", "s:p");
  EXPECT_EQ(CollectivesOf(q, "tk"), (std::vector<std::string>{"allgather(p) [b:4, s:6]"}));
  EXPECT_EQ(CollectivesOf(q, "tk_int"),
            (std::vector<std::string>{"allgather(p) [b:4, s:8]", "allgather(p) [b:4, s:8]"}));
}

TEST(IndexLoweringTest, CumsumOverASplitDimGathersOneTotalPerSlice) {
  const v1::Program p = Lowered("p:4", "s:p");
  for (const char* op : {"cs", "cs_ex", "cs_c", "cs_i"}) {
    // 4 totals per row (one per slice), not the 8 elements of the dim; no allreduce.
    EXPECT_EQ(CollectivesOf(p, op), (std::vector<std::string>{"allgather(p) [b:4, s:4]"})) << op;
  }
  EXPECT_TRUE(CollectivesOf(p, "cs_b").empty());
  const v1::Program q = Lowered("x:2,y:2,z:2", "b:x,s:z");
  EXPECT_EQ(CollectivesOf(q, "cs"), (std::vector<std::string>{"allgather(z) [b:2, s:2]"}));
  EXPECT_EQ(CollectivesOf(q, "cs_b"), (std::vector<std::string>{"allgather(x) [b:2, s:4]"}));
}

TEST(IndexLoweringTest, SortGathersTheDimThenSlicesLocally) {
  const v1::Program p = Lowered("p:4", "s:p");
  EXPECT_EQ(CollectivesOf(p, "so"), (std::vector<std::string>{"allgather(p) [b:4, s:8]"}));
  EXPECT_TRUE(CollectivesOf(Lowered("p:4", "b:p"), "so").empty());
}

}  // namespace
}  // namespace meshrt
