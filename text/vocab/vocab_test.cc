// TrainVocab and Vocab on a small made-up corpus: the id contract, round trips, determinism,
// training and loading errors, and agreement with Debian's Python SentencePiece.
#include "text/vocab/vocab.h"

#include <dirent.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "text/vocab/sentencepiece_library.h"
#include "text/vocab/vocab_test_util.h"

namespace meshrt {
namespace text {
namespace {

// Sentences whose characters all occur in the corpus (so none is UNK), some of them new
// combinations, with accents, guillemets and digits. Already normalised (single spaces).
const std::vector<std::string>& RoundTripSentences() {
  static const auto* sentences = new std::vector<std::string>{
      "Le garçon voit «bonjour» à Noël.",
      "L'élève déçoit la rivière depuis 2024 !",
      "The cat reads three apples in 1999?",
      "Ce médecin écrit une fenêtre le 14 juillet.",
      "ça, «1234567890» é ç",
      "a",
  };
  return *sentences;
}

std::set<std::string> FilesIn(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  closedir(d);
  return names;
}

class VocabTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestTempDir("vocab_test"));
    corpus_ = new std::string(WriteTestCorpus(*dir_));
    model_ = new std::string(*dir_ + "/test.model");
    const absl::Status trained = TrainVocab(TestOptions({*corpus_}), *model_);
    ASSERT_TRUE(trained.ok()) << trained;
  }

  static Vocab LoadTestVocab() {
    absl::StatusOr<Vocab> vocab = Vocab::Load(*model_);
    EXPECT_TRUE(vocab.ok()) << vocab.status();
    return *std::move(vocab);
  }

  static std::string* dir_;
  static std::string* corpus_;
  static std::string* model_;
};

std::string* VocabTest::dir_ = nullptr;
std::string* VocabTest::corpus_ = nullptr;
std::string* VocabTest::model_ = nullptr;

TEST_F(VocabTest, SpecialIdsFollowTheContract) {
  const Vocab vocab = LoadTestVocab();
  EXPECT_EQ(vocab.size(), kTestVocabSize);
  EXPECT_EQ(vocab.pad_id(), 0);
  EXPECT_EQ(vocab.eos_id(), 1);
  EXPECT_EQ(vocab.unk_id(), 2);
  EXPECT_EQ(vocab.bos_id(), -1);
  EXPECT_EQ(vocab.Piece(0), "<pad>");
  EXPECT_EQ(vocab.Piece(1), "</s>");
  EXPECT_EQ(vocab.Piece(2), "<unk>");
  EXPECT_EQ(vocab.PieceToId("</s>"), 1);
  EXPECT_EQ(vocab.PieceToId("<pad>"), 0);
  EXPECT_EQ(vocab.PieceToId("no such piece"), 2);
  EXPECT_EQ(vocab.Piece(-1), "");
  EXPECT_EQ(vocab.Piece(static_cast<int32_t>(kTestVocabSize)), "");
  // Ordinary pieces come after the three special ones.
  EXPECT_NE(vocab.Piece(3), "");
  EXPECT_EQ(vocab.PieceToId(vocab.Piece(3)), 3);
}

TEST_F(VocabTest, EncodeThenDecodeGivesTheTextBack) {
  const Vocab vocab = LoadTestVocab();
  for (const std::string& s : RoundTripSentences()) {
    const std::vector<int32_t> ids = vocab.Encode(s);
    ASSERT_FALSE(ids.empty()) << s;
    for (const int32_t id : ids) {
      EXPECT_GT(id, 2) << "special or unknown id in the encoding of '" << s << "'";
      EXPECT_LT(id, vocab.size());
    }
    EXPECT_EQ(vocab.Decode(ids), s);
  }
  // Subwords: a frequent word is one piece, a text is fewer pieces than characters.
  const std::vector<int32_t> ids = vocab.Encode("Le garçon voit «bonjour» à Noël.");
  EXPECT_LT(ids.size(), std::string("Le garçon voit «bonjour» à Noël.").size() / 2);
}

TEST_F(VocabTest, EncodingIsNormalisedAsSentencePieceDoes) {
  const Vocab vocab = LoadTestVocab();
  EXPECT_EQ(vocab.Encode("  the   cat  "), vocab.Encode("the cat"));
  EXPECT_EQ(vocab.Decode(vocab.Encode("  the   cat  ")), "the cat");
  EXPECT_TRUE(vocab.Encode("").empty());
  EXPECT_EQ(vocab.Decode({}), "");
}

TEST_F(VocabTest, CharactersOutsideTheVocabularyAreUnk) {
  const Vocab vocab = LoadTestVocab();
  const std::vector<int32_t> ids = vocab.Encode("the 漢 cat");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 2), ids.end());
  EXPECT_TRUE(absl::StrContains(vocab.Decode(ids), "\xE2\x81\x87")) << vocab.Decode(ids);
}

TEST_F(VocabTest, DecodeStopsAtTheFirstEosAndSkipsPad) {
  const Vocab vocab = LoadTestVocab();
  const std::vector<int32_t> first = vocab.Encode("Le garçon voit");
  const std::vector<int32_t> second = vocab.Encode("the cat");
  std::vector<int32_t> row = {0};
  row.insert(row.end(), first.begin(), first.end());
  row.push_back(0);
  row.push_back(1);
  row.insert(row.end(), second.begin(), second.end());
  row.push_back(1);
  EXPECT_EQ(vocab.Decode(row), "Le garçon voit");
  EXPECT_EQ(vocab.Decode({1, first[0]}), "");
  EXPECT_EQ(vocab.Decode({0, 0, 0}), "");
}

TEST_F(VocabTest, IdsOutsideTheVocabularyDecodeAsUnk) {
  const Vocab vocab = LoadTestVocab();
  std::vector<int32_t> ids = vocab.Encode("the cat");
  ids.insert(ids.begin() + 1, static_cast<int32_t>(vocab.size()) + 5);
  ids.push_back(-7);
  const std::string text = vocab.Decode(ids);
  EXPECT_TRUE(absl::StrContains(text, "\xE2\x81\x87")) << text;
  EXPECT_TRUE(absl::StrContains(text, "cat")) << text;
}

TEST_F(VocabTest, TheModelIsExactlyTheOutputFile) {
  const std::string dir = MakeTestTempDir("only_model");
  ASSERT_TRUE(TrainVocab(TestOptions({*corpus_}), dir + "/v.model").ok());
  EXPECT_EQ(FilesIn(dir), std::set<std::string>{"v.model"});
}

TEST_F(VocabTest, TrainingIsDeterministic) {
  const std::string dir = MakeTestTempDir("determinism");
  // The same options, a different output path and another copy of the input: the same bytes.
  const std::string copy = WriteTestCorpus(dir, "copy.txt");
  ASSERT_TRUE(TrainVocab(TestOptions({copy}), dir + "/again.model").ok());
  EXPECT_EQ(ReadBytes(dir + "/again.model"), ReadBytes(*model_));
  for (const std::string type : {"unigram", "bpe"}) {
    VocabTrainOptions options = TestOptions({*corpus_});
    options.model_type = type;
    options.threads = 2;
    ASSERT_TRUE(TrainVocab(options, dir + "/a.model").ok());
    ASSERT_TRUE(TrainVocab(options, dir + "/b.model").ok());
    const std::string a = ReadBytes(dir + "/a.model");
    EXPECT_GT(a.size(), 1000u);
    EXPECT_EQ(a, ReadBytes(dir + "/b.model")) << type;
  }
}

TEST_F(VocabTest, BpeModelsKeepTheContractToo) {
  const std::string dir = MakeTestTempDir("bpe");
  VocabTrainOptions options = TestOptions({*corpus_});
  options.model_type = "bpe";
  ASSERT_TRUE(TrainVocab(options, dir + "/bpe.model").ok());
  absl::StatusOr<Vocab> vocab = Vocab::Load(dir + "/bpe.model");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->Piece(0), "<pad>");
  EXPECT_EQ(vocab->Piece(1), "</s>");
  EXPECT_EQ(vocab->unk_id(), 2);
  EXPECT_NE(ReadBytes(dir + "/bpe.model"), ReadBytes(*model_));
  for (const std::string& s : RoundTripSentences()) EXPECT_EQ(vocab->Decode(vocab->Encode(s)), s);
}

TEST_F(VocabTest, MaxSentencesSamplesBySeed) {
  const std::string dir = MakeTestTempDir("sample");
  // Several inputs, read in order.
  const std::string second = WriteFile(dir + "/second.txt", "\n\nUne ligne de plus.\n");
  VocabTrainOptions options = TestOptions({*corpus_, second});
  options.size = 100;
  options.max_sentences = 300;
  VocabTrainStats stats;
  ASSERT_TRUE(TrainVocab(options, dir + "/s1.model", &stats).ok());
  EXPECT_EQ(stats.sentences, 401);  // empty lines do not count
  EXPECT_EQ(stats.used, 300);
  ASSERT_TRUE(TrainVocab(options, dir + "/s1again.model").ok());
  EXPECT_EQ(ReadBytes(dir + "/s1.model"), ReadBytes(dir + "/s1again.model"));
  options.seed = 2;
  ASSERT_TRUE(TrainVocab(options, dir + "/s2.model").ok());
  EXPECT_NE(ReadBytes(dir + "/s1.model"), ReadBytes(dir + "/s2.model"));
  // More than there are: all of them.
  options.max_sentences = 100000;
  ASSERT_TRUE(TrainVocab(options, dir + "/all.model", &stats).ok());
  EXPECT_EQ(stats.used, 401);
}

TEST_F(VocabTest, TrainingErrorsNameTheFileOrTheFlag) {
  const std::string dir = MakeTestTempDir("errors");
  const std::string out = dir + "/out.model";
  const std::string missing = dir + "/missing.txt";
  EXPECT_TRUE(StatusIs(TrainVocab(TestOptions({*corpus_, missing}), out),
                       absl::StatusCode::kNotFound, {missing}));

  VocabTrainOptions options = TestOptions({*corpus_});
  options.size = 5000;
  EXPECT_TRUE(StatusIs(TrainVocab(options, out), absl::StatusCode::kInvalidArgument,
                       {"--size 5000", *corpus_, "Vocabulary size too high (5000)"}));
  options.size = 20;  // fewer than the corpus's characters
  EXPECT_TRUE(StatusIs(TrainVocab(options, out), absl::StatusCode::kInvalidArgument,
                       {"--size 20", "SentencePiece"}));
  options.size = 3;
  EXPECT_TRUE(StatusIs(TrainVocab(options, out), absl::StatusCode::kInvalidArgument, {"--size 3"}));
  options = TestOptions({*corpus_});
  options.model_type = "word";
  EXPECT_TRUE(StatusIs(TrainVocab(options, out), absl::StatusCode::kInvalidArgument,
                       {"--model_type 'word'"}));
  options = TestOptions({*corpus_});
  options.character_coverage = 0.5;
  EXPECT_TRUE(StatusIs(TrainVocab(options, out), absl::StatusCode::kInvalidArgument,
                       {"--character_coverage"}));
  EXPECT_TRUE(
      StatusIs(TrainVocab(TestOptions({}), out), absl::StatusCode::kInvalidArgument, {"--input"}));
  const std::string empty = WriteFile(dir + "/empty.txt", "\n\n");
  EXPECT_TRUE(StatusIs(TrainVocab(TestOptions({empty}), out), absl::StatusCode::kInvalidArgument,
                       {empty, "no text"}));
  const std::string latin1 = WriteFile(dir + "/latin1.txt", "ok\ngar\xE7on\n");
  EXPECT_TRUE(StatusIs(TrainVocab(TestOptions({latin1}), out), absl::StatusCode::kInvalidArgument,
                       {latin1 + ":2", "UTF-8"}));
  EXPECT_TRUE(StatusIs(TrainVocab(TestOptions({*corpus_}), dir + "/no/such/dir/x.model"),
                       absl::StatusCode::kNotFound, {dir + "/no/such/dir/x.model"}));
  // Nothing was written, not even a temporary file.
  EXPECT_EQ(FilesIn(dir), (std::set<std::string>{"empty.txt", "latin1.txt"}));
}

TEST_F(VocabTest, LoadRejectsWhatIsNotAModel) {
  const std::string dir = MakeTestTempDir("load");
  const std::string text = WriteFile(dir + "/text.model", "this is not a model\n");
  EXPECT_TRUE(StatusIs(Vocab::Load(text).status(), absl::StatusCode::kInvalidArgument,
                       {text, "is not a SentencePiece model"}));
  const std::string empty = WriteFile(dir + "/empty.model", "");
  EXPECT_TRUE(StatusIs(Vocab::Load(empty).status(), absl::StatusCode::kInvalidArgument,
                       {empty, "is not a SentencePiece model"}));
  EXPECT_TRUE(StatusIs(Vocab::Load(dir + "/missing.model").status(), absl::StatusCode::kNotFound,
                       {dir + "/missing.model"}));
  // A truncated model.
  const std::string bytes = ReadBytes(*model_);
  const std::string cut = WriteFile(dir + "/cut.model", bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(StatusIs(Vocab::Load(cut).status(), absl::StatusCode::kInvalidArgument, {cut}));
}

// A vocabulary trained elsewhere with SentencePiece's default ids (UNK 0, BOS 1, EOS 2, no pad).
TEST_F(VocabTest, LoadRejectsAModelWithOtherSpecialIds) {
  class Lines : public SentenceSource {
   public:
    bool Next(absl::string_view* line) override {
      if (i_ == sentences_.size()) return false;
      *line = sentences_[i_++];
      return true;
    }
    absl::Status status() const override { return absl::OkStatus(); }

   private:
    std::vector<std::string> sentences_ = TestSentences();
    size_t i_ = 0;
  } lines;
  absl::StatusOr<std::string> model =
      TrainSentencePiece({{"vocab_size", "100"}, {"minloglevel", "1"}}, lines);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(StatusIs(
      Vocab::FromBytes(*model, "default-ids.model").status(), absl::StatusCode::kInvalidArgument,
      {"default-ids.model has pad id none, EOS id 2, UNK id 0 and BOS id 1", "pad 0 and EOS 1"}));
}

// Debian's Python SentencePiece (python3-sentencepiece, the same 0.1.97) reads our model file
// and gives the same ids and ids contract.
TEST_F(VocabTest, PythonSentencePieceGivesTheSameIds) {
  const Vocab vocab = LoadTestVocab();
  const std::string script =
      "import sys, sentencepiece as s\n"
      "p = s.SentencePieceProcessor(model_file=sys.argv[1])\n"
      "print(p.get_piece_size(), p.pad_id(), p.eos_id(), p.unk_id(), p.bos_id())\n"
      "for line in sys.stdin.read().split('\\n'):\n"
      "    print(' '.join(str(i) for i in p.encode(line)))\n";
  const std::string dir = MakeTestTempDir("python");
  const std::string script_path = WriteFile(dir + "/check.py", script);
  std::vector<std::string> sentences = RoundTripSentences();
  sentences.push_back("the 漢 cat");
  const std::string input = WriteFile(dir + "/in.txt", absl::StrJoin(sentences, "\n"));
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", script_path, " ", *model_, " < ", input, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << "python3 with sentencepiece (tools/setup.sh installs "
                                "python3-sentencepiece) failed:\n"
                             << output;
  std::vector<std::string> lines = absl::StrSplit(output, '\n');
  ASSERT_EQ(lines.size(), sentences.size() + 2) << output;
  EXPECT_EQ(lines[0], absl::StrCat(kTestVocabSize, " 0 1 2 -1"));
  for (size_t i = 0; i < sentences.size(); ++i) {
    EXPECT_EQ(lines[i + 1], absl::StrJoin(vocab.Encode(sentences[i]), " ")) << sentences[i];
  }
}

}  // namespace
}  // namespace text
}  // namespace meshrt
