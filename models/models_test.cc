// The models (models/mlp.h, models/transformer.h) and their training graphs (models/train.h):
// training steps match the single-process interpreter under the paper's layouts, losses go down,
// the lowerings hold the collectives the layouts imply, and the greedy sampler agrees with the
// training graph's logits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/ir/limits.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/training_spec.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/mlp.h"
#include "models/test_util.h"
#include "models/train.h"
#include "models/transformer.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace models {
namespace {

constexpr int kSteps = 20;

// A few kilobytes of English-like text (deterministic), written once to the test's temp dir.
const std::string& TextFile() {
  static const std::string* path = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    auto* p = new std::string(absl::StrCat(dir ? dir : "/tmp", "/models_test_text.txt"));
    const char* words[] = {"the",   "mesh", "of",    "processors", "splits", "every", "tensor",
                           "along", "its",  "batch", "and",        "heads",  "a",     "layout",
                           "rule",  "maps", "names", "to",         "axes",   "while", "data"};
    std::string text;
    uint32_t state = 12345;
    while (text.size() < 24000) {
      state = state * 1664525u + 1013904223u;
      text += words[(state >> 16) % (sizeof(words) / sizeof(words[0]))];
      text += ((state >> 8) % 9 == 0) ? ".\n" : " ";
    }
    std::ofstream(*p, std::ios::binary) << text;
    return p;
  }();
  return *path;
}

TransformerOptions TinyTransformer() {
  TransformerOptions o = TinyTransformerOptions();
  o.data_path = TextFile();
  return o;
}

MlpOptions TinyMlp() {
  MlpOptions o;
  o.batch = 8;
  o.d_model = 16;
  o.d_ff = 32;
  o.seed = 3;
  o.biases = true;
  return o;
}

std::vector<float> InterpreterLosses(const TrainGraph& t, int steps, TensorMap* state) {
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    auto out = InterpretStep(t.graph, {}, {t.loss}, state);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return losses;
    losses.push_back(out->at(t.loss).f32()[0]);
  }
  return losses;
}

std::vector<float> MeshLosses(const TrainGraph& t, const std::string& mesh_text,
                              const std::string& rules_text, int steps,
                              std::map<std::string, Tensor>* variables = nullptr) {
  std::vector<float> losses;
  auto mesh = Mesh::Parse(mesh_text);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  auto rules = LayoutRules::Parse(rules_text, *mesh);
  EXPECT_TRUE(rules.ok()) << rules.status();
  auto program = Lower(t.graph, *mesh, *rules);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return losses;
  auto sim = SimulatedMesh::Create(*program, {&CpuKernels()});
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return losses;
  for (int s = 0; s < steps; ++s) {
    auto out = (*sim)->Step({}, {t.loss});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return losses;
    losses.push_back(out->at(t.loss).f32()[0]);
  }
  if (variables != nullptr) {
    auto vars = (*sim)->Variables();
    EXPECT_TRUE(vars.ok()) << vars.status();
    if (vars.ok()) *variables = *vars;
  }
  return losses;
}

void ExpectSameLosses(const std::vector<float>& got, const std::vector<float>& want,
                      double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_LE(std::abs(got[s] - want[s]), tolerance * std::abs(want[s]))
        << "step " << s << ": " << got[s] << " vs " << want[s];
  }
}

double Mean(const std::vector<float>& v, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  return s / (end - begin);
}

struct Layout {
  std::string mesh, rules;
};
const Layout kDp{"rows:2,cols:2", "batch:rows"};
const Layout kMp{"rows:2,cols:2", "heads:cols,d_ff:cols,vocab:cols"};
const Layout kDpMp{"rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"};

// (a) 20 SGD steps of a tiny Transformer on text: the same losses on one process and under DP,
// MP and DP x MP, and the loss goes down.
TEST(TransformerTest, TrainingIsLayoutInvariantAndLearns) {
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(TinyTransformer(), Sgd(0.1f)));
  TensorMap state;
  const std::vector<float> want = InterpreterLosses(t, kSteps, &state);
  ASSERT_EQ(want.size(), kSteps);
  std::printf("transformer losses: %s\n", absl::StrJoin(want, " ").c_str());
  EXPECT_LT(Mean(want, kSteps - 5, kSteps), Mean(want, 0, 5) - 0.5)
      << "losses " << absl::StrJoin(want, " ");
  EXPECT_EQ(state.at(kDataStep).f32()[0], kSteps);
  for (const Layout& l : {Layout{"x:1", ""}, kDp, kMp, kDpMp}) {
    SCOPED_TRACE(l.mesh + " " + l.rules);
    std::map<std::string, Tensor> vars;
    ExpectSameLosses(MeshLosses(t, l.mesh, l.rules, kSteps, &vars), want, 1e-4);
    ASSERT_EQ(vars.count("output"), 1);
    EXPECT_LE(MaxRelativeError(vars.at("output"), state.at("output")), 1e-3);
    EXPECT_EQ(vars.at(kDataStep).f32()[0], kSteps);
  }
}

TEST(TransformerTest, RmsNormAndSyntheticDataTrainOnDpMp) {
  TransformerOptions o = TinyTransformer();
  o.norm = "rms";
  o.data_path = "";
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(o, Sgd(0.1f)));
  EXPECT_EQ(VariableNames(t.graph).size(), t.variables.size());
  for (const std::string& v : t.trainable) EXPECT_EQ(v.find("bias"), std::string::npos) << v;
  TensorMap state;
  const std::vector<float> want = InterpreterLosses(t, 3, &state);
  ExpectSameLosses(MeshLosses(t, kDpMp.mesh, kDpMp.rules, 3), want, 1e-4);
  // Random bytes: the loss starts near log(256) or above.
  EXPECT_GT(want[0], 0.9 * std::log(256.0));
}

// Adam's slots live under the same layouts as their variables.
TEST(TransformerTest, AdamTrainingIsLayoutInvariant) {
  TrainOptions adam;
  adam.optimizer = "adam";
  adam.learning_rate.base = 1e-2f;
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(TinyTransformer(), adam));
  TensorMap state;
  const std::vector<float> want = InterpreterLosses(t, 8, &state);
  EXPECT_LT(want.back(), want.front());
  ExpectSameLosses(MeshLosses(t, kDpMp.mesh, kDpMp.rules, 8), want, 1e-4);
}

// (b) MLP regression: the loss goes down, the same on two layouts.
TEST(MlpTest, RegressionLearnsAndIsLayoutInvariant) {
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildMlpTrainGraph(TinyMlp(), Sgd(0.2f)));
  TensorMap state;
  const std::vector<float> want = InterpreterLosses(t, kSteps, &state);
  ASSERT_EQ(want.size(), kSteps);
  std::printf("mlp losses: %s\n", absl::StrJoin(want, " ").c_str());
  EXPECT_LT(Mean(want, kSteps - 5, kSteps), 0.8 * Mean(want, 0, 5))
      << "losses " << absl::StrJoin(want, " ");
  for (const Layout& l :
       {Layout{"rows:2,cols:2", "batch:rows,d_ff:cols"}, Layout{"x:4", "d_ff:x"}}) {
    SCOPED_TRACE(l.mesh + " " + l.rules);
    ExpectSameLosses(MeshLosses(t, l.mesh, l.rules, kSteps), want, 1e-4);
  }
}

TEST(MlpTest, FedDataHasPlaceholdersAndNoDataStep) {
  MlpOptions o = TinyMlp();
  o.feed_data = true;
  GraphBuilder b;
  ASSERT_OK_AND_ASSIGN(ModelOutputs m, BuildMlp(b, o));
  EXPECT_TRUE(m.data_step.name.empty());
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  EXPECT_EQ(g.Placeholders(), (std::vector<std::string>{"x", "target"}));
}

TEST(MlpTest, FixedDataIsTheSameBatchEveryStepAndLearns) {
  MlpOptions o = TinyMlp();
  o.fixed_data = true;
  TrainOptions train;
  train.optimizer = "sgd";
  train.learning_rate.base = 0.1f;
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildMlpTrainGraph(o, train));
  TensorMap state;
  std::vector<float> losses;
  Tensor first_x;
  for (int s = 0; s < 5; ++s) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, InterpretStep(t.graph, {}, {t.loss, "x"}, &state));
    losses.push_back(out.at(t.loss).f32()[0]);
    if (s == 0) first_x = out.at("x");
    EXPECT_EQ(MaxRelativeError(out.at("x"), first_x), 0) << "step " << s;
  }
  EXPECT_LT(losses.back(), losses.front());
  // x and target are not trained.
  EXPECT_EQ(std::count(t.trainable.begin(), t.trainable.end(), "x"), 0);
}

// (c) The collectives the paper's layouts imply.
bool HasAllReduce(const v1::Program& p, int mesh_axis, const std::string& source_op) {
  for (const v1::Instruction& in : p.instructions()) {
    if (in.has_collective() && in.collective().kind() == v1::Collective::ALLREDUCE &&
        in.source_op() == source_op && in.collective().mesh_axes_size() == 1 &&
        in.collective().mesh_axes(0) == mesh_axis) {
      return true;
    }
  }
  return false;
}

// An allreduce over `mesh_axis` of a whole tensor of shape `shape` (e.g. a weight's gradient).
bool HasAllReduceOfShape(const v1::Program& p, int mesh_axis, const Shape& shape) {
  for (const v1::Instruction& in : p.instructions()) {
    if (!in.has_collective() || in.collective().kind() != v1::Collective::ALLREDUCE) continue;
    const auto& axes = in.collective().mesh_axes();
    if (std::find(axes.begin(), axes.end(), mesh_axis) == axes.end()) continue;
    auto s = Shape::FromProto(in.slice_shape());
    if (s.ok() && *s == shape) return true;
  }
  return false;
}

absl::StatusOr<v1::Program> LowerLayout(const Graph& g, const Layout& l) {
  auto mesh = Mesh::Parse(l.mesh);
  if (!mesh.ok()) return mesh.status();
  auto rules = LayoutRules::Parse(l.rules, *mesh);
  if (!rules.ok()) return rules.status();
  return Lower(g, *mesh, *rules);
}

// Training as a request (core/train/training_spec.h): the model's graph before training plus its spec,
// trained by the coordinator's AddTraining, is the training graph the client builds, op for op —
// with a kept input gradient, Adam's hyper-parameters, clipping, microbatches and a schedule.
TEST(TrainGraphTest, TheRequestsSpecMakesTheSameGraphOnTheCoordinator) {
  MlpOptions mlp;
  mlp.batch = 8;
  mlp.d_model = 8;
  mlp.d_ff = 16;
  mlp.biases = true;
  mlp.fixed_data = true;
  mlp.input_gradient = true;
  TrainOptions sgd;
  sgd.learning_rate.base = 0.1f;
  TransformerOptions tf;
  tf.batch = 2;
  tf.length = 8;
  tf.d_model = 8;
  tf.heads = 2;
  tf.d_kv = 4;
  tf.d_ff = 16;
  tf.layers = 1;
  tf.vocab = 16;
  TrainOptions adam;
  adam.optimizer = "adam";
  adam.learning_rate = {"rsqrt_decay", 0.02f, 10};
  adam.beta2 = 0.98f;
  adam.clip_global_norm = 1.0f;
  adam.microbatches = 2;
  std::vector<TrainGraph> graphs;
  graphs.push_back(BuildMlpTrainGraph(mlp, sgd).value());
  graphs.push_back(BuildTransformerTrainGraph(tf, adam).value());
  for (const TrainGraph& t : graphs) {
    ASSERT_OK_AND_ASSIGN(const Graph forward, Graph::Build(t.forward));
    ASSERT_OK_AND_ASSIGN(const TrainedGraph trained, AddTraining(forward, t.spec));
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(t.graph.proto(), trained.graph.proto())) << diff;
    EXPECT_EQ(trained.outputs.loss(), t.loss);
    EXPECT_EQ(trained.outputs.learning_rate(), t.learning_rate);
    EXPECT_EQ(trained.outputs.global_step(), t.global_step);
  }
  EXPECT_EQ(graphs[0].spec.keep_gradients_size(), 1);
}

TEST(TransformerTest, LoweringsHoldThePaperLayoutsCollectives) {
  const TransformerOptions o = TinyTransformer();
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(o, Sgd(0.1f)));
  constexpr int kRows = 0, kCols = 1;
  const Shape w1({{"d_model", o.d_model}, {"d_ff", o.d_ff}});

  // MP: the attention output and the second FFN einsum reduce split heads / d_ff -> allreduce
  // over cols; weights are split, so no gradient allreduce over rows.
  ASSERT_OK_AND_ASSIGN(v1::Program mp, LowerLayout(t.graph, kMp));
  EXPECT_TRUE(HasAllReduce(mp, kCols, "layer_0/attention/output"));
  EXPECT_TRUE(HasAllReduce(mp, kCols, "layer_0/ffn/output"));
  EXPECT_FALSE(HasAllReduceOfShape(mp, kRows, w1));

  // DP: the forward pass never communicates; w1's gradient (reducing the split batch) is
  // allreduced over rows.
  ASSERT_OK_AND_ASSIGN(v1::Program dp, LowerLayout(t.graph, kDp));
  EXPECT_FALSE(HasAllReduce(dp, kCols, "layer_0/attention/output"));
  EXPECT_FALSE(HasAllReduce(dp, kRows, "layer_0/attention/output"));
  EXPECT_FALSE(HasAllReduce(dp, kRows, "layer_0/ffn/output"));
  EXPECT_TRUE(HasAllReduceOfShape(dp, kRows, w1));

  // DP x MP: both; w1's gradient slice is [d_model, d_ff / 2].
  ASSERT_OK_AND_ASSIGN(v1::Program dpmp, LowerLayout(t.graph, kDpMp));
  EXPECT_TRUE(HasAllReduce(dpmp, kCols, "layer_0/ffn/output"));
  EXPECT_TRUE(
      HasAllReduceOfShape(dpmp, kRows, Shape({{"d_model", o.d_model}, {"d_ff", o.d_ff / 2}})));
}

// (d) The sampler's argmax equals the training graph's logits' argmax for the same variables.
TEST(TransformerTest, SamplerMatchesTrainingLogits) {
  const TransformerOptions o = TinyTransformer();
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(o, Sgd(0.1f)));
  TensorMap state;
  ASSERT_OK(InterpretStep(t.graph, {}, {t.loss}, &state).status());  // trained a little
  const TensorMap before = state;
  ASSERT_OK_AND_ASSIGN(TensorMap out, InterpretStep(t.graph, {}, {t.output, "inputs"}, &state));
  const Tensor& logits = out.at(t.output);  // [batch, length, vocab] from `before`
  const Tensor& ids = out.at("inputs");

  GraphBuilder b;
  ASSERT_OK_AND_ASSIGN(SamplerOutputs s, BuildTransformerSampler(b, o));
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  TensorMap vars;
  for (const TensorRef& v : s.variables) {
    ASSERT_EQ(before.count(v.name), 1) << v.name;
    EXPECT_EQ(before.at(v.name).shape(), v.shape) << v.name;
    vars[v.name] = before.at(v.name);
  }
  EXPECT_EQ(s.variables.size(), t.trainable.size());
  const int64_t L = o.length, V = o.vocab;
  for (int64_t row : {0, 3}) {
    std::vector<int32_t> prompt(ids.ints().begin() + row * L, ids.ints().begin() + (row + 1) * L);
    for (int64_t pos : {0, 3, 7}) {
      SCOPED_TRACE(absl::StrCat("row ", row, " position ", pos));
      std::vector<int32_t> padded = prompt;
      for (int64_t i = pos + 1; i < L; ++i) padded[i] = 0;  // causal: later bytes do not matter
      TensorMap feeds{{"prompt", Tensor::Int(Shape({{"length", L}}), padded)},
                      {"position", Tensor::Int(Shape({}), {static_cast<int32_t>(pos)})}};
      TensorMap held = vars;
      ASSERT_OK_AND_ASSIGN(TensorMap got,
                           InterpretStep(g, feeds, {"next_token", "next_logits"}, &held));
      const float* want = logits.f32() + (row * L + pos) * V;
      int best = 0;
      for (int v = 1; v < V; ++v) {
        if (want[v] > want[best]) best = v;
      }
      EXPECT_EQ(got.at("next_token").i32()[0], best);
      double err = 0;
      for (int v = 0; v < V; ++v) {
        err = std::max<double>(err, std::abs(got.at("next_logits").f32()[v] - want[v]));
      }
      EXPECT_LE(err, 1e-4);
    }
  }
}

TEST(TransformerTest, OptionsAreChecked) {
  TransformerOptions o;
  EXPECT_EQ(o.batch % 4, 0);
  EXPECT_EQ(o.heads % 4, 0);
  EXPECT_EQ(o.d_ff % 4, 0);
  EXPECT_EQ(o.vocab % 4, 0);
  const TransformerOptions bench = BenchConfig();
  EXPECT_EQ(bench.batch, 32);
  EXPECT_EQ(bench.length, 128);
  EXPECT_EQ(bench.d_model, 256);
  EXPECT_EQ(bench.heads, 8);
  EXPECT_EQ(bench.d_ff, 1024);
  o.norm = "batch";
  GraphBuilder b;
  EXPECT_TRUE(
      StatusIs(BuildTransformer(b, o).status(), absl::StatusCode::kInvalidArgument, {"norm"}));
  o = TinyTransformer();
  o.heads = 0;
  EXPECT_TRUE(
      StatusIs(BuildTransformer(b, o).status(), absl::StatusCode::kInvalidArgument, {"heads"}));
}

// The peer's configuration builds, and has the peer's parameter count (1.74M, with LayerNorm
// gains and biases).
TEST(TransformerTest, BenchConfigHasThePeersParameterCount) {
  GraphBuilder b;
  ASSERT_OK_AND_ASSIGN(ModelOutputs m, BuildTransformer(b, BenchConfig()));
  int64_t n = 0;
  for (const TensorRef& v : m.variables) n += v.shape.num_elements();
  const int64_t D = 256, HK = 8 * 32, F = 1024, V = 256, L = 128;
  EXPECT_EQ(n, V * D + L * D + 2 * (4 * D + 3 * D * HK + HK * D + 2 * D * F) + 2 * D + D * V);
  ASSERT_OK(b.Build().status());
}

// Ops (counting while_loop bodies) and the longest op name of `graph`.
void CountOps(const v1::Graph& graph, int64_t* ops, int64_t* longest_name, int64_t* most_inputs) {
  for (const v1::Op& op : graph.ops()) {
    ++*ops;
    *longest_name = std::max<int64_t>(*longest_name, op.name().size());
    *most_inputs = std::max<int64_t>(*most_inputs, op.inputs_size());
    if (op.has_body()) CountOps(op.body(), ops, longest_name, most_inputs);
  }
}

// A 48-layer Transformer training graph with Adam passes the default RequestLimits (core/ir/limits.h)
// with room to spare; the defaults' documented figures are this test's output.
TEST(TransformerTest, Transformer48LayersPassesTheDefaultLimits) {
  TransformerOptions o;
  o.layers = 48;
  o.batch = 64;
  o.length = 512;
  o.d_model = 1024;
  o.heads = 16;
  o.d_kv = 64;
  o.d_ff = 4096;
  TrainOptions adam;
  adam.optimizer = "adam";
  adam.clip_global_norm = 1.0f;
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(o, adam));
  const v1::Graph& proto = t.graph.proto();
  int64_t ops = 0, longest_name = 0, most_inputs = 0;
  CountOps(proto, &ops, &longest_name, &most_inputs);
  int64_t largest = 0;
  for (const v1::Op& op : proto.ops()) {
    largest = std::max(largest, t.graph.type(op.name()).shape.num_elements());
  }
  const int64_t bytes = static_cast<int64_t>(proto.ByteSizeLong());
  std::printf(
      "48-layer Transformer + Adam: %lld ops, %lld bytes serialised, longest op name %lld, "
      "most inputs %lld, largest tensor %lld elements\n",
      static_cast<long long>(ops), static_cast<long long>(bytes),
      static_cast<long long>(longest_name), static_cast<long long>(most_inputs),
      static_cast<long long>(largest));
  const RequestLimits limits;
  // At least 10x headroom on the volume caps.
  EXPECT_LE(10 * ops, limits.max_ops);
  EXPECT_LE(10 * bytes, limits.max_graph_bytes);
  EXPECT_LE(10 * largest, limits.max_elements_per_tensor);
  EXPECT_LE(10 * longest_name, limits.max_name_length);
  ASSERT_OK(CheckGraphBytes(bytes, limits));
  ASSERT_OK(Graph::Build(proto, limits).status());
  // The defaults are not vacuous: a tenth of them refuses this graph.
  RequestLimits tight = limits;
  tight.max_ops = ops - 1;
  EXPECT_TRUE(StatusIs(Graph::Build(proto, tight).status(), absl::StatusCode::kResourceExhausted,
                       {"--max_ops"}));
}

}  // namespace
}  // namespace models
}  // namespace meshrt

namespace meshrt {
namespace models {
namespace {

// Manual: step times and losses of the default configuration on the fortunes text
// (bazel run //models:models_test -- --gtest_also_run_disabled_tests --gtest_filter='*Default*').
TEST(TransformerTest, DISABLED_DefaultConfigTrains) {
  TransformerOptions o;
  o.data_path = "/usr/share/games/fortunes/cookie";
  ASSERT_OK_AND_ASSIGN(TrainGraph t, BuildTransformerTrainGraph(o, Sgd(0.1f)));
  const int steps = std::atoi(std::getenv("STEPS") ? std::getenv("STEPS") : "30");
  std::map<std::string, Tensor> trained;
  for (const Layout& l : {kDpMp, Layout{"x:1", ""}}) {
    const absl::Time start = absl::Now();
    std::vector<float> losses = MeshLosses(t, l.mesh, l.rules, steps, &trained);
    std::printf("%s %s: %.1f ms/step; losses %s\n", l.mesh.c_str(), l.rules.c_str(),
                absl::ToDoubleMilliseconds(absl::Now() - start) / steps,
                absl::StrJoin(losses, " ").c_str());
  }
  // A greedy sample with the trained variables.
  GraphBuilder b;
  ASSERT_OK_AND_ASSIGN(SamplerOutputs s, BuildTransformerSampler(b, o));
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  TensorMap vars;
  for (const TensorRef& v : s.variables) vars[v.name] = trained.at(v.name);
  std::string text = "The ";
  std::vector<int32_t> prompt(o.length, 0);
  for (size_t i = 0; i < text.size(); ++i) prompt[i] = static_cast<unsigned char>(text[i]);
  for (int64_t pos = text.size() - 1; pos + 1 < o.length; ++pos) {
    TensorMap held = vars;
    ASSERT_OK_AND_ASSIGN(
        TensorMap out,
        InterpretStep(g,
                      {{"prompt", Tensor::Int(Shape({{"length", o.length}}), prompt)},
                       {"position", Tensor::Int(Shape({}), {static_cast<int32_t>(pos)})}},
                      {"next_token"}, &held, CpuKernels()));
    prompt[pos + 1] = out.at("next_token").i32()[0];
    text += static_cast<char>(prompt[pos + 1]);
  }
  std::printf("greedy sample: %s\n", text.c_str());
}

}  // namespace
}  // namespace models
}  // namespace meshrt
