// Every expected value below is one sacreBLEU publishes (its README.md or its test files, named at
// each test, sacreBLEU 2.x at github.com/mjpost/sacrebleu), never one computed by this code.
#include "text/bleu/bleu.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "text/bleu/bleu_testing.h"

namespace meshrt {
namespace text {
namespace {

// sacreBLEU's tests compare with this tolerance (test/test_bleu.py, EPSILON).
constexpr double kBleuTestEpsilon = 1e-8;
// test/test_sentence_bleu.py's tolerance (its expected values have 3 to 5 decimals).
constexpr double kSentenceTestEpsilon = 1e-3;

// The README's example, also test/test_bleu.py's `_hyps` and `_refs`.
const std::vector<std::string> kHyps = {"The dog bit the man.", "It wasn't surprising.",
                                        "The man had just bitten him."};
const std::vector<std::vector<std::string>> kRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."},
};

double Score(const std::vector<std::string>& hyps,
             const std::vector<std::vector<std::string>>& refs, const BleuOptions& options) {
  absl::StatusOr<BleuScore> score = CorpusBleu(hyps, refs, options);
  EXPECT_TRUE(score.ok()) << score.status();
  return score.ok() ? score->score : -1;
}

// sacreBLEU's compat.raw_corpus_bleu(hyps, refs, smooth_value): no tokenization, floor smoothing,
// effective order.
BleuOptions RawCorpusBleuOptions(double smooth_value) {
  BleuOptions options;
  options.tokenize = BleuTokenizer::kNone;
  options.smooth_method = BleuSmoothing::kFloor;
  options.smooth_value = smooth_value;
  options.effective_order = true;
  return options;
}

BleuStats Stats(std::vector<int64_t> counts, std::vector<int64_t> totals, int64_t sys_len,
                int64_t ref_len) {
  BleuStats stats;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    stats.counts[n] = counts[n];
    stats.totals[n] = totals[n];
  }
  stats.sys_len = sys_len;
  stats.ref_len = ref_len;
  return stats;
}

// README.md, "Using SacreBLEU from Python": bleu.corpus_score(sys, refs) and its signature.
TEST(CorpusBleuTest, ReadmeExample) {
  absl::StatusOr<BleuScore> score = CorpusBleu(kHyps, kRefs);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(
      FormatBleu(*score),
      "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  // test/test_bleu.py, test_corpus_bleu_cases: default settings.
  EXPECT_NEAR(score->score, 48.530827, kBleuTestEpsilon);
  EXPECT_EQ(score->sys_len, 17);
  EXPECT_EQ(score->ref_len, 18);
  // The README's signature less its version field.
  EXPECT_EQ(BleuSignature(BleuOptions(), 2), "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp");
}

// README.md, "Variable Number of References": the first segment's first reference is ''.
TEST(CorpusBleuTest, ReadmeEmptyReferenceLine) {
  std::vector<std::vector<std::string>> refs = kRefs;
  refs[0][0] = "";
  absl::StatusOr<BleuScore> score = CorpusBleu(kHyps, refs);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(
      FormatBleu(*score),
      "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)");
}

// test/test_bleu.py, test_corpus_bleu_cases.
TEST(CorpusBleuTest, PublishedCorpusCases) {
  // "ensure that empty hypotheses are not removed"
  EXPECT_EQ(Score({"", "", ""}, kRefs, BleuOptions()), 0.0);
  BleuOptions none_tokenizer;
  none_tokenizer.tokenize = BleuTokenizer::kNone;
  EXPECT_NEAR(Score(kHyps, kRefs, none_tokenizer), 49.1919566, kBleuTestEpsilon);
  BleuOptions tok_13a;
  tok_13a.tokenize = BleuTokenizer::k13a;
  EXPECT_NEAR(Score(kHyps, kRefs, tok_13a), 48.530827, kBleuTestEpsilon);
  BleuOptions no_smoothing;
  no_smoothing.smooth_method = BleuSmoothing::kNone;
  EXPECT_NEAR(Score(kHyps, kRefs, no_smoothing), 48.530827, kBleuTestEpsilon);
}

// test/test_bleu.py, test_raw_bleu_cases (raw_corpus_bleu with smooth_value .01; scores / 100).
TEST(CorpusBleuTest, PublishedRawBleuCases) {
  const BleuOptions raw = RawCorpusBleuOptions(0.01);
  // No match at all: 0 (sacreBLEU #141).
  EXPECT_NEAR(Score({"this is a test", "another test"}, {{"ref1", "ref2"}}, raw) / 100, 0.0,
              kBleuTestEpsilon);
  EXPECT_NEAR(Score({"this is a test"}, {{"this is a test"}}, raw) / 100, 1.0, kBleuTestEpsilon);
  EXPECT_NEAR(Score({"this is a fest"}, {{"this is a test"}}, raw) / 100, 0.223606797749979,
              kBleuTestEpsilon);
}

// test/test_bleu.py, test_case_effective_order (raw_corpus_bleu with .01; scores / 100).
TEST(CorpusBleuTest, PublishedEffectiveOrderCases) {
  const BleuOptions raw = RawCorpusBleuOptions(0.01);
  EXPECT_NEAR(Score({"test"}, {{"a test"}}, raw) / 100, 0.3678794411714425, kBleuTestEpsilon);
  EXPECT_NEAR(Score({"a test"}, {{"a test"}}, raw) / 100, 1.0, kBleuTestEpsilon);
  EXPECT_NEAR(Score({"a little test"}, {{"a test"}}, raw) / 100, 0.03218297948685433,
              kBleuTestEpsilon);
}

// test/test_bleu.py, test_case_statistics: clipped counts (the repeated "am" and "a" are clipped by
// the reference's counts) and totals.
TEST(CorpusBleuTest, PublishedStatistics) {
  absl::StatusOr<BleuStats> stats =
      CorpusBleuStats({"am I am a character sequence"}, {{"I am a symbol string sequence a a"}},
                      RawCorpusBleuOptions(0.01));
  ASSERT_TRUE(stats.ok()) << stats.status();
  const int64_t counts[] = {4, 2, 1, 0};
  const int64_t totals[] = {6, 5, 4, 3};
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    EXPECT_EQ(stats->counts[n], counts[n]) << "order " << n + 1;
    EXPECT_EQ(stats->totals[n], totals[n]) << "order " << n + 1;
  }
}

// test/test_bleu.py, test_case_offset: floor smoothing with 0 and with its default 0.1.
TEST(CorpusBleuTest, PublishedOffsetCases) {
  const std::vector<std::string> hyp = {"am I am a character sequence"};
  const std::vector<std::vector<std::string>> ref = {{"I am a symbol string sequence a a"}};
  EXPECT_NEAR(Score(hyp, ref, RawCorpusBleuOptions(0.0)) / 100, 0.0, kBleuTestEpsilon);
  BleuOptions default_floor = RawCorpusBleuOptions(0.0);
  default_floor.smooth_value.reset();
  EXPECT_NEAR(Score(hyp, ref, default_floor) / 100, 0.1555722182, kBleuTestEpsilon);
}

// test/test_bleu.py, test_case_scoring: BLEU.compute_bleu with its default smooth_method 'none'.
TEST(ComputeBleuTest, PublishedScoring) {
  BleuOptions none;
  none.smooth_method = BleuSmoothing::kNone;
  EXPECT_NEAR(ComputeBleu(Stats({9, 7, 5, 3}, {10, 8, 6, 4}, 11, 11), none).score / 100,
              0.8375922397, kBleuTestEpsilon);
}

// test/test_bleu.py, test_case_degenerate_stats: floor smoothing, scores exactly 0.
TEST(ComputeBleuTest, PublishedDegenerateStatistics) {
  struct Case {
    BleuStats stats;
    double offset;
  };
  const Case cases[] = {
      {Stats({0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1), 0.0},
      {Stats({0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10), 0.0},
      {Stats({0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0), 0.0},
      {Stats({6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6), 0.0},
      {Stats({0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0), 0.1},
      {Stats({0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5), 0.01},
  };
  for (const Case& c : cases) {
    BleuOptions floor;
    floor.smooth_method = BleuSmoothing::kFloor;
    floor.smooth_value = c.offset;
    EXPECT_EQ(ComputeBleu(c.stats, floor).score, 0.0)
        << "sys_len " << c.stats.sys_len << " offset " << c.offset;
  }
}

// test/test_sentence_bleu.py, test_cases (sacreBLEU #98): one Romanian segment, sentence-level
// BLEU (effective order) with each smoothing method and tokenizer this library has.
TEST(CorpusBleuTest, PublishedSentenceCases) {
  const std::vector<std::string> sys = {
      "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"};
  const std::vector<std::vector<std::string>> ref = {
      {"producţia de zahăr brut se exprimă în zahăr alb;"}};
  struct Case {
    BleuSmoothing method;
    std::optional<double> value;
    BleuTokenizer tokenize;
    double expected;
  };
  const Case cases[] = {
      {BleuSmoothing::kExp, std::nullopt, BleuTokenizer::k13a, 8.493},
      {BleuSmoothing::kNone, std::nullopt, BleuTokenizer::k13a, 0.0},
      {BleuSmoothing::kFloor, std::nullopt, BleuTokenizer::k13a, 4.51688},
      {BleuSmoothing::kFloor, 0.1, BleuTokenizer::k13a, 4.51688},
      {BleuSmoothing::kFloor, 0.5, BleuTokenizer::k13a, 10.10},
      {BleuSmoothing::kAddK, std::nullopt, BleuTokenizer::k13a, 14.882},
      {BleuSmoothing::kAddK, 1, BleuTokenizer::k13a, 14.882},
      {BleuSmoothing::kAddK, 2, BleuTokenizer::k13a, 21.389},
      {BleuSmoothing::kExp, std::nullopt, BleuTokenizer::kNone, 7.347},
  };
  for (const Case& c : cases) {
    BleuOptions options;
    options.smooth_method = c.method;
    options.smooth_value = c.value;
    options.tokenize = c.tokenize;
    options.effective_order = true;
    EXPECT_NEAR(Score(sys, ref, options), c.expected, kSentenceTestEpsilon)
        << BleuSignature(options, 1);
  }
}

// test/test_sentence_bleu.py, test_cases_zero_bleu (sacreBLEU #141): no match scores 0 whatever
// the smoothing.
TEST(CorpusBleuTest, PublishedSentenceZeroCases) {
  struct Case {
    BleuSmoothing method;
    std::optional<double> value;
  };
  const Case cases[] = {{BleuSmoothing::kExp, std::nullopt},   {BleuSmoothing::kNone, std::nullopt},
                        {BleuSmoothing::kFloor, std::nullopt}, {BleuSmoothing::kFloor, 0.1},
                        {BleuSmoothing::kAddK, std::nullopt},  {BleuSmoothing::kAddK, 1}};
  for (const Case& c : cases) {
    BleuOptions options;
    options.smooth_method = c.method;
    options.smooth_value = c.value;
    options.effective_order = true;
    EXPECT_NEAR(Score({"this is a cat"}, {{"okay thanks"}}, options), 0.0, kSentenceTestEpsilon)
        << BleuSignature(options, 1);
  }
}

// --lowercase (sacreBLEU -lc) lowercases both sides before tokenizing, so the case of the
// hypotheses stops mattering: a property check, not a published value.
TEST(CorpusBleuTest, LowercaseIgnoresCase) {
  BleuOptions lowercase;
  lowercase.lowercase = true;
  const std::vector<std::string> upper = {"THE DOG BIT THE MAN.", "IT WASN'T SURPRISING.",
                                          "THE MAN HAD JUST BITTEN HIM."};
  const double lowered = Score(kHyps, kRefs, lowercase);
  EXPECT_EQ(Score(upper, kRefs, lowercase), lowered);
  // Case-sensitive BLEU of the upper-cased hypotheses matches far less ("." and "'" only).
  EXPECT_LT(Score(upper, kRefs, BleuOptions()), lowered / 2);
  EXPECT_EQ(BleuSignature(lowercase, 2), "nrefs:2|case:lc|eff:no|tok:13a|smooth:exp");
}

TEST(CorpusBleuTest, StreamOfWrongLengthIsInvalidArgument) {
  std::vector<std::vector<std::string>> refs = kRefs;
  refs[1].pop_back();
  EXPECT_TRUE(StatusIs(CorpusBleu(kHyps, refs).status(), absl::StatusCode::kInvalidArgument,
                       {"reference stream 2", "2 lines", "3 hypothesis lines"}));
}

TEST(CorpusBleuTest, NoHypothesesOrNoReferencesIsInvalidArgument) {
  EXPECT_TRUE(
      StatusIs(CorpusBleu({}, {{}}).status(), absl::StatusCode::kInvalidArgument, {"hypothesis"}));
  EXPECT_TRUE(StatusIs(CorpusBleu(kHyps, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"reference stream"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
