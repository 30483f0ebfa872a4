// Lazy partial sums (core/lowering/lower_partial.cc): the collectives a step emits, that every graph tensor
// stays fetchable and equal to the reference interpreter on several meshes and layouts, and that a
// step pruned to its fetches runs exactly the collectives `explain` counts for it.
#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/random_feeds.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/planning/explain.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/test_util.h"
#include "models/train.h"
#include "models/transformer.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

v1::Program LowerOrDie(const Graph& g, const std::string& mesh, const std::string& layout) {
  Mesh m = Mesh::Parse(mesh).value();
  absl::StatusOr<v1::Program> p = Lower(g, m, LayoutRules::Parse(layout, m).value());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : v1::Program();
}

// "allreduce(m) by OP [slice]" for each collective a step fetching `fetches` runs (null: the
// default step of core/planning/explain.h).
std::vector<std::string> StepCollectives(const v1::Program& p,
                                         const std::vector<std::string>* fetches = nullptr) {
  const std::vector<bool> runs = StepInstructions(p, fetches);
  std::vector<std::string> out;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const v1::Instruction& inst = p.instructions(i);
    if (!runs[i] || !inst.has_collective()) continue;
    std::string axes;
    for (int a : inst.collective().mesh_axes()) {
      absl::StrAppend(&axes, axes.empty() ? "" : ",", p.mesh().dims(a).name());
    }
    std::string kind = v1::Collective::Kind_Name(inst.collective().kind());
    std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
    out.push_back(absl::StrCat(kind, "(", axes, ") by ", inst.source_op(), " ",
                               Shape::FromProto(inst.slice_shape()).value().ToString()));
  }
  return out;
}

bool OnFetch(const v1::Program& p, const std::string& name) {
  for (const v1::ProgramTensor& t : p.outputs()) {
    if (t.name() == name) return t.resolved_on_fetch();
  }
  ADD_FAILURE() << "no output " << name;
  return false;
}

// Every graph tensor, run on the simulated mesh (every output fetched), equals the interpreter's.
void ExpectMatchesInterpreter(const Graph& g, const std::string& mesh, const std::string& layout) {
  SCOPED_TRACE(absl::StrCat("mesh ", mesh, " layout '", layout, "'"));
  const v1::Program program = LowerOrDie(g, mesh, layout);
  const TensorMap feeds = RandomFeeds(g, 11);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  SimulatedMeshOptions options;
  options.kernels = &CpuKernels();
  ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
  for (const auto& [name, value] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_LE(MaxRelativeError(got.at(name), value), 1e-5) << "tensor " << name;
  }
}

// a[batch,k]·wa[k,h] and c[batch,k]·wc[k,h], both reducing k; then `combine` and a relu.
struct TwoProducts {
  GraphBuilder b;
  TensorRef pa, pc;
  TwoProducts() {
    TensorRef a = b.Placeholder("a", Shape({{"batch", 8}, {"k", 16}}));
    TensorRef wa = b.Placeholder("wa", Shape({{"k", 16}, {"h", 12}}));
    TensorRef c = b.Placeholder("c", Shape({{"batch", 8}, {"k", 16}}));
    TensorRef wc = b.Placeholder("wc", Shape({{"k", 16}, {"h", 12}}));
    pa = b.Einsum({a, wa}, Shape({{"batch", 8}, {"h", 12}}), "pa");
    pc = b.Einsum({c, wc}, Shape({{"batch", 8}, {"h", 12}}), "pc");
  }
  Graph Build() { return b.Build().value(); }
};

TEST(LazyPartialSumsTest, AddOfTwoEinsumsOverASplitReducedDimIsOneAllreduce) {
  TwoProducts t;
  t.b.Relu(t.b.Add(t.pa, t.pc, "sum"), "out");
  const Graph g = t.Build();
  const v1::Program p = LowerOrDie(g, "m:4", "k:m");
  EXPECT_EQ(StepCollectives(p), (std::vector<std::string>{"allreduce(m) by sum [batch:8, h:12]"}));
  // The einsums stay fetchable: their resolves run only when they are fetched.
  EXPECT_TRUE(OnFetch(p, "pa"));
  EXPECT_TRUE(OnFetch(p, "pc"));
  EXPECT_FALSE(OnFetch(p, "sum"));
  const std::vector<std::string> fetch_pa = {"pa"};
  EXPECT_EQ(StepCollectives(p, &fetch_pa),
            (std::vector<std::string>{"allreduce(m) by pa [batch:8, h:12]"}));
  for (const auto& [mesh, layout] :
       std::vector<std::pair<std::string, std::string>>{{"m:4", "k:m"},
                                                        {"rows:2,cols:2", "k:rows,batch:cols"},
                                                        {"rows:2,cols:2", "batch:rows,k:cols"},
                                                        {"rows:2,cols:2", "k:rows,h:cols"},
                                                        {"x:2,y:2,z:2", "k:x,batch:y,h:z"}}) {
    ExpectMatchesInterpreter(g, mesh, layout);
  }
}

TEST(LazyPartialSumsTest, ScaleNegSubAndRenameStayPartial) {
  TwoProducts t;
  TensorRef scaled = t.b.Scale(t.pa, 0.5f, "scaled");
  TensorRef diff = t.b.Sub(scaled, t.b.Neg(t.pc, "negated"), "diff");
  TensorRef renamed = t.b.RenameDim(diff, "h", "h2", "renamed");
  t.b.Exp(t.b.ReduceSum(renamed, {"h2"}, "row_sums"), "out");
  const Graph g = t.Build();
  // One allreduce, of the smallest tensor on the chain: reduce_sum over a whole dim is linear.
  EXPECT_EQ(StepCollectives(LowerOrDie(g, "m:4", "k:m")),
            (std::vector<std::string>{"allreduce(m) by row_sums [batch:8]"}));
  ExpectMatchesInterpreter(g, "m:4", "k:m");
  ExpectMatchesInterpreter(g, "rows:2,cols:2", "k:rows,batch:cols");
  ExpectMatchesInterpreter(g, "rows:2,cols:2", "k:rows,h2:cols");
}

TEST(LazyPartialSumsTest, ReduceSumOverASplitDimAddsItsAxis) {
  // Partial over cols (k) and then over rows (batch, reduced while partial): one allreduce over
  // both axes.
  TwoProducts t;
  t.b.Exp(t.b.ReduceSum(t.b.Add(t.pa, t.pc, "sum"), {"batch"}, "col_sums"), "out");
  const Graph g = t.Build();
  EXPECT_EQ(StepCollectives(LowerOrDie(g, "rows:2,cols:2", "batch:rows,k:cols")),
            (std::vector<std::string>{"allreduce(rows,cols) by col_sums [h:12]"}));
  ExpectMatchesInterpreter(g, "rows:2,cols:2", "batch:rows,k:cols");
}

TEST(LazyPartialSumsTest, ConsumerSplittingTheDimGetsAReduceScatter) {
  // k and h both on m: the einsums a[batch,k]·w[h] keep m on k (gathering the small w is
  // cheaper than gathering a), so their partial sums hold h whole and the rules split it: the sum
  // is resolved once, by a reduce-scatter onto h.
  GraphBuilder b;
  TensorRef a = b.Placeholder("a", Shape({{"batch", 64}, {"k", 16}}));
  TensorRef wa = b.Placeholder("wa", Shape({{"h", 4}}));
  TensorRef c = b.Placeholder("c", Shape({{"batch", 64}, {"k", 16}}));
  TensorRef wc = b.Placeholder("wc", Shape({{"h", 4}}));
  TensorRef pa = b.Einsum({a, wa}, Shape({{"batch", 64}, {"h", 4}}), "pa");
  TensorRef pc = b.Einsum({c, wc}, Shape({{"batch", 64}, {"h", 4}}), "pc");
  b.Relu(b.Add(pa, pc, "sum"), "out");
  const Graph g = b.Build().value();
  EXPECT_EQ(StepCollectives(LowerOrDie(g, "m:2", "k:m,h:m")),
            (std::vector<std::string>{"allgather(m) by pa [h:4]", "allgather(m) by pc [h:4]",
                                      "reduce_scatter(m) by sum [batch:64, h:2]"}));
  ExpectMatchesInterpreter(g, "m:2", "k:m,h:m");
  ExpectMatchesInterpreter(g, "rows:2,cols:2", "k:cols,h:cols,batch:rows");
}

TEST(LazyPartialSumsTest, MixedOrVaryingOperandsResolveFirst) {
  // add(partial, not partial) resolves the partial sum (once), then adds.
  {
    TwoProducts t;
    TensorRef x = t.b.Placeholder("x", Shape({{"batch", 8}, {"h", 12}}));
    t.b.Relu(t.b.Add(t.pa, x, "mixed"), "out");
    t.b.Relu(t.pc, "out_c");
    const Graph g = t.Build();
    const v1::Program p = LowerOrDie(g, "m:4", "k:m");
    EXPECT_EQ(StepCollectives(p), (std::vector<std::string>{"allreduce(m) by pa [batch:8, h:12]",
                                                            "allreduce(m) by pc [batch:8, h:12]"}));
    EXPECT_FALSE(OnFetch(p, "pa"));  // a consumer needs its value: the same resolve serves both
    ExpectMatchesInterpreter(g, "m:4", "k:m");
  }
  // A factor split over the partial axis differs across the processors summed: mul resolves
  // first (here by the reduce-scatter the rule layout asks for).
  {
    GraphBuilder b;
    TensorRef a = b.Placeholder("a", Shape({{"batch", 64}, {"k", 16}}));
    TensorRef w = b.Placeholder("w", Shape({{"h", 4}}));
    TensorRef f = b.Placeholder("f", Shape({{"h", 4}}));
    TensorRef pa = b.Einsum({a, w}, Shape({{"batch", 64}, {"h", 4}}), "pa");
    b.Relu(b.Mul(pa, f, "scaled"), "out");
    const Graph g = b.Build().value();
    const v1::Program p = LowerOrDie(g, "m:2", "k:m,h:m");
    EXPECT_EQ(StepCollectives(p),
              (std::vector<std::string>{"allgather(m) by pa [h:4]",
                                        "reduce_scatter(m) by pa [batch:64, h:2]"}));
    EXPECT_FALSE(OnFetch(p, "pa"));
    ExpectMatchesInterpreter(g, "m:2", "k:m,h:m");
  }
  // Two readers: resolved once, shared; the scale reads the resolved value.
  {
    TwoProducts t;
    t.b.Relu(t.pa, "out");
    t.b.Exp(t.b.Scale(t.pa, 2.0f, "twice"), "out2");
    const Graph g = t.Build();
    const std::vector<std::string> fetches = {"out", "out2"};
    EXPECT_EQ(StepCollectives(LowerOrDie(g, "m:4", "k:m"), &fetches),
              (std::vector<std::string>{"allreduce(m) by pa [batch:8, h:12]"}));
    ExpectMatchesInterpreter(g, "m:4", "k:m");
  }
}

TEST(LazyPartialSumsTest, GrowingTheTensorResolvesFirst) {
  // mul(partial [batch], x [batch, h]) would make the later resolve move h times more bytes.
  GraphBuilder b;
  TensorRef a = b.Placeholder("a", Shape({{"batch", 8}, {"k", 16}}));
  TensorRef v = b.Placeholder("v", Shape({{"k", 16}}));
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"h", 12}}));
  TensorRef pa = b.Einsum({a, v}, Shape({{"batch", 8}}), "pa");
  b.Relu(b.Mul(pa, x, "outer"), "out");
  const Graph g = b.Build().value();
  EXPECT_EQ(StepCollectives(LowerOrDie(g, "m:4", "k:m")),
            (std::vector<std::string>{"allreduce(m) by pa [batch:8]"}));
  ExpectMatchesInterpreter(g, "m:4", "k:m");
}

TEST(LazyPartialSumsTest, ExplainCountsOnFetchResolvesApart) {
  TwoProducts t;
  t.b.Relu(t.b.Add(t.pa, t.pc, "sum"), "out");
  const v1::Program p = LowerOrDie(t.Build(), "m:4", "k:m");
  const std::string text = ExplainProgram(p);
  const int64_t one = 2 * 3 * 8 * 12 * 4 / 4;  // an allreduce of [8, 12] floats on 4
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("total: 1 communication step(s), ", one, " bytes sent per worker")))
      << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("on fetch: 2 more step(s), ", 2 * one))) << text;
  EXPECT_TRUE(absl::StrContains(text, "(on fetch)")) << text;
  EXPECT_EQ(SentBytesPerStep(p), one);
  const std::vector<std::string> all = {"pa", "pc", "sum"};
  EXPECT_EQ(SentBytesPerStep(p, &all), 3 * one);
}

// ---- the Transformer ----------------------------------------------------------------------------

models::TransformerOptions Tiny() {
  models::TransformerOptions o = models::TinyTransformerOptions();
  o.layers = 2;
  return o;
}

TrainOptions Sgd() { return models::Sgd(0.1f); }

TEST(LazyPartialSumsTest, TransformerMpMakesOneAttentionInputGradientAllreducePerLayer) {
  const models::TransformerOptions o = Tiny();
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, models::BuildTransformerTrainGraph(o, Sgd()));
  const v1::Program p = LowerOrDie(t.graph, "rows:2,cols:2", "heads:cols,d_ff:cols,vocab:cols");
  const std::vector<std::string> fetches = {t.loss};
  // Allreduces of whole activations [batch, length|memory, d_model] over cols in the step: per
  // layer the forward's attention and FFN outputs and the backward's FFN and attention input
  // gradients (q, k and v summed before one allreduce), plus the embedding and the logits'
  // input gradient. Without lazy sums the attention input gradient was three.
  const std::string slice =
      absl::StrCat("[batch:", o.batch, ", length:", o.length, ", d_model:", o.d_model, "]");
  const std::string memory_slice =
      absl::StrCat("[batch:", o.batch, ", memory:", o.length, ", d_model:", o.d_model, "]");
  int activations = 0;
  for (const std::string& c : StepCollectives(p, &fetches)) {
    EXPECT_FALSE(absl::StrContains(c, memory_slice)) << c << ": k or v's own gradient resolved";
    if (absl::StartsWith(c, "allreduce(cols)") && absl::EndsWith(c, slice)) ++activations;
  }
  EXPECT_EQ(activations, 4 * o.layers + 2);
}

// Wraps a communicator and counts the elements it allreduces or reduce-scatters.
class CountingCommunicator : public ForwardingCommunicator {
 public:
  explicit CountingCommunicator(Communicator* inner)
      : ForwardingCommunicator(inner), mesh_(inner->mesh()) {}
  absl::Status AllReduce(const std::vector<int>& axes, v1::ReduceOp op, DType dtype, void* data,
                         int64_t count) override {
    reduced += count;
    return ForwardingCommunicator::AllReduce(axes, op, dtype, data, count);
  }
  absl::Status ReduceScatter(const std::vector<int>& axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override {
    reduced += count_per_rank * mesh_.GroupSize(axes);
    return ForwardingCommunicator::ReduceScatter(axes, op, dtype, in, count_per_rank, out);
  }

  std::atomic<int64_t> reduced{0};

 private:
  const Mesh& mesh_;
};

TEST(LazyPartialSumsTest, APrunedTrainingStepRunsNoResolveOnFetch) {
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, models::BuildTransformerTrainGraph(Tiny(), Sgd()));
  const v1::Program p = LowerOrDie(t.graph, "rows:2,cols:2", "heads:cols,d_ff:cols,vocab:cols");
  const std::vector<std::string> fetches = {t.loss};
  // Elements the step's allreduces and reduce-scatters reduce, by explain's account.
  const std::vector<bool> runs = StepInstructions(p, &fetches);
  int64_t want = 0, everything = 0;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const v1::Instruction& inst = p.instructions(i);
    if (!inst.has_collective()) continue;
    const auto kind = inst.collective().kind();
    if (kind != v1::Collective::ALLREDUCE && kind != v1::Collective::REDUCE_SCATTER) continue;
    int64_t n = Shape::FromProto(inst.slice_shape()).value().num_elements();
    if (kind == v1::Collective::REDUCE_SCATTER) n *= 2;  // the group is cols (2)
    everything += n;
    if (runs[i]) want += n;
  }
  ASSERT_LT(want, everything);  // some resolves are on fetch only

  const Mesh mesh = Mesh::FromProto(p.mesh()).value();
  LocalCollectiveHub hub(mesh);
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int r = 0; r < mesh.num_processors(); ++r) {
    comms.push_back(std::make_unique<CountingCommunicator>(hub.communicator(r)));
    executors.push_back(
        std::make_unique<Executor>(p, mesh.Coordinate(r), &CpuKernels(), comms.back().get()));
  }
  std::vector<absl::Status> status(mesh.num_processors());
  std::vector<std::thread> threads;
  for (int r = 0; r < mesh.num_processors(); ++r) {
    threads.emplace_back([&, r] { status[r] = executors[r]->Run({}, fetches); });
  }
  for (std::thread& th : threads) th.join();
  for (int r = 0; r < mesh.num_processors(); ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(comms[r]->reduced.load(), want) << "processor " << r;
  }
}

}  // namespace
}  // namespace meshrt
