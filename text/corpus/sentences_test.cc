#include "text/corpus/sentences.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace text {
namespace {

using Sentences = std::vector<std::string>;

TEST(NormalizeWhitespaceTest, CollapsesAsciiWhitespaceOnly) {
  EXPECT_EQ(NormalizeWhitespace("  a\t b\n\nc \r\n"), "a b c");
  EXPECT_EQ(NormalizeWhitespace(""), "");
  EXPECT_EQ(NormalizeWhitespace(" \t\n"), "");
  // The no-break space before French punctuation stays.
  EXPECT_EQ(NormalizeWhitespace("Bonjour\xC2\xA0!"), "Bonjour\xC2\xA0!");
}

TEST(CountWordsTest, Counts) {
  EXPECT_EQ(CountWords(""), 0);
  EXPECT_EQ(CountWords("one"), 1);
  EXPECT_EQ(CountWords("  two words\there "), 3);
}

TEST(IsValidUtf8Test, AcceptsAndRejects) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("d\xC3\xA9j\xC3\xA0 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("caf\xE9"));           // Latin-1
}

TEST(LooksDoubleEncodedTest, FindsMojibakeOnly) {
  EXPECT_TRUE(LooksDoubleEncoded("fonctionnalit\xC3\x83\xC2\xA9s"));       // "Ã©"
  EXPECT_TRUE(LooksDoubleEncoded("suivantes\xC3\x82\xC2\xA0:"));           // "Â" + NBSP
  EXPECT_TRUE(LooksDoubleEncoded("it\xC3\xA2\xE2\x82\xAC\xE2\x84\xA2s"));  // "â€™"
  EXPECT_FALSE(LooksDoubleEncoded("fonctionnalit\xC3\xA9s"));              // "é"
  EXPECT_FALSE(LooksDoubleEncoded("S\xC3\x83O PAULO"));                    // "SÃO"
  EXPECT_FALSE(LooksDoubleEncoded("\xC3\xA2ge, \xE2\x82\xAC"));            // "âge, €"
}

TEST(SplitSentencesTest, SplitsAtTerminatorSpaceCapital) {
  EXPECT_EQ(SplitSentences("It runs fast. It is small! Is it? Yes."),
            (Sentences{"It runs fast.", "It is small!", "Is it?", "Yes."}));
  EXPECT_EQ(SplitSentences(""), Sentences{});
  EXPECT_EQ(SplitSentences("No terminator at all"), Sentences{"No terminator at all"});
}

TEST(SplitSentencesTest, DoesNotSplitBeforeLowercaseDigitsOrInsideTokens) {
  EXPECT_EQ(SplitSentences("Version 2.0 is out. see foo.conf for more."),
            Sentences{"Version 2.0 is out. see foo.conf for more."});
  EXPECT_EQ(SplitSentences("It has 3 modes. 2 are new."), Sentences{"It has 3 modes. 2 are new."});
}

TEST(SplitSentencesTest, KeepsAbbreviationsAndInitials) {
  EXPECT_EQ(SplitSentences("Formats, e.g. PNG and JPEG, work. Written by Donald E. Knuth."),
            (Sentences{"Formats, e.g. PNG and JPEG, work.", "Written by Donald E. Knuth."}));
  EXPECT_EQ(SplitSentences("Voir p.ex. Debian. Siehe z.B. Ubuntu."),
            (Sentences{"Voir p.ex. Debian.", "Siehe z.B. Ubuntu."}));
  // An abbreviation with inner dots that is not listed ends a sentence before a capital.
  EXPECT_EQ(SplitSentences("It dates from 500 A.D. The rest is new."),
            (Sentences{"It dates from 500 A.D.", "The rest is new."}));
}

TEST(SplitSentencesTest, QuotesBracketsAndNonAsciiCapitals) {
  EXPECT_EQ(SplitSentences("He said \"stop.\" Then he left."),
            (Sentences{"He said \"stop.\"", "Then he left."}));
  EXPECT_EQ(
      SplitSentences("C'est fini. \xC3\x89tape suivante. \xC2\xAB Le jeu \xC2\xBB est l\xC3\xA0."),
      (Sentences{"C'est fini.", "\xC3\x89tape suivante.",
                 "\xC2\xAB Le jeu \xC2\xBB est l\xC3\xA0."}));
  EXPECT_EQ(SplitSentences("Hola. \xC2\xBFQu\xC3\xA9 tal? Bien."),
            (Sentences{"Hola.", "\xC2\xBFQu\xC3\xA9 tal?", "Bien."}));
  // Cyrillic capital after a full stop.
  EXPECT_EQ(SplitSentences("\xD0\x9E\xD0\xBD\xD0\xB0. \xD0\x9E\xD0\xBD."),
            (Sentences{"\xD0\x9E\xD0\xBD\xD0\xB0.", "\xD0\x9E\xD0\xBD."}));
  EXPECT_EQ(SplitSentences("Wait... What? Really?! Yes."),
            (Sentences{"Wait...", "What?", "Really?!", "Yes."}));
}

TEST(SplitSentencesTest, CjkTerminatorsNeedNoSpace) {
  // 。 after each clause.
  EXPECT_EQ(SplitSentences("\xE4\xB8\x80\xE3\x80\x82\xE4\xBA\x8C\xE3\x80\x82"),
            (Sentences{"\xE4\xB8\x80\xE3\x80\x82", "\xE4\xBA\x8C\xE3\x80\x82"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
