// `meshrt vocab` in process: train, inspect and encode on temporary files, help, and errors.
#include "text/vocab/vocab_command.h"

#include <sstream>

#include "absl/strings/match.h"
#include "text/vocab/vocab_test_util.h"
#include "util/npy_header.h"

namespace meshrt {
namespace text {
namespace {

struct Result {
  absl::Status status;
  std::string out;
};

Result RunVocab(const std::vector<std::string>& args) {
  std::ostringstream out;
  absl::Status status = VocabCommand(args, out);
  return {status, out.str()};
}

TEST(VocabCommandTest, TrainsInspectsAndEncodes) {
  const std::string dir = MakeTestTempDir("vocab_command");
  const std::vector<std::string> sentences = TestSentences();
  const std::string first = WriteFile(
      dir + "/en.txt",
      absl::StrJoin(std::vector<std::string>(sentences.begin(), sentences.begin() + 200), "\n"));
  const std::string second = WriteFile(
      dir + "/fr.txt",
      absl::StrJoin(std::vector<std::string>(sentences.begin() + 200, sentences.end()), "\n"));
  const std::string model = dir + "/v.model";

  // --input followed by a second file (a positional argument).
  Result r = RunVocab({"train", "--input", first, second, "--size", "150", "--out", model});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(absl::StrContains(r.out, "model: " + model + "\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "vocab size: 150 (unigram)\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "special ids: pad 0, EOS 1, UNK 2, BOS none\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "sentences: 400 from 2 files\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "time: ")) << r.out;
  // Both files were read: the same model as from --input given twice, and from one file of both.
  ASSERT_TRUE(RunVocab({"train", "--input", first, "--input", second, "--size=150", "--out",
                        dir + "/twice"})
                  .status.ok());
  EXPECT_EQ(ReadBytes(dir + "/twice"), ReadBytes(model));
  ASSERT_TRUE(
      RunVocab({"train", "--input", WriteTestCorpus(dir), "--size", "150", "--out", dir + "/one"})
          .status.ok());
  EXPECT_EQ(ReadBytes(dir + "/one"), ReadBytes(model));

  r = RunVocab({"train", "--input", first, "--size", "120", "--out", dir + "/bpe.model",
                "--model_type", "bpe", "--max_sentences", "150"});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(absl::StrContains(r.out, "vocab size: 120 (bpe)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "sentences: 150 of 200 (--max_sentences, --seed 1)"))
      << r.out;

  r = RunVocab({"inspect", model, "--encode", "Le garçon voit «bonjour» à Noël.", "--pieces", "4"});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(absl::StrContains(r.out, "vocab size: 150\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "first 4 pieces")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "       0  <pad>  0\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "       1  </s>  0\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "       2  <unk>  0\n")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "\n       4  ")) << r.out;
  absl::StatusOr<Vocab> vocab = Vocab::Load(model);
  ASSERT_TRUE(vocab.ok());
  const std::vector<int32_t> ids = vocab->Encode("Le garçon voit «bonjour» à Noël.");
  EXPECT_TRUE(absl::StrContains(
      r.out, absl::StrCat("ids (", ids.size(), "): ", absl::StrJoin(ids, " "), "\n")))
      << r.out;
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(vocab->Piece(id));
  EXPECT_EQ(pieces[0].rfind("▁", 0), 0u) << pieces[0];  // the word-start mark
  EXPECT_TRUE(absl::StrContains(r.out, "pieces: " + absl::StrJoin(pieces, " ") + "\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "decoded: Le garçon voit «bonjour» à Noël.\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "round trip: exact\n")) << r.out;
  r = RunVocab({"inspect", model, "--encode", "the  cat"});
  EXPECT_TRUE(absl::StrContains(r.out, "round trip: differs")) << r.out;

  const std::string npy = dir + "/fr.npy";
  r = RunVocab({"encode", model, "--input", second, "--length", "8", "--out", npy});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(absl::StrContains(r.out, "wrote " + npy + ": int32 (200, 8)\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "lines: 200\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "truncated: ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tokens per line, EOS included: max ")) << r.out;
  const std::string bytes = ReadBytes(npy);
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(bytes, npy);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->dims, (std::vector<int64_t>{200, 8}));
  EXPECT_EQ(bytes.size(), header->data_offset + 200 * 8 * 4);
}

TEST(VocabCommandTest, HelpPrintsUsage) {
  Result r = RunVocab({"--help"});
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(absl::StrContains(r.out, "subcommands:")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "meshrt vocab train --input FILE [FILE...]")) << r.out;
  for (const std::string sub : {"train", "inspect", "encode"}) {
    r = RunVocab({sub, "--help"});
    ASSERT_TRUE(r.status.ok()) << sub << ": " << r.status;
    EXPECT_TRUE(absl::StrContains(r.out, "usage: meshrt vocab " + sub)) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "flags:")) << r.out;
  }
  EXPECT_TRUE(absl::StrContains(RunVocab({"train", "--help"}).out, "--max_sentences"));
  EXPECT_TRUE(absl::StrContains(RunVocab({"encode", "--help"}).out, "--length"));
}

TEST(VocabCommandTest, ErrorsSayWhatIsWrong) {
  const std::string dir = MakeTestTempDir("vocab_command_errors");
  EXPECT_TRUE(StatusIs(RunVocab({"frobnicate"}).status, absl::StatusCode::kInvalidArgument,
                       {"unknown vocab subcommand 'frobnicate'", "train, inspect, encode"}));
  EXPECT_TRUE(StatusIs(RunVocab({}).status, absl::StatusCode::kInvalidArgument,
                       {"train, inspect, encode"}));
  EXPECT_TRUE(StatusIs(RunVocab({"train", "--input", "x.txt", "--size", "100"}).status,
                       absl::StatusCode::kInvalidArgument, {"--out"}));
  EXPECT_TRUE(StatusIs(RunVocab({"train", "--out", dir + "/m"}).status,
                       absl::StatusCode::kInvalidArgument, {"--input"}));
  EXPECT_TRUE(
      StatusIs(RunVocab({"train", "--input", dir + "/none.txt", "--out", dir + "/m"}).status,
               absl::StatusCode::kNotFound, {dir + "/none.txt"}));
  EXPECT_TRUE(StatusIs(RunVocab({"train", "--bogus"}).status, absl::StatusCode::kInvalidArgument,
                       {"meshrt vocab train", "--bogus"}));
  EXPECT_TRUE(StatusIs(RunVocab({"train", "--size", "many"}).status,
                       absl::StatusCode::kInvalidArgument, {"--size"}));
  EXPECT_TRUE(
      StatusIs(RunVocab({"inspect"}).status, absl::StatusCode::kInvalidArgument, {"one MODEL"}));
  const std::string not_model = WriteFile(dir + "/not.model", "hello");
  EXPECT_TRUE(StatusIs(RunVocab({"inspect", not_model}).status, absl::StatusCode::kInvalidArgument,
                       {not_model, "not a SentencePiece model"}));
  EXPECT_TRUE(StatusIs(RunVocab({"encode", not_model, "--input", "x"}).status,
                       absl::StatusCode::kInvalidArgument, {"--length"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
