// The Transformer on token-id data with a held-out split (models/transformer.h data_format,
// vocab, eval_fraction): the eval pass is the training forward pass again under "eval/" on the
// same variables; its loss is exactly the loss of a model trained on the held-out tokens alone
// (and the training loss that of the train tokens alone); it is computed only when fetched; the
// same on a mesh and through the coordinator's AddTraining; the options are checked.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/training_spec.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/test_util.h"
#include "models/train.h"
#include "models/transformer.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace models {
namespace {

constexpr int64_t kVocab = 300;

// A 1-D int32 .npy of `ids` (version 1.0, header padded to 64 bytes as NumPy pads).
std::string Npy(const std::vector<int32_t>& ids) {
  std::string dict =
      absl::StrCat("{'descr': '<i4', 'fortran_order': False, 'shape': (", ids.size(), ",), }");
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY\x01";
  out.push_back(0);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  out.append(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
  return out;
}

// 400 token ids in [0, 300) with some structure to learn: mostly id + 7 after id.
std::vector<int32_t> Tokens() {
  std::vector<int32_t> ids;
  uint32_t state = 99;
  int32_t id = 3;
  for (int i = 0; i < 400; ++i) {
    state = state * 1664525u + 1013904223u;
    id = (state >> 24) % 5 == 0 ? static_cast<int32_t>((state >> 8) % kVocab) : (id + 7) % kVocab;
    ids.push_back(id);
  }
  return ids;
}

TransformerOptions TokenTransformer(const std::string& path, float eval_fraction) {
  TransformerOptions o = TinyTransformerOptions();
  o.vocab = kVocab;
  o.data_path = path;
  o.data_format = "npy";
  o.eval_fraction = eval_fraction;
  return o;
}

// Fetches `names` in step 0 of a fresh run of `t` in the interpreter.
std::map<std::string, float> FirstStep(const TrainGraph& t, const std::vector<std::string>& names) {
  TensorMap state;
  absl::StatusOr<TensorMap> out = InterpretStep(t.graph, {}, names, &state, CpuKernels());
  EXPECT_TRUE(out.ok()) << out.status();
  std::map<std::string, float> got;
  if (!out.ok()) return got;
  for (const std::string& n : names) got[n] = out->at(n).f32()[0];
  return got;
}

TEST(TransformerTokensTest, EvalOpsMirrorTheForwardPassOnTheSameVariables) {
  const std::string path = WriteTestFile("mirror.npy", Npy(Tokens()));
  ASSERT_OK_AND_ASSIGN(TrainGraph plain,
                       BuildTransformerTrainGraph(TokenTransformer(path, 0), Sgd(0.5f)));
  ASSERT_OK_AND_ASSIGN(TrainGraph eval,
                       BuildTransformerTrainGraph(TokenTransformer(path, 0.25f), Sgd(0.5f)));
  EXPECT_EQ(plain.eval_loss, "");
  EXPECT_EQ(eval.eval_loss, "eval/loss");
  std::map<std::string, const v1::Op*> ops;
  for (const v1::Op& op : eval.forward.ops()) ops[op.name()] = &op;
  std::set<std::string> variables(plain.trainable.begin(), plain.trainable.end());
  int mirrored = 0;
  for (const v1::Op& op : plain.forward.ops()) {
    EXPECT_FALSE(absl::StartsWith(op.name(), "eval/")) << op.name();
    if (op.type() == "variable" || absl::StartsWith(op.name(), "data_step")) continue;
    ASSERT_TRUE(ops.count("eval/" + op.name())) << op.name();
    const v1::Op& e = *ops.at("eval/" + op.name());
    EXPECT_EQ(e.type(), op.type()) << op.name();
    ASSERT_EQ(e.inputs_size(), op.inputs_size()) << op.name();
    for (int i = 0; i < op.inputs_size(); ++i) {
      const std::string& in = op.inputs(i);
      const std::string want = variables.count(in) ? in
                               : in == "data_step" ? "eval/step"
                                                   : "eval/" + in;
      EXPECT_EQ(e.inputs(i), want) << op.name();
    }
    if (op.type() == "text_windows") {
      EXPECT_EQ(op.attrs().at("format").s(), "npy");
      EXPECT_EQ(op.attrs().at("vocab").i(), kVocab);
      EXPECT_FALSE(op.attrs().count("split"));
      EXPECT_EQ(ops.at(op.name())->attrs().at("split").s(), "train");
      EXPECT_EQ(e.attrs().at("split").s(), "eval");
      EXPECT_EQ(e.attrs().at("eval_fraction").f(), 0.25f);
    }
    ++mirrored;
  }
  EXPECT_GT(mirrored, 30);
  // One op beyond the mirror: the eval step; and the eval loss is no output of the training step.
  EXPECT_EQ(eval.forward.ops_size() - plain.forward.ops_size(), mirrored + 1);
  EXPECT_EQ(ops.at("eval/step")->type(), "zeros");
  for (const std::string& out : eval.graph.proto().outputs()) {
    EXPECT_FALSE(absl::StartsWith(out, "eval/")) << out;
  }
  // Training as a request: the coordinator's AddTraining makes the same graph, eval ops included.
  ASSERT_OK_AND_ASSIGN(const Graph forward, Graph::Build(eval.forward));
  ASSERT_OK_AND_ASSIGN(const TrainedGraph trained, AddTraining(forward, eval.spec));
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(eval.graph.proto(), trained.graph.proto())) << diff;
}

TEST(TransformerTokensTest, EvalLossIsTheLossOfTheHeldOutTokens) {
  // 400 tokens, eval_fraction 0.25: the eval part is the last 100, the train part the first 300.
  const std::vector<int32_t> ids = Tokens();
  const std::string path = WriteTestFile("split.npy", Npy(ids));
  const std::string train_part =
      WriteTestFile("train_part.npy", Npy(std::vector<int32_t>(ids.begin(), ids.begin() + 300)));
  const std::string eval_part =
      WriteTestFile("eval_part.npy", Npy(std::vector<int32_t>(ids.begin() + 300, ids.end())));
  ASSERT_OK_AND_ASSIGN(TrainGraph t,
                       BuildTransformerTrainGraph(TokenTransformer(path, 0.25f), Sgd(0.5f)));
  ASSERT_OK_AND_ASSIGN(TrainGraph on_train,
                       BuildTransformerTrainGraph(TokenTransformer(train_part, 0), Sgd(0.5f)));
  ASSERT_OK_AND_ASSIGN(TrainGraph on_eval,
                       BuildTransformerTrainGraph(TokenTransformer(eval_part, 0), Sgd(0.5f)));
  const std::map<std::string, float> first = FirstStep(t, {t.loss, t.eval_loss});
  // The same initial weights (initializers keyed by seed and name) on the same windows.
  EXPECT_EQ(first.at(t.loss), FirstStep(on_train, {on_train.loss}).at(on_train.loss));
  EXPECT_EQ(first.at(t.eval_loss), FirstStep(on_eval, {on_eval.loss}).at(on_eval.loss));
  EXPECT_NE(first.at(t.loss), first.at(t.eval_loss));
  EXPECT_LT(std::abs(first.at(t.eval_loss) - std::log(static_cast<float>(kVocab))), 1.0f);

  // Training lowers the eval loss (the held-out tokens follow the train part's rule), and the
  // same numbers on a DP x MP mesh.
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules,
                       LayoutRules::Parse("batch:rows,heads:cols,d_ff:cols,vocab:cols", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(t.graph, mesh, rules));
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(program, {&CpuKernels()}));
  TensorMap state;
  std::vector<float> evals;
  for (int s = 0; s < 30; ++s) {
    const bool fetch_eval = s % 10 == 0 || s == 29;
    std::vector<std::string> fetches = {t.loss};
    if (fetch_eval) fetches.push_back(t.eval_loss);
    ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(t.graph, {}, fetches, &state, CpuKernels()));
    ASSERT_OK_AND_ASSIGN(auto got, sim->Step({}, fetches));
    for (const std::string& name : fetches) {
      const float w = want.at(name).f32()[0], g = got.at(name).f32()[0];
      EXPECT_NEAR(g, w, 1e-4 * std::abs(w)) << name << " step " << s;
    }
    if (fetch_eval) evals.push_back(want.at(t.eval_loss).f32()[0]);
  }
  ASSERT_EQ(evals.size(), 4u);
  EXPECT_EQ(evals[0], first.at(t.eval_loss));
  EXPECT_LT(evals.back(), evals[0] - 0.5f) << absl::StrCat(evals[0], " -> ", evals.back());
}

TEST(TransformerTokensTest, TheEvalPassRunsOnlyWhenFetched) {
  // 60 tokens, eval_fraction 0.1: an eval part of 6 tokens holds no window of length 8 + 1, so
  // running the eval pass fails — and a step that does not fetch it succeeds, in the interpreter
  // and on a mesh.
  std::vector<int32_t> ids = Tokens();
  ids.resize(60);
  const std::string path = WriteTestFile("small_eval.npy", Npy(ids));
  ASSERT_OK_AND_ASSIGN(TrainGraph t,
                       BuildTransformerTrainGraph(TokenTransformer(path, 0.1f), Sgd(0.5f)));
  TensorMap state;
  ASSERT_OK(InterpretStep(t.graph, {}, {t.loss}, &state, CpuKernels()).status());
  EXPECT_TRUE(StatusIs(InterpretStep(t.graph, {}, {t.eval_loss}, &state, CpuKernels()).status(),
                       absl::StatusCode::kInvalidArgument, {"eval/inputs", "has 6"}));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("p:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:p", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(t.graph, mesh, rules));
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(program, {&CpuKernels()}));
  ASSERT_OK(sim->Step({}, {t.loss}).status());
  ASSERT_OK(sim->Step({}, {t.loss, t.learning_rate}).status());
  EXPECT_TRUE(StatusIs(sim->Step({}, {t.loss, t.eval_loss}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"eval/inputs", path, "eval part", "has 6"}));
}

TEST(TransformerTokensTest, TokenOptionsAreChecked) {
  const std::string path = WriteTestFile("options.npy", Npy(Tokens()));
  TransformerOptions o = TokenTransformer(path, 0.1f);
  EXPECT_TRUE(CheckTransformerOptions(o).ok());
  o.vocab = 50;  // token ids need not be bytes
  EXPECT_TRUE(CheckTransformerOptions(o).ok());
  o.data_format = "txt";
  EXPECT_TRUE(StatusIs(CheckTransformerOptions(o), absl::StatusCode::kInvalidArgument,
                       {"data_format", "'txt'"}));
  o.data_format = "bytes";
  EXPECT_TRUE(StatusIs(CheckTransformerOptions(o), absl::StatusCode::kInvalidArgument,
                       {"vocab must be >= 256"}));
  o = TokenTransformer(path, 1.0f);
  EXPECT_TRUE(StatusIs(CheckTransformerOptions(o), absl::StatusCode::kInvalidArgument,
                       {"eval_fraction must be in [0, 1)", "1"}));
  o = TokenTransformer("", 0.1f);
  EXPECT_TRUE(StatusIs(CheckTransformerOptions(o), absl::StatusCode::kInvalidArgument,
                       {"need a data_path"}));
  o = TokenTransformer("", 0);
  EXPECT_TRUE(StatusIs(BuildTransformerTrainGraph(o, Sgd(0.5f)).status(),
                       absl::StatusCode::kInvalidArgument, {"need a data_path"}));
}

}  // namespace
}  // namespace models
}  // namespace meshrt
