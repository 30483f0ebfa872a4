#include "text/corpus/parallel.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"
#include "util/file.h"
#include "util/hash.h"

namespace meshrt {
namespace text {
namespace {

TEST(ValidateLangCodeTest, AcceptsDdtpCodesOnly) {
  for (const char* ok : {"fr", "de", "ast", "pt_BR", "zh_CN"}) {
    EXPECT_TRUE(ValidateLangCode(ok).ok()) << ok;
  }
  for (const char* bad : {"", "f", "FR", "fren", "pt_br", "pt-BR", "pt_BRA", "fr;rm", "../fr",
                          "fr\"; };", "de_", "zh_C1"}) {
    EXPECT_TRUE(StatusIs(ValidateLangCode(bad), absl::StatusCode::kInvalidArgument, {"--lang"}))
        << bad;
  }
  EXPECT_TRUE(StatusIs(ValidateLangCode("en"), absl::StatusCode::kInvalidArgument, {"English"}));
}

TEST(CleanPairsTest, DropsAndCountsEachReasonOnce) {
  std::vector<SentencePair> in = {
      {"Hello  world.", "Bonjour\tle monde."},
      {"Hello world.", "Bonjour le monde."},            // duplicate after normalisation
      {"Hello world.", "Salut le monde."},              // same English, other translation: kept
      {"Same text", "Same text"},                       // untranslated
      {"router_static", "router_static\xC2\xA0;"},      // untranslated but for punctuation
      {"", "rien"},                                     // empty
      {"   ", "rien"},                                  // empty after normalisation
      {"caf\xE9", "caf\xC3\xA9"},                       // Latin-1 on the English side
      {"Features:", "Fonctionnalit\xC3\x83\xC2\xA9s"},  // double-encoded "é"
      {"one two three four", "un deux trois"},          // 4 words > max 3
      {"one two three", "un deux trois quatre"},        // 4 words on the other side
      {"Short.", "Court."},
  };
  CleanOptions options;
  options.max_words = 3;
  CleanStats stats;
  const std::vector<SentencePair> out = CleanPairs(in, options, &stats);
  const std::vector<SentencePair> want = {{"Hello world.", "Bonjour le monde."},
                                          {"Hello world.", "Salut le monde."},
                                          {"Short.", "Court."}};
  EXPECT_EQ(out, want);
  EXPECT_EQ(stats.input, 12);
  EXPECT_EQ(stats.mojibake, 1);
  EXPECT_EQ(stats.duplicate, 1);
  EXPECT_EQ(stats.untranslated, 2);
  EXPECT_EQ(stats.empty, 2);
  EXPECT_EQ(stats.invalid_utf8, 1);
  EXPECT_EQ(stats.too_long, 2);
  EXPECT_EQ(stats.kept, 3);
  EXPECT_EQ(stats.input, stats.duplicate + stats.untranslated + stats.empty + stats.invalid_utf8 +
                             stats.mojibake + stats.too_long + stats.kept);
}

TEST(CleanPairsTest, MaxWordsZeroKeepsEveryLength) {
  CleanStats stats;
  CleanOptions options;
  options.max_words = 0;
  EXPECT_EQ(CleanPairs({{std::string(5000, 'a') + " b c d", "x"}}, options, &stats).size(), 1u);
}

TEST(SplitTest, DisjointOnEnglishStableAndNearTheRequestedShares) {
  SplitOptions options;
  options.dev_percent = 10;
  options.test_percent = 5;
  std::vector<SentencePair> pairs;
  for (int i = 0; i < 20000; ++i) {
    // Each English sentence twice, with two translations.
    pairs.push_back({absl::StrCat("Sentence number ", i, "."), absl::StrCat("Phrase ", i, ".")});
    pairs.push_back({absl::StrCat("Sentence number ", i, "."), absl::StrCat("Frase ", i, ".")});
  }
  const SplitCorpus corpus = SplitPairs(pairs, options);
  EXPECT_EQ(corpus.train.size() + corpus.dev.size() + corpus.test.size(), pairs.size());
  std::set<std::string> train, dev, test;
  for (const auto& p : corpus.train) train.insert(p.en);
  for (const auto& p : corpus.dev) dev.insert(p.en);
  for (const auto& p : corpus.test) test.insert(p.en);
  for (const std::string& en : dev) EXPECT_FALSE(train.count(en) || test.count(en)) << en;
  for (const std::string& en : test) EXPECT_FALSE(train.count(en)) << en;
  // Shares within a few points of 5% / 10% of 20000 sentences.
  EXPECT_NEAR(static_cast<double>(test.size()) / 20000, 0.05, 0.01);
  EXPECT_NEAR(static_cast<double>(dev.size()) / 20000, 0.10, 0.015);
  // Stable: pinned to util/hash.h's FNV-1a, and the same when the corpus changes around it.
  EXPECT_EQ(SplitOf("Sentence number 7.", options),
            SplitOf("Sentence number 7.", SplitOptions{10, 5}));
  const uint64_t h = Fnv1a64("Sentence number 7.") % 100;
  EXPECT_EQ(SplitOf("Sentence number 7.", options),
            h < 5 ? Split::kTest : (h < 15 ? Split::kDev : Split::kTrain));
  const SplitCorpus half =
      SplitPairs(std::vector<SentencePair>(pairs.begin(), pairs.begin() + 2000), options);
  for (const auto& p : half.test) EXPECT_TRUE(test.count(p.en)) << p.en;
  // All to train, or all to test.
  EXPECT_EQ(SplitPairs(pairs, SplitOptions{0, 0}).train.size(), pairs.size());
  EXPECT_EQ(SplitPairs(pairs, SplitOptions{0, 100}).test.size(), pairs.size());
}

TEST(SplitTest, ValidatesPercentages) {
  EXPECT_TRUE(ValidateSplitOptions({2, 2}).ok());
  EXPECT_TRUE(StatusIs(ValidateSplitOptions({-1, 2}), absl::StatusCode::kInvalidArgument,
                       {"--dev_percent"}));
  EXPECT_TRUE(StatusIs(ValidateSplitOptions({2, 101}), absl::StatusCode::kInvalidArgument,
                       {"--test_percent"}));
  EXPECT_TRUE(StatusIs(ValidateSplitOptions({60, 50}), absl::StatusCode::kInvalidArgument,
                       {"more than 100"}));
}

TEST(ReadTsvTest, ReadsPairsAndNamesTheBadLine) {
  const std::string dir = MakeTempDir();
  const std::string good = dir + "/good.tsv";
  WriteTestFile(good, "\xEF\xBB\xBFHello.\tBonjour.\r\n\nBye.\tAu revoir.\n");
  absl::StatusOr<std::vector<SentencePair>> pairs = ReadTsv(good);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(*pairs,
            (std::vector<SentencePair>{{"Hello.", "Bonjour."}, {"", ""}, {"Bye.", "Au revoir."}}));
  const std::string no_tab = dir + "/no_tab.tsv";
  WriteTestFile(no_tab, "a\tb\nc\td\njust text\n");
  EXPECT_TRUE(StatusIs(ReadTsv(no_tab).status(), absl::StatusCode::kInvalidArgument,
                       {no_tab, "line 3", "no tab"}));
  const std::string two_tabs = dir + "/two_tabs.tsv";
  WriteTestFile(two_tabs, "a\tb\tc\n");
  EXPECT_TRUE(StatusIs(ReadTsv(two_tabs).status(), absl::StatusCode::kInvalidArgument,
                       {"line 1", "more than one tab"}));
  EXPECT_TRUE(StatusIs(ReadTsv(dir + "/missing.tsv").status(), absl::StatusCode::kNotFound,
                       {"missing.tsv"}));
}

TEST(ReadAlignedTest, ReadsLineByLineAndNamesBothFilesOnMismatch) {
  const std::string dir = MakeTempDir();
  WriteTestFile(dir + "/a.en", "One.\nTwo.\n");
  WriteTestFile(dir + "/a.de", "Eins.\nZwei.");  // no final newline
  absl::StatusOr<std::vector<SentencePair>> pairs = ReadAligned(dir + "/a.en", dir + "/a.de");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(*pairs, (std::vector<SentencePair>{{"One.", "Eins."}, {"Two.", "Zwei."}}));
  WriteTestFile(dir + "/b.de", "Eins.\nZwei.\nDrei.\n");
  EXPECT_TRUE(StatusIs(ReadAligned(dir + "/a.en", dir + "/b.de").status(),
                       absl::StatusCode::kInvalidArgument,
                       {dir + "/a.en has 2 lines", dir + "/b.de has 3"}));
}

TEST(WriteSplitsTest, WritesSixAlignedFiles) {
  const std::string dir = MakeTempDir() + "/out/nested";
  SplitCorpus corpus;
  corpus.train = {{"A.", "a."}, {"B.", "b."}};
  corpus.test = {{"C.", "c."}};
  absl::StatusOr<std::vector<WrittenFile>> files = WriteSplits(dir, "pt_BR", corpus);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 6u);
  EXPECT_EQ((*files)[1].name, "train.pt_BR");
  EXPECT_EQ((*files)[1].lines, 2);
  EXPECT_EQ(*ReadFile(dir + "/train.en"), "A.\nB.\n");
  EXPECT_EQ(*ReadFile(dir + "/train.pt_BR"), "a.\nb.\n");
  EXPECT_EQ(*ReadFile(dir + "/dev.en"), "");
  EXPECT_EQ(*ReadFile(dir + "/test.pt_BR"), "c.\n");
  // A file where the directory should be.
  const std::string file_dir = MakeTempDir() + "/plain";
  WriteTestFile(file_dir, "x");
  EXPECT_FALSE(WriteSplits(file_dir, "fr", corpus).ok());
}

}  // namespace
}  // namespace text
}  // namespace meshrt
