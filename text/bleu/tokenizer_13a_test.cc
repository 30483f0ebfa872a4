// sacreBLEU publishes no tests of its 13a tokenizer, so each expected string here is worked out by
// hand from the rules in its sacrebleu/tokenizers/tokenizer_13a.py and tokenizer_re.py (the
// comment names the rule), not taken from this code's output. BLEU values that depend on the
// tokenizer are checked against sacreBLEU's published scores in bleu_test.cc.
#include "text/bleu/tokenizer_13a.h"

#include "gtest/gtest.h"

namespace meshrt {
namespace text {
namespace {

TEST(Tokenize13aTest, SplitsFinalPeriodButNotApostrophe) {
  // README example segments: "'" is outside every class; '.' after a letter is split off.
  EXPECT_EQ(Tokenize13a("The dog bit the man."), "The dog bit the man .");
  EXPECT_EQ(Tokenize13a("It wasn't surprising."), "It wasn't surprising .");
}

TEST(Tokenize13aTest, KeepsNumbersWithSeparators) {
  // '.' and ',' stay between digits; '$' is in the symbol class; the final '.' follows a digit
  // but precedes a space, so the third rule splits it.
  EXPECT_EQ(Tokenize13a("costs $1,000.50."), "costs $ 1,000.50 .");
  EXPECT_EQ(Tokenize13a("1,000,000 items, 2.5%"), "1,000,000 items , 2.5 %");
  EXPECT_EQ(Tokenize13a("v1.0."), "v1.0 .");
  // A '.' after a non-digit is split from both sides even before a digit (second rule).
  EXPECT_EQ(Tokenize13a("costs .5"), "costs . 5");
}

TEST(Tokenize13aTest, SplitsDashOnlyAfterDigit) {
  EXPECT_EQ(Tokenize13a("3-4 well-known"), "3 - 4 well-known");
}

TEST(Tokenize13aTest, RepeatedPeriodsAndAbbreviations) {
  EXPECT_EQ(Tokenize13a("..."), ". . .");
  EXPECT_EQ(Tokenize13a("U.S.A."), "U . S . A .");
  EXPECT_EQ(Tokenize13a("Hello, world!"), "Hello , world !");
}

TEST(Tokenize13aTest, EverySymbolOfTheFirstRule) {
  EXPECT_EQ(Tokenize13a("(a)[b]{c}/d\\e|f~g^h_i`j@k?l=m;n:o+p*q#r%s\"t&u<v>w!x"),
            "( a ) [ b ] { c } / d \\ e | f ~ g ^ h _ i ` j @ k ? l = m ; n : o + p * q # r % s "
            "\" t & u < v > w ! x");
}

TEST(Tokenize13aTest, UnescapesEntitiesOneAfterAnother) {
  EXPECT_EQ(Tokenize13a("&quot;Hi&quot; &amp; &lt;b&gt;"), "\" Hi \" & < b >");
  // &amp; becomes '&' before &lt; is replaced.
  EXPECT_EQ(Tokenize13a("&amp;lt;"), "<");
}

TEST(Tokenize13aTest, SkippedMarkersAndLineBreaks) {
  EXPECT_EQ(Tokenize13a("<skipped> ok"), "ok");
  EXPECT_EQ(Tokenize13a("line-\nbreak a\nb"), "linebreak a b");
}

TEST(Tokenize13aTest, LeavesNonAsciiPunctuationAndSplitsAtUnicodeSpace) {
  EXPECT_EQ(Tokenize13a("\u201cHi\u201d na\u00efve caf\u00e9."),
            "\u201cHi\u201d na\u00efve caf\u00e9 .");
  // No-break space and ideographic space are whitespace for Python's str.split(); the zero-width
  // space U+200B is not.
  EXPECT_EQ(Tokenize13a("a\u00a0b\u3000c\u200bd"), "a b c\u200bd");
}

TEST(Tokenize13aTest, EmptyAndBlankLines) {
  EXPECT_EQ(Tokenize13a(""), "");
  EXPECT_EQ(Tokenize13a("  \t "), "");
}

}  // namespace
}  // namespace text
}  // namespace meshrt
