// The random and fill ops: pinned values of the generator (SplitMix64, so a format change is
// caught), distributions, dropout, zeros/ones; and layout invariance — on every mesh and layout the
// simulated mesh produces bitwise the interpreter's tensors, with no communication at all.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/spatial_testing.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

using testing_spatial::CountCollectives;
using testing_spatial::ExpectMatchesInterpreter;
using testing_spatial::GraphFromText;

// Interprets a graph made of `ops` alone (no placeholders) and returns tensor `fetch`.
Tensor Interp(const std::string& ops, const std::string& fetch) {
  absl::StatusOr<TensorMap> out = Interpret(GraphFromText(ops), {}, {fetch});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at(fetch) : Tensor();
}

std::string Source(const std::string& type, const std::string& name, int64_t seed,
                   const std::string& extra = "") {
  return absl::StrCat("ops { name: '", name, "' type: '", type,
                      "' shape { dims { name: 'a' size: 64 } dims { name: 'b' size: 64 } }"
                      " attrs { key: 'seed' value { i: ",
                      seed, " } } ", extra, " }");
}

double Mean(const Tensor& t) {
  double s = 0;
  for (float v : t.floats()) s += v;
  return s / t.num_elements();
}

TEST(RandomTest, PinnedValues) {
  // Independently computed from the documented generator (core/ops/ops_random.h): the first uniforms
  // of op 'u' with seed 5, the first normals of op 'n' with seed 9.
  const Tensor u = Interp(
      "ops { name: 'u' type: 'random_uniform' shape { dims { name: 'a' size: 4 } }"
      " attrs { key: 'seed' value { i: 5 } } }",
      "u");
  EXPECT_EQ(u.f32()[0], 0.49066293239593506f);
  EXPECT_EQ(u.f32()[1], 0.540745198726654f);
  EXPECT_EQ(u.f32()[2], 0.3198336362838745f);
  EXPECT_EQ(u.f32()[3], 0.1395445466041565f);
  const Tensor n = Interp(
      "ops { name: 'n' type: 'random_normal' shape { dims { name: 'a' size: 3 } }"
      " attrs { key: 'seed' value { i: 9 } } }",
      "n");
  EXPECT_FLOAT_EQ(n.f32()[0], -0.7707421779632568f);
  EXPECT_FLOAT_EQ(n.f32()[1], 0.11167582869529724f);
  EXPECT_FLOAT_EQ(n.f32()[2], 0.5101431608200073f);
}

TEST(RandomTest, UniformRangeAndSpread) {
  const Tensor u = Interp(Source("random_uniform", "u", 1), "u");
  std::set<float> distinct(u.floats().begin(), u.floats().end());
  for (float v : u.floats()) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  EXPECT_NEAR(Mean(u), 0.5, 0.02);
  EXPECT_GT(distinct.size(), 3900u);
  const Tensor scaled = Interp(Source("random_uniform", "u", 1,
                                      "attrs { key: 'minval' value { f: -2 } }"
                                      " attrs { key: 'maxval' value { f: 3 } }"),
                               "u");
  for (int64_t i = 0; i < u.num_elements(); ++i) {
    ASSERT_EQ(scaled.f32()[i], -2.0f + 5.0f * u.f32()[i]);
  }
}

TEST(RandomTest, NormalMoments) {
  const Tensor n = Interp(Source("random_normal", "n", 3), "n");
  const double mean = Mean(n);
  double var = 0;
  for (float v : n.floats()) var += (v - mean) * (v - mean);
  var /= n.num_elements();
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.08);
  const Tensor shifted = Interp(Source("random_normal", "n", 3,
                                       "attrs { key: 'mean' value { f: 5 } }"
                                       " attrs { key: 'stddev' value { f: 0.5 } }"),
                                "n");
  EXPECT_NEAR(Mean(shifted), 5.0, 0.03);
}

TEST(RandomTest, SeedAndOpNameSelectTheStream) {
  const Tensor a = Interp(Source("random_uniform", "u", 1), "u");
  const Tensor again = Interp(Source("random_uniform", "u", 1), "u");
  const Tensor other_seed = Interp(Source("random_uniform", "u", 2), "u");
  const Tensor other_name = Interp(Source("random_uniform", "v", 1), "v");
  EXPECT_TRUE(testing_spatial::BitwiseEqual(a, again));
  int same_seed = 0, same_name = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    same_seed += a.f32()[i] == other_seed.f32()[i];
    same_name += a.f32()[i] == other_name.f32()[i];
  }
  EXPECT_LT(same_seed, 5);
  EXPECT_LT(same_name, 5);
}

TEST(RandomTest, DropoutKeepsAndScales) {
  const std::string ones =
      "ops { name: 'x' type: 'ones' shape { dims { name: 'a' size: 64 } dims { name: 'b' size: 64 "
      "} } }";
  const Tensor d = Interp(ones +
                              " ops { name: 'd' type: 'dropout' inputs: 'x'"
                              " attrs { key: 'rate' value { f: 0.25 } }"
                              " attrs { key: 'seed' value { i: 4 } } }",
                          "d");
  int dropped = 0;
  for (float v : d.floats()) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      ASSERT_EQ(v, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(dropped / 4096.0, 0.25, 0.03);
  const Tensor keep_all = Interp(
      ones + " ops { name: 'd' type: 'dropout' inputs: 'x' attrs { key: 'rate' value { f: 0 } } }",
      "d");
  for (float v : keep_all.floats()) ASSERT_EQ(v, 1.0f);
}

TEST(RandomTest, ZerosAndOnes) {
  const Tensor z = Interp(
      "ops { name: 'z' type: 'zeros' dtype: DT_INT32"
      " shape { dims { name: 'a' size: 3 } } }",
      "z");
  EXPECT_EQ(z.dtype(), DType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(z.ints().begin(), z.ints().end()), std::vector<int32_t>(3, 0));
  const Tensor o =
      Interp("ops { name: 'o' type: 'ones' shape { dims { name: 'a' size: 2 } } }", "o");
  EXPECT_EQ(std::vector<float>(o.floats().begin(), o.floats().end()), std::vector<float>(2, 1.0f));
}

TEST(RandomTest, BadAttributesAreRefused) {
  for (const std::string& op :
       {std::string("ops { name: 'r' type: 'random_uniform' dtype: DT_INT32"
                    " shape { dims { name: 'a' size: 2 } } }"),
        std::string("ops { name: 'r' type: 'random_normal' shape { dims { name: 'a' size: 2 } }"
                    " attrs { key: 'stddev' value { f: -1 } } }"),
        std::string("ops { name: 'x' type: 'ones' shape { dims { name: 'a' size: 2 } } }"
                    " ops { name: 'r' type: 'dropout' inputs: 'x'"
                    " attrs { key: 'rate' value { f: 1 } } }")}) {
    v1::Graph proto;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(op, &proto));
    EXPECT_TRUE(
        StatusIs(Graph::Build(proto).status(), absl::StatusCode::kInvalidArgument, {"op 'r'"}))
        << op;
  }
}

// Random tensors of rank 1 to 3, dropout of a fed tensor, and fills, for the layout tests.
constexpr char kRandomGraph[] = R"pb(
  ops {
    name: "u"
    type: "random_uniform"
    shape {
      dims { name: "a" size: 8 }
      dims { name: "b" size: 12 }
      dims { name: "c" size: 4 }
    }
    attrs {
      key: "seed"
      value { i: 7 }
    }
  }
  ops {
    name: "n"
    type: "random_normal"
    shape {
      dims { name: "a" size: 8 }
      dims { name: "b" size: 12 }
    }
    attrs {
      key: "seed"
      value { i: 7 }
    }
    attrs {
      key: "stddev"
      value { f: 2 }
    }
  }
  ops {
    name: "v"
    type: "random_uniform"
    shape { dims { name: "c" size: 4 } }
  }
  ops {
    name: "x"
    type: "placeholder"
    shape {
      dims { name: "a" size: 8 }
      dims { name: "b" size: 12 }
      dims { name: "c" size: 4 }
    }
  }
  ops {
    name: "d"
    type: "dropout"
    inputs: "x"
    attrs {
      key: "rate"
      value { f: 0.5 }
    }
    attrs {
      key: "seed"
      value { i: 3 }
    }
  }
  ops {
    name: "z"
    type: "zeros"
    dtype: DT_INT32
    shape { dims { name: "a" size: 8 } }
  }
  ops {
    name: "o"
    type: "ones"
    shape {
      dims { name: "b" size: 12 }
      dims { name: "c" size: 4 }
    }
  }
  outputs: [ "u", "n", "v", "d", "z", "o" ]
)pb";

struct Case {
  std::string mesh;
  std::string layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.mesh << " / " << c.layout; }

class RandomLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(RandomLayoutTest, BitwiseEqualToTheInterpreterWithoutCommunication) {
  for (const KernelRunner* kernels : {&ReferenceKernels(), &CpuKernels()}) {
    const v1::Program p = ExpectMatchesInterpreter(GraphFromText(kRandomGraph), GetParam().mesh,
                                                   GetParam().layout, *kernels, /*tolerance=*/0);
    for (const v1::Instruction& inst : p.instructions()) {
      EXPECT_FALSE(inst.has_collective()) << inst.ShortDebugString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, RandomLayoutTest,
    ::testing::Values(Case{"p:1", ""}, Case{"p:1", "a:p"}, Case{"p:4", "a:p"}, Case{"p:4", "b:p"},
                      Case{"p:4", "c:p"}, Case{"rows:2,cols:2", "a:rows,b:cols"},
                      Case{"rows:2,cols:2", "b:rows,c:cols"}, Case{"rows:2,cols:2", "c:rows"},
                      Case{"x:2,y:2,z:2", "a:x,b:y,c:z"}, Case{"x:2,y:2,z:2", "c:x,a:z"},
                      Case{"x:2,y:2,z:2", "b:z,c:y"}));

}  // namespace
}  // namespace meshrt
