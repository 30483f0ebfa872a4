#include "core/planning/memory_model.h"

#include <string>
#include <tuple>
#include <vector>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::StatusOr<v1::Program> LowerOn(const Graph& g, const std::string& mesh_text,
                                    const std::string& layout) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse(mesh_text));
  ASSIGN_OR_RETURN(LayoutRules rules, LayoutRules::Parse(layout, mesh));
  return Lower(g, mesh, rules);
}

// x[batch=8, d_in=4] -> h0 = x.w1 [batch, hidden=16] -> h = relu(h0) -> y = h.w2 [batch, d_out=2].
struct Mlp {
  GraphBuilder b;
  TensorRef x, w1, w2, y;
  Mlp() {
    x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 4}}));
    w1 = b.Variable("w1", Shape({{"d_in", 4}, {"hidden", 16}}));
    w2 = b.Variable("w2", Shape({{"hidden", 16}, {"d_out", 2}}));
    TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 16}}), "h0"), "h");
    y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 2}}), "y");
  }
};

absl::StatusOr<MemoryReport> MlpForward(const std::string& layout) {
  Mlp m;
  m.b.MarkOutput(m.y);
  ASSIGN_OR_RETURN(Graph g, m.b.Build());
  ASSIGN_OR_RETURN(v1::Program p, LowerOn(g, "p:2", layout));
  const std::vector<std::string> fetches = {"y"};
  MemoryOptions o;
  o.fetches = &fetches;
  return ComputeMemory(p, o);
}

TEST(MemoryModelTest, MlpForwardDataParallelHalvesActivations) {
  // batch:p on p:2, float32 (4 B). Persistent: w1 [4,16] = 256 B, w2 [16,2] = 128 B (replicated);
  // feed x [4,4] = 64 B. Instructions: h0 = einsum [4,16] 256 B -> live 256; h = relu [4,16]:
  // 512 live (h0 is read by it) = the peak; h0 freed -> 256; y [4,2] 32 B -> 288; h freed.
  // Peak = 384 + 64 + 512 = 960 B, at instruction 1 (op 'h').
  ASSERT_OK_AND_ASSIGN(MemoryReport r, MlpForward("batch:p"));
  EXPECT_EQ(r.bytes(MemoryCategory::kVariables), 384);
  EXPECT_EQ(r.bytes(MemoryCategory::kParameters), 0);
  EXPECT_EQ(r.bytes(MemoryCategory::kFeeds), 64);
  EXPECT_EQ(r.bytes(MemoryCategory::kActivations), 512);
  EXPECT_EQ(r.bytes(MemoryCategory::kFetches), 0);  // y is written after the peak
  EXPECT_EQ(r.bytes(MemoryCategory::kGradients), 0);
  EXPECT_EQ(r.backward_from, -1);  // no backward pass
  EXPECT_EQ(r.peak_bytes, 960);
  EXPECT_EQ(r.peak_instruction, 1);
  EXPECT_EQ(r.peak_op, "h");
  ASSERT_EQ(r.top.size(), 5u);
  EXPECT_EQ(r.top[0].name, "h");  // 256 B, ties broken by name: h, h0, w1
  EXPECT_EQ(r.top[0].bytes, 256);
  EXPECT_EQ(r.top[1].name, "h0");
  EXPECT_EQ(r.top[2].name, "w1");
  EXPECT_EQ(r.top[2].category, MemoryCategory::kVariables);
}

TEST(MemoryModelTest, MlpForwardModelParallelHalvesWeights) {
  // hidden:p on p:2. Persistent: w1 [4,8] = 128 B, w2 [8,2] = 64 B; feed x [8,4] = 128 B (whole).
  // h0 [8,8] 256 B; h 256 B -> 512 live = the peak; h0 freed; y's partial sum [8,2] 64 B -> 320;
  // h freed -> 64; y's allreduce 64 B -> 128. Peak = 192 + 128 + 512 = 832 B at op 'h'.
  ASSERT_OK_AND_ASSIGN(MemoryReport r, MlpForward("hidden:p"));
  EXPECT_EQ(r.bytes(MemoryCategory::kVariables), 192);
  EXPECT_EQ(r.bytes(MemoryCategory::kFeeds), 128);
  EXPECT_EQ(r.bytes(MemoryCategory::kActivations), 512);
  EXPECT_EQ(r.peak_bytes, 832);
  EXPECT_EQ(r.peak_op, "h");
}

TEST(MemoryModelTest, AdamSlotsAndParametersByLayout) {
  // Minimize with adam: parameters w1, w2; slots w1/m, w1/v, w2/m, w2/v (each its variable's
  // shape and layout) and the scalar global_step (4 B, replicated).
  for (const auto& [layout, params, feeds] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
           {"batch:p", 384, 64}, {"hidden:p", 192, 128}}) {
    SCOPED_TRACE(layout);
    Mlp m;
    TensorRef loss = m.b.ReduceSum(m.b.Mul(m.y, m.y), {}, "loss");
    TrainOptions opt;
    opt.optimizer = "adam";
    opt.learning_rate.base = 0.01f;
    ASSERT_OK(Minimize(m.b, loss, {m.w1, m.w2}, opt).status());
    ASSERT_OK_AND_ASSIGN(Graph g, m.b.Build());
    ASSERT_OK_AND_ASSIGN(v1::Program p, LowerOn(g, "p:2", layout));
    const std::vector<std::string> fetches = {"loss"};
    const std::vector<std::string> trainable = {"w1", "w2"};
    MemoryOptions o;
    o.fetches = &fetches;
    o.trainable = &trainable;
    ASSERT_OK_AND_ASSIGN(MemoryReport r, ComputeMemory(p, o));
    EXPECT_EQ(r.bytes(MemoryCategory::kParameters), params);
    EXPECT_EQ(r.bytes(MemoryCategory::kOptimizerState), 2 * params + 4);
    EXPECT_EQ(r.bytes(MemoryCategory::kVariables), 0);
    EXPECT_EQ(r.bytes(MemoryCategory::kFeeds), feeds);
    EXPECT_EQ(r.persistent_bytes(), 3 * params + 4);
    EXPECT_GE(r.backward_from, 0);
    int64_t sum = 0;
    for (int64_t bytes : r.at_peak) sum += bytes;
    EXPECT_EQ(sum, r.peak_bytes);  // the categories at the peak add up to it
    // Every variable's update lives to the end of the step, so the peak holds at least the
    // persistent state, the feed and one new value of w1 (w1's slice: 256 B dp, 128 B mp).
    EXPECT_GE(r.peak_bytes, 3 * params + 4 + feeds + 256 * params / 384);
    // Without names the same bytes are all "variables".
    o.trainable = nullptr;
    ASSERT_OK_AND_ASSIGN(MemoryReport all, ComputeMemory(p, o));
    EXPECT_EQ(all.bytes(MemoryCategory::kVariables), 3 * params + 4);
    EXPECT_EQ(all.peak_bytes, r.peak_bytes);
  }
}

absl::StatusOr<Graph> Chain() {
  // x[n=100] -> a = exp(x) -> b = exp(a) -> c = exp(b): 400 B each.
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"n", 100}}));
  TensorRef a = b.Exp(x, "a");
  TensorRef bb = b.Exp(a, "b");
  b.MarkOutput(b.Exp(bb, "c"));
  return b.Build();
}

TEST(MemoryModelTest, PeakFollowsFrees) {
  // a: 400 live; b: 800 (a is its input), a freed -> 400; c: 800, b freed. Two buffers at the
  // peak, not three: 400 (feed x) + 800 = 1200 B, first reached at op 'b'.
  ASSERT_OK_AND_ASSIGN(Graph g, Chain());
  ASSERT_OK_AND_ASSIGN(v1::Program p, LowerOn(g, "p:1", ""));
  const std::vector<std::string> fetch_c = {"c"};
  MemoryOptions o;
  o.fetches = &fetch_c;
  ASSERT_OK_AND_ASSIGN(MemoryReport r, ComputeMemory(p, o));
  EXPECT_EQ(r.peak_bytes, 1200);
  EXPECT_EQ(r.peak_op, "b");
  EXPECT_EQ(r.bytes(MemoryCategory::kFeeds), 400);
  EXPECT_EQ(r.bytes(MemoryCategory::kActivations), 800);
  EXPECT_EQ(r.running_instructions, 3);
  // Fetching a as well keeps it to the end of the step: a, b and c are all live at c.
  const std::vector<std::string> fetch_ac = {"a", "c"};
  o.fetches = &fetch_ac;
  ASSERT_OK_AND_ASSIGN(MemoryReport pinned, ComputeMemory(p, o));
  EXPECT_EQ(pinned.peak_bytes, 1600);
  EXPECT_EQ(pinned.peak_op, "c");
  EXPECT_EQ(pinned.bytes(MemoryCategory::kFetches), 800);      // a and c
  EXPECT_EQ(pinned.bytes(MemoryCategory::kActivations), 400);  // b
  // Fetching only a prunes b and c.
  const std::vector<std::string> fetch_a = {"a"};
  o.fetches = &fetch_a;
  ASSERT_OK_AND_ASSIGN(MemoryReport pruned, ComputeMemory(p, o));
  EXPECT_EQ(pruned.peak_bytes, 800);
  EXPECT_EQ(pruned.running_instructions, 1);
}

TEST(MemoryModelTest, ExplainMemoryListsCategoriesPeakAndTop) {
  ASSERT_OK_AND_ASSIGN(MemoryReport r, MlpForward("batch:p"));
  const std::string text = ExplainMemory(r);
  EXPECT_NE(text.find("memory per worker"), std::string::npos) << text;
  EXPECT_NE(text.find("variables"), std::string::npos) << text;
  EXPECT_NE(text.find("384 B"), std::string::npos) << text;
  EXPECT_NE(text.find("peak"), std::string::npos) << text;
  EXPECT_NE(text.find("960 B"), std::string::npos) << text;
  EXPECT_NE(text.find("of op 'h'"), std::string::npos) << text;
  EXPECT_NE(text.find("h0"), std::string::npos) << text;
  EXPECT_EQ(text.find("fetched outputs"), std::string::npos) << text;  // zero: not listed
}

TEST(MemoryModelTest, MalformedProgramIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(Graph g, Chain());
  ASSERT_OK_AND_ASSIGN(v1::Program p, LowerOn(g, "p:1", ""));
  p.mutable_instructions(1)->set_output(99);
  EXPECT_TRUE(StatusIs(ComputeMemory(p).status(), absl::StatusCode::kInvalidArgument,
                       {"instruction 1", "op 'b'", "buffer 99"}));
}

TEST(MemoryModelTest, SuggestsARuleThatFits) {
  // Replicated MLP forward: 384 (w1 + w2) + 128 (x) + 1024 (h0 + h, [8,16] each) = 1536 B. Under
  // a limit of 1000 B both batch:p (960 B, above) and hidden:p (832 B) fit; the smaller wins.
  Mlp m;
  m.b.MarkOutput(m.y);
  ASSERT_OK_AND_ASSIGN(Graph g, m.b.Build());
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("p:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules none, LayoutRules::Parse("", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program p, Lower(g, mesh, none));
  const std::vector<std::string> fetches = {"y"};
  MemoryOptions o;
  o.fetches = &fetches;
  ASSERT_OK_AND_ASSIGN(MemoryReport r, ComputeMemory(p, o));
  EXPECT_EQ(r.peak_bytes, 1536);
  int64_t peak = 0;
  EXPECT_EQ(SuggestFittingLayout(g, mesh, none, r, p, 1000, o, 20, &peak), "hidden:p");
  EXPECT_EQ(peak, 832);
  // Nothing that adds one rule fits in 500 B.
  EXPECT_EQ(SuggestFittingLayout(g, mesh, none, r, p, 500, o, 20, &peak), "");
  EXPECT_EQ(peak, 0);
  // The cap on re-lowerings holds: with none allowed nothing is tried.
  EXPECT_EQ(SuggestFittingLayout(g, mesh, none, r, p, 1000, o, 0, &peak), "");
}

TEST(MemoryModelTest, GradientsAreTheBackwardPassFromItsSeed) {
  // loss = sum(exp(x * w)), x a feed and w a variable [n=100] (400 B each), sgd. The step (fetch
  // loss) runs, in order (buffer bytes; "+" allocated, "-" freed after its last reader):
  //   0 a = x*w      +400                    live 400
  //   1 e = exp(a)   +400, -a                800 -> 400
  //   2 loss         +4 (fetched)            404
  //   3 loss/grad/ones     +4 (the seed)     408
  //   4 loss/grad/einsum   +400 (seed broadcast), -the seed     808 -> 804
  //   5 e/grad/mul = de    +400, -the broadcast, -e            1204 = the peak -> 404
  //   7 a/grad/mul_1 = dw  +400, -de ...     804  (then the sgd update: less)
  // Peak 1204 + w 400 + global_step 4 + x 400 = 2008 B at op 'e/grad/mul' (gradient ops are
  // named after the op they differentiate): loss 4 (fetched), e 400 (activation), the broadcast
  // seed + de 800 (gradients).
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"n", 100}}));
  TensorRef w = b.Variable("w", Shape({{"n", 100}}));
  TensorRef loss = b.ReduceSum(b.Exp(b.Mul(x, w, "a"), "e"), {}, "loss");
  TrainOptions opt;
  opt.learning_rate.base = 0.1f;
  ASSERT_OK(Minimize(b, loss, {w}, opt).status());
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(v1::Program p, LowerOn(g, "p:1", ""));
  const std::vector<std::string> fetches = {"loss"};
  MemoryOptions o;
  o.fetches = &fetches;
  ASSERT_OK_AND_ASSIGN(MemoryReport r, ComputeMemory(p, o));
  EXPECT_EQ(r.backward_from, 3);
  EXPECT_EQ(r.peak_bytes, 2008);
  EXPECT_EQ(r.peak_op, "e/grad/mul");
  EXPECT_EQ(r.bytes(MemoryCategory::kVariables), 404);
  EXPECT_EQ(r.bytes(MemoryCategory::kFeeds), 400);
  EXPECT_EQ(r.bytes(MemoryCategory::kFetches), 4);
  EXPECT_EQ(r.bytes(MemoryCategory::kActivations), 400);
  EXPECT_EQ(r.bytes(MemoryCategory::kGradients), 800);
  EXPECT_EQ(r.bytes(MemoryCategory::kUpdates), 0);  // both updates come after the peak
}

TEST(MemoryModelTest, ParseByteSize) {
  EXPECT_EQ(*ParseByteSize("8G", "memory_limit"), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("512M", "memory_limit"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1.5K", "memory_limit"), 1536);
  EXPECT_EQ(*ParseByteSize("4096", "memory_limit"), 4096);
  EXPECT_EQ(*ParseByteSize("2GiB", "memory_limit"), int64_t{2} << 30);
  for (const char* bad : {"", "G", "8X", "1.2.3M", "-1", "99999999999T"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(StatusIs(ParseByteSize(bad, "memory_limit").status(),
                         absl::StatusCode::kInvalidArgument,
                         {"--memory_limit", std::string("'") + bad + "'", "e.g. 8G"}));
  }
}

}  // namespace
}  // namespace meshrt
