#include "text/corpus/ddtp.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"

namespace meshrt {
namespace text {
namespace {

// A hand-written fixture in the format of the archive's Translation-* files (invented packages).
constexpr char kEnglish[] =
    "Package: frobnicator\n"
    "Description-md5: 00000000000000000000000000000001\n"
    "Description-en: tool to frobnicate widgets\n"
    " Frobnicator turns plain widgets into frobnicated ones. It is fast and\n"
    " small.\n"
    " .\n"
    " Features:\n"
    "  * parallel frobnication\n"
    "  * a command-line interface\n"
    "    with completion\n"
    " .\n"
    " This package contains the main program.\n"
    "\n"
    "Package: frobnicator-data\n"
    "Description-md5: 00000000000000000000000000000002\n"
    "Description-en: data files for frobnicator\n"
    " Frobnicator turns plain widgets into frobnicated ones.\n"
    " .\n"
    " This package contains the data files. They are architecture independent.\n"
    "\n"
    "Package: frobnicator-doc\n"
    "Description-md5: 00000000000000000000000000000003\n"
    "Description-en: documentation for frobnicator\n"
    " This package contains the manual.\n"
    "\n"
    "Package: frobnicator-extra\n"
    "Description-md5: 00000000000000000000000000000001\n"
    "Description-en: tool to frobnicate widgets\n"
    " Frobnicator turns plain widgets into frobnicated ones. It is fast and\n"
    " small.\n"
    "\n"
    "Package: quux\n"
    "Description-md5: 00000000000000000000000000000004\n"
    "Description-en: thing nobody translated\n"
    " Nothing here.\n"
    "\n"
    "Package: broken\n"
    "Description-en: a stanza without its md5\n";

constexpr char kFrench[] =
    "Package: frobnicator\n"
    "Description-md5: 00000000000000000000000000000001\n"
    "Description-fr: outil pour frobniquer des widgets\n"
    " Frobnicator transforme des widgets simples en widgets frobniqu\xC3\xA9s. Il est\n"
    " rapide et petit.\n"
    " .\n"
    " Fonctionnalit\xC3\xA9s\xC2\xA0:\n"
    "  * frobnication parall\xC3\xA8le\n"
    "  * une interface en ligne de commande\n"
    "    avec compl\xC3\xA8tement\n"
    " .\n"
    " Ce paquet contient le programme principal.\n"
    "\n"
    "Package: frobnicator-data\n"
    "Description-md5: 00000000000000000000000000000002\n"
    "Description-fr: fichiers de donn\xC3\xA9"
    "es pour frobnicator\n"
    " Frobnicator transforme des widgets simples en widgets frobniqu\xC3\xA9s.\n"
    " .\n"
    " Ce paquet contient les fichiers de donn\xC3\xA9"
    "es, ind\xC3\xA9pendants de l'architecture.\n"
    "\n"
    "Package: frobnicator-doc\n"
    "Description-md5: 00000000000000000000000000000003\n"
    "Description-fr: documentation pour frobnicator\n"
    " Ce paquet contient le manuel.\n"
    " .\n"
    " Une autre remarque.\n"
    "\n"
    "Package: oldpkg\n"
    "Description-md5: 00000000000000000000000000000005\n"
    "Description-fr: ancien paquet\n"
    " Ancien.\n";

TEST(ParseTranslationFileTest, ReadsStanzasAndCountsMalformedOnes) {
  absl::StatusOr<TranslationFile> f = ParseTranslationFile(kEnglish, "en", "Translation-en");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->stanzas, 6);
  EXPECT_EQ(f->malformed, 1);
  ASSERT_EQ(f->descriptions.size(), 5u);
  const DdtpDescription& d = f->descriptions[0];
  EXPECT_EQ(d.package, "frobnicator");
  EXPECT_EQ(d.md5, "00000000000000000000000000000001");
  EXPECT_EQ(d.short_text, "tool to frobnicate widgets");
  EXPECT_EQ(d.long_text,
            "Frobnicator turns plain widgets into frobnicated ones. It is fast and\nsmall.\n.\n"
            "Features:\n * parallel frobnication\n * a command-line interface\n   with "
            "completion\n.\nThis package contains the main program.");
  // The French file has no Description-en: every stanza is malformed as English.
  absl::StatusOr<TranslationFile> wrong = ParseTranslationFile(kFrench, "en", "Translation-fr");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->malformed, 4);
  EXPECT_TRUE(wrong->descriptions.empty());
  EXPECT_TRUE(StatusIs(ParseTranslationFile(" bad\n", "en", "T-en").status(),
                       absl::StatusCode::kInvalidArgument, {"T-en line 1"}));
}

TEST(SplitParagraphsTest, ProseAndItemBlocks) {
  const std::vector<Paragraph> p = SplitParagraphs(
      "Intro  line one\nline two.\n.\n.\nList:\n * first\n   continued\n- second\n"
      "back to prose\n.\n");
  ASSERT_EQ(p.size(), 2u);  // the empty paragraph between two breaks is left out
  ASSERT_EQ(p[0].size(), 1u);
  EXPECT_EQ(p[0][0].kind, DescriptionBlock::Kind::kProse);
  EXPECT_EQ(p[0][0].text, "Intro line one line two.");
  ASSERT_EQ(p[1].size(), 4u);
  EXPECT_EQ(p[1][0].kind, DescriptionBlock::Kind::kProse);
  EXPECT_EQ(p[1][0].text, "List:");
  EXPECT_EQ(p[1][1].kind, DescriptionBlock::Kind::kItem);
  EXPECT_EQ(p[1][1].text, "first continued");
  EXPECT_EQ(p[1][2].kind, DescriptionBlock::Kind::kItem);
  EXPECT_EQ(p[1][2].text, "second");
  // Not indented past the bullet: prose again.
  EXPECT_EQ(p[1][3].kind, DescriptionBlock::Kind::kProse);
  EXPECT_EQ(p[1][3].text, "back to prose");
  EXPECT_TRUE(SplitParagraphs("").empty());
}

TEST(DdtpPairsTest, JoinsOnMd5AndPairsWhereBothSidesAgree) {
  DdtpStats stats;
  absl::StatusOr<std::vector<SentencePair>> pairs =
      DdtpPairs(kEnglish, kFrench, "fr", "Translation-en", "Translation-fr", DdtpOptions(), &stats);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  const std::vector<SentencePair> want = {
      {"tool to frobnicate widgets", "outil pour frobniquer des widgets"},
      {"Frobnicator turns plain widgets into frobnicated ones.",
       "Frobnicator transforme des widgets simples en widgets frobniqu\xC3\xA9s."},
      {"It is fast and small.", "Il est rapide et petit."},
      {"Features:", "Fonctionnalit\xC3\xA9s\xC2\xA0:"},
      {"parallel frobnication", "frobnication parall\xC3\xA8le"},
      {"a command-line interface with completion",
       "une interface en ligne de commande avec compl\xC3\xA8tement"},
      {"This package contains the main program.", "Ce paquet contient le programme principal."},
      {"data files for frobnicator",
       "fichiers de donn\xC3\xA9"
       "es pour frobnicator"},
      {"Frobnicator turns plain widgets into frobnicated ones.",
       "Frobnicator transforme des widgets simples en widgets frobniqu\xC3\xA9s."},
      // frobnicator-data's second paragraph: 2 English sentences, 1 French: skipped.
      {"documentation for frobnicator", "documentation pour frobnicator"},
      // frobnicator-doc's long text: 1 paragraph against 2: skipped.
  };
  ASSERT_EQ(pairs->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*pairs)[i].en, want[i].en) << i;
    EXPECT_EQ((*pairs)[i].other, want[i].other) << i;
  }
  EXPECT_EQ(stats.en_stanzas, 6);
  EXPECT_EQ(stats.lang_stanzas, 4);
  EXPECT_EQ(stats.malformed_stanzas, 1);
  EXPECT_EQ(stats.en_descriptions, 4);  // md5 ...1 twice counts once
  EXPECT_EQ(stats.lang_descriptions, 4);
  EXPECT_EQ(stats.joined, 3);
  EXPECT_EQ(stats.lang_only, 1);  // oldpkg
  EXPECT_EQ(stats.short_pairs, 3);
  EXPECT_EQ(stats.paragraph_count_mismatch, 1);
  EXPECT_EQ(stats.paragraphs_paired, 5);
  EXPECT_EQ(stats.paragraph_structure_mismatch, 0);
  EXPECT_EQ(stats.items_paired, 2);
  EXPECT_EQ(stats.items_skipped, 0);
  EXPECT_EQ(stats.prose_blocks_paired, 4);
  EXPECT_EQ(stats.sentence_count_mismatch, 1);
  EXPECT_EQ(stats.sentence_pairs, 5);
  EXPECT_EQ(stats.pairs, 10);
}

DdtpDescription Desc(const std::string& short_text, const std::string& long_text) {
  return {"p", "md5", short_text, long_text};
}

TEST(PairDescriptionTest, ParagraphsWhoseListsDisagreeAreSkippedWhole) {
  std::vector<SentencePair> pairs;
  DdtpStats stats;
  // Three items against two; then a list against the same list run into the prose.
  PairDescription(Desc("s", "Features:\n * one\n * two\n.\nModes:\n * fast\n * slow\n.\nEnd."),
                  Desc("t",
                       "Fonctions :\n * un\n - deux\n * trois\n.\nModes : rapide, lent.\n.\n"
                       "Fin."),
                  DdtpOptions(), &pairs, &stats);
  ASSERT_EQ(pairs.size(), 2u);  // the short pair and "End."
  EXPECT_EQ(pairs[1].en, "End.");
  EXPECT_EQ(pairs[1].other, "Fin.");
  EXPECT_EQ(stats.paragraph_structure_mismatch, 2);
  EXPECT_EQ(stats.items_skipped, 4);
  EXPECT_EQ(stats.items_paired, 0);
  EXPECT_EQ(stats.paragraphs_paired, 1);
}

TEST(PairDescriptionTest, DashBulletsPairWithAsteriskBullets) {
  std::vector<SentencePair> pairs;
  DdtpStats stats;
  // "– " (en dash, space), "—\u00A0" (em dash, no-break space) against "* " and "- ".
  PairDescription(Desc("s", "Modes:\n * fast\n - slow"),
                  Desc("t", "Modes :\n \xE2\x80\x93 rapide\n \xE2\x80\x94\xC2\xA0lent"),
                  DdtpOptions(), &pairs, &stats);
  ASSERT_EQ(pairs.size(), 4u);
  EXPECT_EQ(pairs[2].en, "fast");
  EXPECT_EQ(pairs[2].other, "rapide");
  EXPECT_EQ(pairs[3].en, "slow");
  EXPECT_EQ(pairs[3].other, "lent");
  EXPECT_EQ(stats.items_paired, 2);
  // A dash that is not followed by a space is text, not a bullet.
  const std::vector<Paragraph> p = SplitParagraphs("-v prints more\n\xE2\x80\x93text");
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p[0].size(), 1u);
  EXPECT_EQ(p[0][0].kind, DescriptionBlock::Kind::kProse);
}

TEST(PairDescriptionTest, ShortDescriptionsCanBeLeftOut) {
  std::vector<SentencePair> pairs;
  DdtpStats stats;
  DdtpOptions options;
  options.short_descriptions = false;
  PairDescription(Desc("s", "Long one."), Desc("t", "Long un."), options, &pairs, &stats);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].en, "Long one.");
  EXPECT_EQ(stats.short_pairs, 0);
}

TEST(PairDescriptionTest, ParagraphWhoseProseBlocksDifferIsSkipped) {
  std::vector<SentencePair> pairs;
  DdtpStats stats;
  PairDescription(Desc("s", "Intro.\n * item\nOutro.\n.\nLast one."),
                  Desc("t", "Intro.\n * article\n.\nDernier."), DdtpOptions(), &pairs, &stats);
  ASSERT_EQ(pairs.size(), 2u);  // the short pair and the last paragraph
  EXPECT_EQ(pairs[1].en, "Last one.");
  EXPECT_EQ(pairs[1].other, "Dernier.");
  EXPECT_EQ(stats.paragraph_structure_mismatch, 1);
  EXPECT_EQ(stats.paragraphs_paired, 1);
  EXPECT_EQ(stats.pairs, 2);
}

}  // namespace
}  // namespace text
}  // namespace meshrt
