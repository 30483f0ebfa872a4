// The spatial ops' shape inference and reference kernels on hand-computed examples, through the
// interpreter (which runs the reference kernels on whole tensors).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/spatial_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using ::testing::ElementsAreArray;
using testing_spatial::GraphFromText;

// Interprets `ops` (text) with placeholder `x` (and optional `f`) fed `x_value`/`f_value`, and
// returns tensor `fetch`.
Tensor Interp(const std::string& ops, const Tensor& x_value, const std::string& fetch,
              const Tensor* f_value = nullptr) {
  std::string text =
      absl::StrCat(R"pb(ops { name: "x" type: "placeholder" dtype:)pb",
                   x_value.dtype() == DType::kFloat32 ? "DT_FLOAT32" : "DT_INT32", " shape { ",
                   x_value.shape().ToProto().ShortDebugString(), " } }");
  TensorMap feeds = {{"x", x_value}};
  if (f_value != nullptr) {
    absl::StrAppend(&text, R"pb(ops { name: "f" type: "placeholder" shape {)pb",
                    f_value->shape().ToProto().ShortDebugString(), " } }");
    feeds["f"] = *f_value;
  }
  absl::StrAppend(&text, ops);
  const Graph g = GraphFromText(text);
  absl::StatusOr<TensorMap> out = Interpret(g, feeds, {fetch});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at(fetch) : Tensor();
}

std::vector<float> Floats(const Tensor& t) { return {t.floats().begin(), t.floats().end()}; }

TEST(ShiftTest, ZeroFillAndWrap) {
  const Tensor x = Tensor::Float(Shape{{"n", 5}}, {1, 2, 3, 4, 5});
  EXPECT_THAT(Floats(Interp(R"pb(ops {
                                   name: "y"
                                   type: "shift"
                                   inputs: "x"
                                   dims: "n"
                                   attrs {
                                     key: "offset"
                                     value { i: 2 }
                                   }
                                 })pb",
                            x, "y")),
              ElementsAreArray({0, 0, 1, 2, 3}));
  EXPECT_THAT(Floats(Interp(R"pb(ops {
                                   name: "y"
                                   type: "shift"
                                   inputs: "x"
                                   dims: "n"
                                   attrs {
                                     key: "offset"
                                     value { i: -1 }
                                   }
                                   attrs {
                                     key: "wrap"
                                     value { b: true }
                                   }
                                 })pb",
                            x, "y")),
              ElementsAreArray({2, 3, 4, 5, 1}));
  EXPECT_THAT(Floats(Interp(R"pb(ops {
                                   name: "y"
                                   type: "shift"
                                   inputs: "x"
                                   dims: "n"
                                   attrs {
                                     key: "offset"
                                     value { i: 7 }
                                   }
                                 })pb",
                            x, "y")),
              ElementsAreArray({0, 0, 0, 0, 0}));
}

TEST(ShiftTest, AlongAnInnerDimOfInts) {
  const Tensor x = Tensor::Int(Shape{{"r", 2}, {"n", 3}}, {1, 2, 3, 4, 5, 6});
  const Tensor y = Interp(R"pb(ops {
                                 name: "y"
                                 type: "shift"
                                 inputs: "x"
                                 dims: "n"
                                 attrs {
                                   key: "offset"
                                   value { i: 1 }
                                 }
                                 attrs {
                                   key: "wrap"
                                   value { b: true }
                                 }
                               })pb",
                          x, "y");
  EXPECT_THAT(std::vector<int32_t>(y.ints().begin(), y.ints().end()),
              ElementsAreArray({3, 1, 2, 6, 4, 5}));
}

TEST(HaloExchangeTest, NeighbourEdgesZeroOrWrapped) {
  const Tensor x = Tensor::Float(Shape{{"blk", 3}, {"pos", 2}}, {1, 2, 3, 4, 5, 6});
  const Tensor zero = Interp(R"pb(ops {
                                    name: "y"
                                    type: "halo_exchange"
                                    inputs: "x"
                                    dims: "blk"
                                    dims: "pos"
                                    attrs {
                                      key: "halo"
                                      value { i: 1 }
                                    }
                                  })pb",
                             x, "y");
  EXPECT_EQ(zero.shape(), Shape({{"blk", 3}, {"pos_halo", 4}}));
  EXPECT_THAT(Floats(zero), ElementsAreArray({0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 0}));
  const Tensor wrap = Interp(R"pb(ops {
                                    name: "y"
                                    type: "halo_exchange"
                                    inputs: "x"
                                    dims: "blk"
                                    dims: "pos"
                                    attrs {
                                      key: "halo"
                                      value { i: 1 }
                                    }
                                    attrs {
                                      key: "wrap"
                                      value { b: true }
                                    }
                                    attrs {
                                      key: "output_dim"
                                      value { s: "p2" }
                                    }
                                  })pb",
                             x, "y");
  EXPECT_EQ(wrap.shape(), Shape({{"blk", 3}, {"p2", 4}}));
  EXPECT_THAT(Floats(wrap), ElementsAreArray({6, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 1}));
  const Tensor two = Interp(R"pb(ops {
                                   name: "y"
                                   type: "halo_exchange"
                                   inputs: "x"
                                   dims: "blk"
                                   dims: "pos"
                                   attrs {
                                     key: "halo"
                                     value { i: 2 }
                                   }
                                 })pb",
                            x, "y");
  EXPECT_THAT(Floats(two),
              ElementsAreArray({0, 0, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 0, 0}));
}

TEST(ConvTest, Conv1dSameValidAndStrided) {
  const Tensor x = Tensor::Float(Shape{{"t", 5}, {"ci", 1}}, {1, 2, 3, 4, 5});
  const Tensor f = Tensor::Float(Shape{{"k", 3}, {"ci", 1}, {"co", 1}}, {1, 0, -1});
  const Tensor same = Interp(
      R"pb(ops { name: "y" type: "conv1d" inputs: "x" inputs: "f" dims: "t" })pb", x, "y", &f);
  EXPECT_EQ(same.shape(), Shape({{"t", 5}, {"co", 1}}));
  EXPECT_THAT(Floats(same), ElementsAreArray({-2, -2, -2, -2, 4}));
  const Tensor valid = Interp(R"pb(ops {
                                     name: "y"
                                     type: "conv1d"
                                     inputs: "x"
                                     inputs: "f"
                                     dims: "t"
                                     attrs {
                                       key: "padding"
                                       value { s: "VALID" }
                                     }
                                   })pb",
                              x, "y", &f);
  EXPECT_EQ(valid.shape(), Shape({{"t_out", 3}, {"co", 1}}));
  EXPECT_THAT(Floats(valid), ElementsAreArray({-2, -2, -2}));
  const Tensor ones = Tensor::Float(Shape{{"k", 3}, {"ci", 1}, {"co", 1}}, {1, 1, 1});
  const Tensor strided = Interp(R"pb(ops {
                                       name: "y"
                                       type: "conv1d"
                                       inputs: "x"
                                       inputs: "f"
                                       dims: "t"
                                       attrs {
                                         key: "strides"
                                         value { ints { values: 2 } }
                                       }
                                       attrs {
                                         key: "output_dims"
                                         value { strings { values: "ts" } }
                                       }
                                     })pb",
                                x, "y", &ones);
  EXPECT_EQ(strided.shape(), Shape({{"ts", 3}, {"co", 1}}));
  EXPECT_THAT(Floats(strided), ElementsAreArray({3, 9, 9}));
}

TEST(ConvTest, ChannelsMix) {
  const Tensor x = Tensor::Float(Shape{{"t", 3}, {"ci", 2}}, {1, 10, 2, 20, 3, 30});
  const Tensor f = Tensor::Float(Shape{{"k", 1}, {"ci", 2}, {"co", 2}}, {1, 2, 3, 4});
  const Tensor y = Interp(
      R"pb(ops { name: "y" type: "conv1d" inputs: "x" inputs: "f" dims: "t" })pb", x, "y", &f);
  EXPECT_THAT(Floats(y), ElementsAreArray({31, 42, 62, 84, 93, 126}));
}

TEST(ConvTest, Conv2dSameAndValidWithABatchDim) {
  std::vector<float> values;
  for (int b = 0; b < 2; ++b) {
    for (int i = 1; i <= 9; ++i) values.push_back(b == 0 ? i : -i);
  }
  const Tensor x = Tensor::Float(Shape{{"b", 2}, {"h", 3}, {"w", 3}, {"ci", 1}}, values);
  const Tensor f = Tensor::Float(Shape{{"kh", 2}, {"kw", 2}, {"ci", 1}, {"co", 1}}, {1, 1, 1, 1});
  const Tensor valid = Interp(R"pb(ops {
                                     name: "y"
                                     type: "conv2d"
                                     inputs: "x"
                                     inputs: "f"
                                     dims: "h"
                                     dims: "w"
                                     attrs {
                                       key: "padding"
                                       value { s: "VALID" }
                                     }
                                   })pb",
                              x, "y", &f);
  EXPECT_EQ(valid.shape(), Shape({{"b", 2}, {"h_out", 2}, {"w_out", 2}, {"co", 1}}));
  EXPECT_THAT(Floats(valid), ElementsAreArray({12, 16, 24, 28, -12, -16, -24, -28}));
  const Tensor same =
      Interp(R"pb(ops { name: "y" type: "conv2d" inputs: "x" inputs: "f" dims: "h" dims: "w" })pb",
             x, "y", &f);
  EXPECT_EQ(same.shape(), Shape({{"b", 2}, {"h", 3}, {"w", 3}, {"co", 1}}));
  EXPECT_THAT(Floats(same), ElementsAreArray({12, 16, 9, 24, 28, 15, 15, 17, 9,  //
                                              -12, -16, -9, -24, -28, -15, -15, -17, -9}));
}

TEST(PoolTest, MaxAndAverageOverNonOverlappingWindows) {
  const Tensor x = Tensor::Float(Shape{{"h", 4}, {"w", 2}}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor mx = Interp(R"pb(ops {
                                  name: "y"
                                  type: "max_pool"
                                  inputs: "x"
                                  dims: "h"
                                  attrs {
                                    key: "ksize"
                                    value { ints { values: 2 } }
                                  }
                                })pb",
                           x, "y");
  EXPECT_EQ(mx.shape(), Shape({{"h_out", 2}, {"w", 2}}));
  EXPECT_THAT(Floats(mx), ElementsAreArray({3, 4, 7, 8}));
  const Tensor avg = Interp(R"pb(ops {
                                   name: "y"
                                   type: "avg_pool"
                                   inputs: "x"
                                   dims: "h"
                                   attrs {
                                     key: "ksize"
                                     value { ints { values: 2 } }
                                   }
                                 })pb",
                            x, "y");
  EXPECT_THAT(Floats(avg), ElementsAreArray({2, 3, 6, 7}));
  const Tensor both = Interp(R"pb(ops {
                                    name: "y"
                                    type: "max_pool"
                                    inputs: "x"
                                    dims: "h"
                                    dims: "w"
                                    attrs {
                                      key: "ksize"
                                      value { ints { values: [ 2, 2 ] } }
                                    }
                                  })pb",
                             x, "y");
  EXPECT_EQ(both.shape(), Shape({{"h_out", 2}, {"w_out", 1}}));
  EXPECT_THAT(Floats(both), ElementsAreArray({4, 8}));
  const Tensor x5 = Tensor::Float(Shape{{"h", 5}}, {1, 5, 2, 7, 9});
  const Tensor floor = Interp(R"pb(ops {
                                     name: "y"
                                     type: "avg_pool"
                                     inputs: "x"
                                     dims: "h"
                                     attrs {
                                       key: "ksize"
                                       value { ints { values: 2 } }
                                     }
                                   })pb",
                              x5, "y");
  EXPECT_THAT(Floats(floor), ElementsAreArray({3.0, 4.5}));
}

absl::Status BuildStatus(const std::string& text) {
  v1::Graph proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto)) << text;
  return Graph::Build(proto).status();
}

TEST(SpatialShapeTest, BadAttributesAreRefusedWithTheirNames) {
  const std::string x = R"pb(ops {
                               name: "x"
                               type: "placeholder"
                               shape {
                                 dims { name: "h" size: 4 }
                                 dims { name: "c" size: 2 }
                               }
                             }
                             ops {
                               name: "f"
                               type: "placeholder"
                               shape {
                                 dims { name: "k" size: 3 }
                                 dims { name: "c" size: 2 }
                                 dims { name: "o" size: 2 }
                               }
                             })pb";
  struct Bad {
    std::string op;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {R"pb(ops {
              name: "y"
              type: "shift"
              inputs: "x"
              dims: "q"
              attrs {
                key: "offset"
                value { i: 1 }
              }
            })pb",
       "dim 'q' is not a dim"},
      {R"pb(ops { name: "y" type: "shift" inputs: "x" dims: "h" })pb", "offset"},
      {R"pb(ops {
              name: "y"
              type: "halo_exchange"
              inputs: "x"
              dims: "h"
              dims: "c"
              attrs {
                key: "halo"
                value { i: 3 }
              }
            })pb",
       "halo 3 must be in [0, 2]"},
      {R"pb(ops { name: "y" type: "conv2d" inputs: "x" inputs: "f" dims: "h" })pb",
       "needs 2 spatial dim(s)"},
      {R"pb(ops {
              name: "y"
              type: "conv1d"
              inputs: "x"
              inputs: "f"
              dims: "h"
              attrs {
                key: "padding"
                value { s: "FULL" }
              }
            })pb",
       "use SAME or VALID"},
      {R"pb(ops { name: "y" type: "conv1d" inputs: "x" inputs: "f" dims: "c" })pb",
       "non-spatial dim"},
      {R"pb(ops {
              name: "y"
              type: "max_pool"
              inputs: "x"
              dims: "h"
              attrs {
                key: "ksize"
                value { ints { values: 2 } }
              }
              attrs {
                key: "strides"
                value { ints { values: 1 } }
              }
            })pb",
       "non-overlapping"},
      {R"pb(ops { name: "y" type: "_dim_range" inputs: "x" dims: "h" })pb", "internal"},
  };
  for (const Bad& bad : cases) {
    EXPECT_TRUE(StatusIs(BuildStatus(x + bad.op), absl::StatusCode::kInvalidArgument,
                         {"op 'y'", bad.message}))
        << bad.op;
  }
}

}  // namespace
}  // namespace meshrt
