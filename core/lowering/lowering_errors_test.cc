// Lowering returns errors instead of aborting: each case here used to abort the process (a failed
// invariant check, or an out-of-range .at()/.value()) and must now come back as a Status with the
// right code and a message naming the op (and tensor or dim) at fault.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/program_builder.h"
#include "core/lowering/lowering.h"
#include "core/ops/lower_ops.h"
#include "core/ops/ops.h"
#include "core/ops/ops_spatial.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// A test-only op of a family whose ops must bring their own lowering, registered without one: it
// passes shape inference (its output is its input's type) but has nothing to lower it with.
absl::StatusOr<TensorType> SameType(const v1::Op&, const std::vector<TensorType>& inputs) {
  return inputs[0];
}
const bool kRegistered = RegisterOps({
    {"_test_unlowered", OpFamily::kSpatial, 1, 1, false, "test only: no lowering", "none",
     /*needs_slice_begin=*/false, SameType, /*reference=*/nullptr, /*lower=*/nullptr},
});

v1::Op OpFromText(const std::string& text) {
  v1::Op op;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &op)) << text;
  return op;
}

// One graph, mesh and layout rules, and a builder the test lowers ops into by hand (LowerOp),
// so it can hand the lowering an op or inputs the graph's validation would not have let through.
class LoweringErrorsTest : public ::testing::Test {
 protected:
  void Make(const std::string& graph_text, const std::string& mesh, const std::string& rules) {
    v1::Graph proto;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(graph_text, &proto)) << graph_text;
    ASSERT_OK_AND_ASSIGN(graph_, Graph::Build(proto));
    ASSERT_OK_AND_ASSIGN(mesh_, Mesh::Parse(mesh));
    ASSERT_OK_AND_ASSIGN(rules_, LayoutRules::Parse(rules, mesh_));
    builder_ = std::make_unique<ProgramBuilder>(mesh_, rules_);
    ctx_ = std::make_unique<LoweringContext>(LoweringContext{graph_, rules_, *builder_});
  }

  // The graph op `name`, lowered with no inputs (a placeholder).
  LaidOutTensor Placeholder(const std::string& name) {
    absl::StatusOr<LaidOutTensor> t = LowerOp(*ctx_, *graph_.FindOp(name), {});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : LaidOutTensor();
  }

  Graph graph_;
  Mesh mesh_;
  LayoutRules rules_;
  std::unique_ptr<ProgramBuilder> builder_;
  std::unique_ptr<LoweringContext> ctx_;
};

constexpr char kOneInput[] = R"pb(
  ops {
    name: "x"
    type: "placeholder"
    shape {
      dims { name: "a" size: 4 }
      dims { name: "b" size: 6 }
    }
  }
)pb";

TEST_F(LoweringErrorsTest, RegisteredOpWithoutLoweringIsInternalThroughLower) {
  ASSERT_TRUE(kRegistered);
  Make(std::string(kOneInput) + R"pb(ops { name: "odd" type: "_test_unlowered" inputs: "x" })pb",
       "m:2", "a:m");
  absl::StatusOr<v1::Program> p = Lower(graph_, mesh_, rules_);
  EXPECT_TRUE(StatusIs(p.status(), absl::StatusCode::kInternal,
                       {"op 'odd' (_test_unlowered)", "family spatial", "has no lowering"}));
}

TEST_F(LoweringErrorsTest, UnknownOpTypeIsInvalidArgument) {
  Make(kOneInput, "m:2", "a:m");
  const LaidOutTensor x = Placeholder("x");
  absl::StatusOr<LaidOutTensor> out =
      LowerOp(*ctx_, OpFromText(R"pb(name: "mystery" type: "no_such_op" inputs: "x")pb"), {x});
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'mystery' (no_such_op)", "unknown op type"}));
}

TEST_F(LoweringErrorsTest, WrongInputCountIsInvalidArgument) {
  Make(kOneInput, "m:2", "a:m");
  const LaidOutTensor x = Placeholder("x");
  absl::StatusOr<LaidOutTensor> out =
      LowerOp(*ctx_, OpFromText(R"pb(name: "r" type: "relu" inputs: "x")pb"), {x, x});
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'r' (relu)", "lowered with 2 inputs", "takes 1"}));
}

constexpr char kConv[] = R"pb(
  ops {
    name: "x1"
    type: "placeholder"
    shape {
      dims { name: "batch" size: 2 }
      dims { name: "t" size: 8 }
      dims { name: "cin" size: 4 }
    }
  }
  ops {
    name: "f1"
    type: "placeholder"
    shape {
      dims { name: "kt" size: 3 }
      dims { name: "cin" size: 4 }
      dims { name: "cout" size: 4 }
    }
  }
  ops { name: "c1" type: "conv1d" inputs: "x1" inputs: "f1" dims: "t" }
)pb";

TEST_F(LoweringErrorsTest, ConvWithAttrsItsGraphDidNotValidateIsInvalidArgument) {
  Make(kConv, "m:2", "t:m");
  const LaidOutTensor x = Placeholder("x1");
  const LaidOutTensor f = Placeholder("f1");
  v1::Op conv = *graph_.FindOp("c1");
  (*conv.mutable_attrs())["padding"].set_s("BOGUS");
  absl::StatusOr<LaidOutTensor> out = LowerOp(*ctx_, conv, {x, f});
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'c1' (conv1d)", "padding", "BOGUS"}));
}

constexpr char kHalo[] = R"pb(
  ops {
    name: "xb"
    type: "placeholder"
    shape {
      dims { name: "nb" size: 4 }
      dims { name: "blk" size: 2 }
    }
  }
  ops {
    name: "e"
    type: "halo_exchange"
    inputs: "xb"
    dims: "nb"
    dims: "blk"
    attrs {
      key: "halo"
      value { i: 1 }
    }
  }
)pb";

TEST_F(LoweringErrorsTest, HaloExchangeWiderThanItsBlockIsInvalidArgument) {
  Make(kHalo, "m:2", "nb:m");
  const LaidOutTensor x = Placeholder("xb");
  v1::Op halo = *graph_.FindOp("e");
  (*halo.mutable_attrs())["halo"].set_i(3);  // blocks hold 2 positions
  absl::StatusOr<LaidOutTensor> out = LowerOp(*ctx_, halo, {x});
  EXPECT_TRUE(StatusIs(out.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'e' (halo_exchange)", "halo 3", "'blk'"}));
}

TEST_F(LoweringErrorsTest, ExtendWithHaloChecksTheBlockAndTheSplit) {
  Make(kConv, "m:2", "t:m");
  const LaidOutTensor x = Placeholder("x1");  // t: 8 split over m:2, blocks of 4
  absl::StatusOr<LaidOutTensor> wide =
      spatial::ExtendWithHalo(*ctx_, x, /*dim=*/1, /*before=*/5, /*after=*/0, false, "c1");
  EXPECT_TRUE(StatusIs(wide.status(), absl::StatusCode::kInvalidArgument,
                       {"op 'c1'", "dim 't'", "block of 4"}));
  absl::StatusOr<LaidOutTensor> whole =
      spatial::ExtendWithHalo(*ctx_, x, /*dim=*/2, /*before=*/1, /*after=*/1, false, "c1");
  EXPECT_TRUE(StatusIs(whole.status(), absl::StatusCode::kInternal, {"op 'c1'", "not split"}));
  absl::StatusOr<LaidOutTensor> fits =
      spatial::ExtendWithHalo(*ctx_, x, /*dim=*/1, /*before=*/1, /*after=*/2, false, "c1");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->shape.dim(1).size, (4 + 1 + 2) * 2);
}

// ProgramBuilder preconditions: each broken one is Internal and names the op being lowered.
struct BuilderCase {
  std::string name;
  std::function<absl::Status(ProgramBuilder&, const LaidOutTensor& split_a)> call;
  std::vector<std::string> message;
};

TEST_F(LoweringErrorsTest, BuilderPreconditionsAreInternalNamingTheOp) {
  Make(kOneInput, "m:2,n:3", "a:m,b:n");
  const LaidOutTensor x = Placeholder("x");  // [a:m, b:n]
  const TensorLayout whole{{kReplicated, kReplicated}};
  auto partial = [&](const LaidOutTensor& t, std::vector<int> axes) {
    LaidOutTensor p = t;
    p.partial_sum_axes = std::move(axes);
    return p;
  };
  const std::vector<BuilderCase> cases = {
      {"allgather over an axis that splits nothing",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         LaidOutTensor only_a = t;
         only_a.layout = TensorLayout{{0, kReplicated}};
         return b.AllGather(only_a, /*mesh_axis=*/1, "g").status();
       },
       {"lowering op 'g'", "allgather over mesh axis 1", "splits no dim", "[a:m, b:-]"}},
      {"alltoall onto a split dim",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.AllToAll(t, /*mesh_axis=*/0, /*to_dim=*/1, "t2").status();
       },
       {"lowering op 't2'", "alltoall onto dim 1", "not a whole dim"}},
      {"local slice of a split dim",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.LocalSlice(t, /*mesh_axis=*/1, /*dim=*/0, "s").status();
       },
       {"lowering op 's'", "local slice of dim 0"}},
      {"reduce-scatter onto a split dim",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.ReduceScatter(t, /*mesh_axis=*/1, /*dim=*/1, "rs").status();
       },
       {"lowering op 'rs'", "reduce-scatter onto dim 1"}},
      {"reshard to a target of the wrong rank",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Reshard(t, TensorLayout{{kReplicated}}, "r").status();
       },
       {"lowering op 'r'", "reshard of [a:m, b:n]", "target layout of rank 1"}},
      {"reshard to a mesh axis the mesh lacks",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Reshard(t, TensorLayout{{5, kReplicated}}, "r5").status();
       },
       {"lowering op 'r5'", "mesh axis 5 is not in mesh m:2,n:3"}},
      {"reshard of a partial sum over an axis that also splits",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Reshard(partial(t, {0}), whole, "ps").status();
       },
       {"lowering op 'ps'", "partial sum over mesh axis 0", "also splits"}},
      {"local op reading a partial sum",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         LaidOutTensor in = partial(t, {1});
         in.layout = TensorLayout{{0, kReplicated}};
         return b
             .EmitLocal(OpFromText(R"pb(name: "neg1" type: "neg")pb"), {in}, t.shape, t.dtype,
                        in.layout)
             .status();
       },
       {"lowering op 'neg1'", "local op neg reads a partial sum"}},
      {"local op output layout of the wrong rank",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b
             .EmitLocal(OpFromText(R"pb(name: "neg2" type: "neg")pb"), {t}, t.shape, t.dtype,
                        TensorLayout{{0}})
             .status();
       },
       {"lowering op 'neg2'", "a layout of rank 1 for a tensor of rank 2"}},
      {"adding unlike partial sums",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         LaidOutTensor other = partial(t, {1});
         other.layout = TensorLayout{{0, kReplicated}};
         return b.AddPartials(partial(t, {}), other, "acc").status();
       },
       {"lowering op 'acc'", "adding unlike partial sums"}},
      {"allreduce over an axis the mesh lacks",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.AllReduce(t, {2}, v1::REDUCE_SUM, "ar").status();
       },
       {"lowering op 'ar'", "mesh axis 2 is not in mesh"}},
      {"permute over an axis the mesh lacks",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Permute(t, /*mesh_axis=*/-1, 1, false, "p").status();
       },
       {"lowering op 'p'", "mesh axis -1"}},
      {"permute of a partial sum",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Permute(partial(t, {1}), 0, 1, false, "p2").status();
       },
       {"lowering op 'p2'", "permuting a partial sum"}},
      {"broadcast from a root outside the group",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.Broadcast(t, {1}, /*root=*/3, "bc").status();
       },
       {"lowering op 'bc'", "root 3 in a group of 3"}},
      {"binding a partial sum",
       [&](ProgramBuilder& b, const LaidOutTensor& t) {
         return b.BindOutput("y", partial(t, {1}));
       },
       {"lowering op 'y'", "binding a partial sum as tensor 'y'"}},
      {"updating a variable that does not exist",
       [&](ProgramBuilder& b, const LaidOutTensor& t) { return b.SetVariableUpdate("w", t); },
       {"lowering op 'w'", "no program variable 'w'"}},
  };
  for (const BuilderCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(StatusIs(c.call(*builder_, x), absl::StatusCode::kInternal, c.message));
  }
}

TEST_F(LoweringErrorsTest, AVariableUpdateInAnotherLayoutIsInternal) {
  Make(kOneInput, "m:2", "a:m");
  const LaidOutTensor x = Placeholder("x");
  ASSERT_OK_AND_ASSIGN(const LaidOutTensor w,
                       builder_->AddVariable(OpFromText(R"pb(name: "w" type: "variable")pb"),
                                             x.shape, x.dtype, x.layout));
  LaidOutTensor moved = x;
  moved.layout = TensorLayout{{kReplicated, kReplicated}};
  EXPECT_TRUE(StatusIs(builder_->SetVariableUpdate("w", moved), absl::StatusCode::kInternal,
                       {"variable 'w' laid out [a:m, b:-]", "a value laid out [a:-, b:-]"}));
  ASSERT_OK(builder_->SetVariableUpdate("w", w));
}

}  // namespace
}  // namespace meshrt
