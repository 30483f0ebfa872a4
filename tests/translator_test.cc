// The C++ translation API (client/translator.h) on a tiny encoder-decoder with fixed random
// weights and a SentencePiece vocabulary trained here: a checkpoint directory opened by path
// translates text in process, and the same text and scores come back from a coordinator's four
// workers under a 2-D layout, greedy and beam search; bad options are refused before anything
// runs, naming what is wrong.
#include "client/translator.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/local_cluster.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/checkpoint_tensors.h"
#include "text/vocab/vocab.h"
#include "util/file.h"

namespace meshrt {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// Made-up English sentences (none of the project's own text), one per line.
std::vector<std::string> Sentences() {
  std::vector<std::string> out;
  for (const char* a : {"red", "small", "old", "green"}) {
    for (const char* n : {"cat", "dog", "bird", "horse", "wolf"}) {
      for (const char* v : {"sleeps", "eats", "runs"}) {
        out.push_back(absl::StrCat("the ", a, " ", n, " ", v, " ."));
      }
    }
  }
  return out;
}

models::EncDecOptions Tiny(int64_t vocab) {
  models::EncDecOptions o;
  o.batch = 4;
  o.length = 10;
  o.d_model = 16;
  o.heads = 4;
  o.d_kv = 4;
  o.d_ff = 32;
  o.encoder_layers = o.decoder_layers = 1;
  o.vocab = vocab;
  o.dropout = 0;
  o.seed = 7;
  return o;
}

class TranslatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string corpus = absl::StrCat(TempDir(), "/corpus.txt");
    std::ofstream(corpus) << absl::StrJoin(Sentences(), "\n") << "\n";
    vocab_path_ = new std::string(absl::StrCat(TempDir(), "/v.model"));
    text::VocabTrainOptions train;
    train.inputs = {corpus};
    train.size = 28;
    ASSERT_OK(text::TrainVocab(train, *vocab_path_, nullptr));
    ASSERT_OK_AND_ASSIGN(text::Vocab vocab, text::Vocab::Load(*vocab_path_));
    // The weights: the decoding program's variables as their initializers make them.
    GraphBuilder b;
    ASSERT_OK_AND_ASSIGN(models::DecoderOutputs d,
                         models::BuildEncDecDecoder(b, Tiny(vocab.size())));
    ASSERT_OK_AND_ASSIGN(Graph graph, b.Build());
    weights_ = new TensorMap();
    const Tensor inputs = Tensor::Int(Shape({{"batch", 4}, {"length", 10}}),
                                      std::vector<int32_t>(40, models::kEosId));
    ASSERT_OK(InterpretStep(graph, {{"inputs", inputs}}, {d.decoded.name}, weights_, CpuKernels())
                  .status());
    ASSERT_FALSE(weights_->empty());
    // Random weights put pad (which ends a line) first everywhere; with the embedding rows
    // (which are also the softmax's) of pad and EOS zero, their logits are 0 and other pieces
    // win: text to compare.
    Tensor& embedding = weights_->at("shared/embedding");  // [vocab, d_model]
    const int64_t d_model = embedding.shape().dim(1).size;
    for (int64_t i = 0; i < 2 * d_model; ++i) embedding.f32()[i] = 0;  // rows 0 and 1
    static_assert(models::kPadId == 0 && models::kEosId == 1);
    // A checkpoint directory as training leaves it: the variables and vocab.model.
    root_ = new std::string(absl::StrCat(TempDir(), "/root"));
    const std::string ck = absl::StrCat(*root_, "/ck");
    ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", ck).c_str()), 0);
    ASSERT_OK(WriteCheckpointFromTensors(ck, *weights_, /*step=*/0, /*keep=*/1));
    ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(*vocab_path_));
    ASSERT_OK(WriteFileAtomically(absl::StrCat(ck, "/vocab.model"), bytes));
  }
  static std::string* vocab_path_;
  static std::string* root_;
  static TensorMap* weights_;
};
std::string* TranslatorTest::vocab_path_ = nullptr;
std::string* TranslatorTest::root_ = nullptr;
TensorMap* TranslatorTest::weights_ = nullptr;

// Six lines (one batch and a padded one), the last longer than the model's length.
std::vector<std::string> Lines() {
  return {"the red cat sleeps .", "the old wolf eats .", "the green bird runs .",
          "the small dog sleeps .", "the old horse runs .",
          "the red cat and the small dog and the green bird and the old wolf sleep ."};
}

TEST_F(TranslatorTest, OpensACheckpointByPathAndTranslatesText) {
  TranslatorOptions o;
  o.target.reference = true;
  o.scores = true;
  std::ostringstream log;
  ASSERT_OK_AND_ASSIGN(auto translator, Translator::Open(*root_ + "/ck", o, log));
  EXPECT_EQ(translator->model().d_model, 16);
  EXPECT_EQ(translator->model().encoder_layers, 1);
  EXPECT_EQ(translator->model().vocab, translator->vocab().size());
  ASSERT_OK_AND_ASSIGN(std::vector<Translation> out, translator->Translate(Lines()));
  ASSERT_EQ(out.size(), Lines().size());
  std::set<std::string> distinct;
  for (const Translation& t : out) distinct.insert(t.text);
  // Random weights still give text to compare (not EOS at once everywhere).
  EXPECT_GE(distinct.size(), 2u) << out[0].text;
  EXPECT_GE(out[0].ids.size(), 3u) << out[0].text;
  for (const Translation& t : out) {
    EXPECT_EQ(t.text, translator->vocab().Decode(t.ids));
    EXPECT_LE(static_cast<int64_t>(t.ids.size()), 10);
    for (int32_t id : t.ids) EXPECT_GT(id, models::kEosId) << "pad and EOS are not in the text";
    EXPECT_TRUE(std::isfinite(t.score) && t.score < 0) << t.score;
  }
  // The same as decoding the ids directly, one row at a time (another batching).
  DecoderOptions d;
  d.model = translator->model();
  d.model.batch = 1;
  d.scores = true;
  d.target.reference = true;
  ASSERT_OK_AND_ASSIGN(auto decoder, TranslationDecoder::Start(d, *weights_, log));
  for (size_t i = 0; i < Lines().size(); ++i) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<Hypothesis> h,
        decoder->Decode({EncodeSource(translator->vocab(), Lines()[i], d.model.length)}));
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].ids, out[i].ids) << "line " << i;
    EXPECT_NEAR(h[0].score, out[i].score, 1e-4 * (1 + std::abs(h[0].score))) << "line " << i;
  }
}

TEST_F(TranslatorTest, ACoordinatorsWorkersTranslateAsTheReferenceDoes) {
  LocalClusterOptions c;
  c.workers = 4;
  c.coordinator_command = {"client/meshrt", "coordinator"};
  c.worker_command = {"client/meshrt", "worker"};
  c.checkpoint_root = *root_;
  c.http = false;
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) c.log_dir = dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(c));
  for (int64_t beam : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("beam ", beam));
    TranslatorOptions o;
    o.beam = beam;
    o.scores = true;
    o.target.reference = true;
    std::ostringstream log;
    ASSERT_OK_AND_ASSIGN(auto reference, Translator::Open(*root_ + "/ck", o, log));
    ASSERT_OK_AND_ASSIGN(std::vector<Translation> want, reference->Translate(Lines()));
    o.target.reference = false;
    o.target.coordinator = cluster->address();
    o.target.security = cluster->client_security();
    o.target.checkpoint_root = *root_;
    o.target.mesh = "rows:2,cols:2";
    o.target.layout = "batch:rows,heads:cols,d_ff:cols,vocab:cols";
    ASSERT_OK_AND_ASSIGN(auto mesh, Translator::Open(*root_ + "/ck", o, log));
    EXPECT_NE(log.str().find("decoding on 4 worker processes"), std::string::npos) << log.str();
    ASSERT_OK_AND_ASSIGN(std::vector<Translation> got, mesh->Translate(Lines()));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].text, want[i].text) << "line " << i;
      EXPECT_NEAR(got[i].score, want[i].score, 1e-4 * (1 + std::abs(want[i].score)))
          << "line " << i;
    }
  }
}

TEST_F(TranslatorTest, RefusesBadOptionsNamingThem) {
  std::ostringstream log;
  TranslatorOptions o;
  o.target.reference = true;
  auto refused = [&](const TranslatorOptions& options, const std::string& text,
                     const std::string& vocab = "") {
    absl::StatusOr<std::unique_ptr<Translator>> t =
        Translator::Open(*root_ + "/ck", options, log, vocab);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_NE(t.status().message().find(text), std::string::npos) << t.status();
  };
  TranslatorOptions none = o;
  none.target.reference = false;
  refused(none, "exactly one of");
  TranslatorOptions wide = o;
  wide.beam = 30;
  refused(wide, "2 x beam <= the vocabulary");
  TranslatorOptions zero = o;
  zero.batch = 0;
  refused(zero, "batch >= 1");
  TranslatorOptions longer = o;
  longer.max_length = 11;
  refused(longer, "max_length needs 1 <= L <= 10");
  // A vocabulary of another size than the model's.
  const std::string corpus = absl::StrCat(TempDir(), "/corpus.txt");
  text::VocabTrainOptions train;
  train.inputs = {corpus};
  train.size = 24;
  const std::string other = absl::StrCat(TempDir(), "/other.model");
  ASSERT_OK(text::TrainVocab(train, other, nullptr));
  refused(o, "the vocabulary has 24 pieces", other);
  // Weights of another model.
  TensorMap mlp = {{"w1", Tensor::Float(Shape({{"a", 2}, {"b", 2}}), {0, 0, 0, 0})}};
  ASSERT_OK_AND_ASSIGN(text::Vocab vocab, text::Vocab::Load(*vocab_path_));
  absl::StatusOr<std::unique_ptr<Translator>> t =
      Translator::Create(mlp, std::move(vocab), o, log, "checkpoint mlp");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("checkpoint mlp has no 2-D variable shared/embedding"),
            std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace meshrt
