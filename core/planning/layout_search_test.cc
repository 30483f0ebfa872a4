#include "core/planning/layout_search.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

std::vector<std::string> Names(const std::vector<Mesh>& meshes) {
  std::vector<std::string> names;
  for (const Mesh& m : meshes) names.push_back(m.ToString());
  return names;
}

TEST(LayoutSearchTest, MeshesAreTheOrderedFactorisations) {
  ASSERT_OK_AND_ASSIGN(auto eight, MeshesFor(8));
  EXPECT_EQ(Names(eight),
            (std::vector<std::string>{"x:8", "rows:2,cols:4", "rows:4,cols:2", "d0:2,d1:2,d2:2"}));
  ASSERT_OK_AND_ASSIGN(auto flat, MeshesFor(8, 2));
  EXPECT_EQ(flat.size(), 3u);
  ASSERT_OK_AND_ASSIGN(auto prime, MeshesFor(7));
  EXPECT_EQ(Names(prime), (std::vector<std::string>{"x:7"}));
  ASSERT_OK_AND_ASSIGN(auto one, MeshesFor(1));
  EXPECT_EQ(Names(one), (std::vector<std::string>{"x:1"}));
  EXPECT_TRUE(StatusIs(MeshesFor(0).status(), absl::StatusCode::kInvalidArgument, {"workers"}));
}

TEST(LayoutSearchTest, AutoMeshTakesAWorkerCount) {
  ASSERT_OK_AND_ASSIGN(int n, ParseAutoMesh("auto:8"));
  EXPECT_EQ(n, 8);
  for (const char* bad : {"auto:", "auto:0", "auto:x", "8", "rows:2"}) {
    EXPECT_TRUE(StatusIs(ParseAutoMesh(bad).status(), absl::StatusCode::kInvalidArgument,
                         {std::string("'") + bad + "'", "auto:N"}));
  }
}

// x [batch:8, d_model:6] times w [d_model:6, d_ff:12].
Graph Mlp() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_model", 6}}));
  TensorRef w = b.Variable("w", Shape({{"d_model", 6}, {"d_ff", 12}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"batch", 8}, {"d_ff", 12}}), "h"));
  return b.Build().value();
}

TEST(LayoutSearchTest, MovesAreTheDimsTheMeshDimsDivide) {
  const auto moves = LayoutMoves(Mlp(), *Mesh::Parse("rows:2,cols:4"));
  const std::vector<std::pair<std::string, std::string>> want = {{"batch", "rows"},
                                                                 {"batch", "cols"},
                                                                 {"d_ff", "rows"},
                                                                 {"d_ff", "cols"},
                                                                 {"d_model", "rows"}};
  EXPECT_EQ(moves, want);  // d_model (6) does not divide by cols (4)
}

// A closed-form cost: splitting batch divides the time by its mesh dim's size, splitting d_ff
// by half its mesh dim's size, every rule costs 0.01 s; a layout ValidateLayouts refuses is
// refused; with `need_split_weights`, a layout that leaves w whole does not fit.
EvaluateFn ClosedForm(const Graph& graph, bool need_split_weights = false) {
  return [&graph, need_split_weights](const Mesh& mesh,
                                      const LayoutRules& rules) -> absl::StatusOr<Evaluation> {
    if (absl::Status s = ValidateLayouts(graph, mesh, rules); !s.ok()) return s;
    double speedup = 1.0;
    for (const auto& [dim, mesh_dim] : rules.rules()) {
      const int64_t size = mesh.size(mesh.AxisOf(mesh_dim));
      if (dim == "batch") speedup *= size;
      if (dim == "d_ff") speedup *= 0.5 * size;
    }
    const double seconds = 1.0 / speedup + 0.01 * rules.rules().size();
    const bool split_weights = rules.rules().count("d_ff") || rules.rules().count("d_model");
    if (need_split_weights && !split_weights) {
      return absl::ResourceExhaustedError("w does not fit");
    }
    return Evaluation{seconds, 0};
  };
}

TEST(LayoutSearchTest, FindsTheBestLayoutOfEveryMeshDeterministically) {
  const Graph g = Mlp();
  ASSERT_OK_AND_ASSIGN(auto meshes, MeshesFor(8, 2));
  ASSERT_OK_AND_ASSIGN(SearchResult r, SearchLayouts(g, meshes, ClosedForm(g)));
  ASSERT_FALSE(r.best.empty());
  // batch over the bigger mesh dim (/4) and d_ff over the other (/1): 1/4 + 0.02 = 0.27; or
  // batch over x:8 alone: 1/8 + 0.01 = 0.135 — the best.
  EXPECT_EQ(r.best[0].mesh.ToString(), "x:8");
  EXPECT_EQ(r.best[0].rules.ToString(), "batch:x");
  EXPECT_NEAR(r.best[0].evaluation.seconds, 0.135, 1e-12);
  for (size_t i = 1; i < r.best.size(); ++i) {
    EXPECT_LE(r.best[i - 1].evaluation.seconds, r.best[i].evaluation.seconds);
  }
  // Invalid layouts (batch and d_ff of h on one mesh dim) were tried and refused, never kept.
  EXPECT_GT(r.refused, 0);
  ASSERT_OK_AND_ASSIGN(SearchResult again, SearchLayouts(g, meshes, ClosedForm(g)));
  ASSERT_EQ(again.best.size(), r.best.size());
  for (size_t i = 0; i < r.best.size(); ++i) {
    EXPECT_EQ(again.best[i].mesh.ToString() + " " + again.best[i].rules.ToString(),
              r.best[i].mesh.ToString() + " " + r.best[i].rules.ToString());
  }
  EXPECT_EQ(again.evaluations, r.evaluations);
}

TEST(LayoutSearchTest, StartsFromSingleRulesWhenReplicatedDoesNotFitAndRespectsTheBudget) {
  const Graph g = Mlp();
  const std::vector<Mesh> mesh = {*Mesh::Parse("rows:2,cols:4")};
  ASSERT_OK_AND_ASSIGN(SearchResult r, SearchLayouts(g, mesh, ClosedForm(g, true)));
  ASSERT_FALSE(r.best.empty());
  // batch over rows (/2) and d_ff over cols (/2), or batch over cols (/4) and d_ff over rows
  // (/1): 1/4 + 0.02 = 0.27 both; the rules' text breaks the tie.
  EXPECT_NEAR(r.best[0].evaluation.seconds, 0.27, 1e-12);
  EXPECT_EQ(r.best[0].rules.ToString(), "batch:cols,d_ff:rows");
  for (const Candidate& c : r.best)
    EXPECT_TRUE(c.rules.rules().count("d_ff") || c.rules.rules().count("d_model"));
  SearchOptions tight;
  tight.max_evaluations = 5;  // {}, batch:rows, batch:cols refused; d_ff:rows, d_ff:cols fit
  ASSERT_OK_AND_ASSIGN(SearchResult small, SearchLayouts(g, mesh, ClosedForm(g, true), tight));
  EXPECT_EQ(small.evaluations, 5);
  EXPECT_EQ(small.refused, 3);
  EXPECT_EQ(small.best.size(), 2u);
  // Nothing fits: NotFound with the last refusal.
  auto nothing = [](const Mesh&, const LayoutRules&) -> absl::StatusOr<Evaluation> {
    return absl::ResourceExhaustedError("too big");
  };
  EXPECT_TRUE(StatusIs(SearchLayouts(g, mesh, nothing).status(), absl::StatusCode::kNotFound,
                       {"no layout", "too big"}));
}

TEST(LayoutSearchTest, RulesEqualUpToEqualSizeMeshDimsAreOneCandidate) {
  const Graph g = Mlp();
  const std::vector<Mesh> mesh = {*Mesh::Parse("rows:2,cols:2")};
  std::set<std::string> tried;
  EvaluateFn base = ClosedForm(g);
  auto counting = [&](const Mesh& m, const LayoutRules& r) {
    tried.insert(r.ToString());
    return base(m, r);
  };
  ASSERT_OK_AND_ASSIGN(SearchResult sym, SearchLayouts(g, mesh, counting));
  const std::set<std::string> sym_tried = tried;
  tried.clear();
  SearchOptions plain;
  plain.mesh_symmetry = false;
  ASSERT_OK_AND_ASSIGN(SearchResult all, SearchLayouts(g, mesh, counting, plain));
  // The symmetric search never tries both rules of a pair that swaps rows and cols, tries fewer,
  // and finds the same best time.
  EXPECT_LT(sym.evaluations, all.evaluations);
  auto swapped = [](std::string r) {
    absl::StrReplaceAll({{"rows", "cols"}, {"cols", "rows"}}, &r);
    LayoutRules l = *LayoutRules::Parse(r, *Mesh::Parse("rows:2,cols:2"));
    return l.ToString();
  };
  for (const std::string& r : sym_tried) {
    if (swapped(r) != r) EXPECT_FALSE(sym_tried.count(swapped(r))) << r;
  }
  EXPECT_TRUE(sym_tried.count("batch:rows"));
  EXPECT_FALSE(sym_tried.count("batch:cols"));
  EXPECT_TRUE(tried.count("batch:cols"));
  ASSERT_FALSE(sym.best.empty());
  ASSERT_FALSE(all.best.empty());
  EXPECT_DOUBLE_EQ(sym.best[0].evaluation.seconds, all.best[0].evaluation.seconds);
}

TEST(LayoutSearchTest, CandidatesOverTheLimitAreStepsTowardsRulesThatFit) {
  const Graph g = Mlp();
  const std::vector<Mesh> mesh = {*Mesh::Parse("rows:2,cols:4")};
  // Only batch and d_ff both split fit; fewer rules need more memory (more rules, less).
  auto two_rules = [&g](const Mesh& m, const LayoutRules& r) -> absl::StatusOr<Evaluation> {
    if (absl::Status s = ValidateLayouts(g, m, r); !s.ok()) return s;
    Evaluation e{1.0 + 0.01 * r.rules().size(),
                 static_cast<int64_t>(1000 / (r.rules().size() + 1))};
    e.fits = r.rules().count("batch") && r.rules().count("d_ff");
    if (!e.fits) e.refusal = "too big";
    return e;
  };
  ASSERT_OK_AND_ASSIGN(SearchResult r, SearchLayouts(g, mesh, two_rules));
  ASSERT_FALSE(r.best.empty());
  for (const Candidate& c : r.best) {
    EXPECT_TRUE(c.evaluation.fits);
    EXPECT_TRUE(c.rules.rules().count("batch") && c.rules.rules().count("d_ff"))
        << c.rules.ToString();
  }
  EXPECT_GT(r.refused, 0);
  // Nothing fits: NotFound naming the candidate of the smallest peak.
  auto never = [&](const Mesh& m, const LayoutRules& rules) -> absl::StatusOr<Evaluation> {
    ASSIGN_OR_RETURN(Evaluation e, two_rules(m, rules));
    e.fits = false;
    e.refusal = absl::StrCat("peak ", e.peak_bytes);
    return e;
  };
  EXPECT_TRUE(StatusIs(SearchLayouts(g, mesh, never).status(), absl::StatusCode::kNotFound,
                       {"no layout", "the closest", "peak 333"}));
}

}  // namespace
}  // namespace meshrt
