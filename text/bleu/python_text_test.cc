// Expected values are Python 3's documented str behaviour (str.isspace/split/rstrip, str.lower()
// with Unicode's SpecialCasing: U+0130 and Final_Sigma) and the UTF-8 well-formedness table of the
// Unicode standard, which Python's strict decoder follows.
#include "text/bleu/python_text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace meshrt {
namespace text {
namespace {

std::vector<std::string> Split(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view w : SplitPythonWhitespace(text)) out.emplace_back(w);
  return out;
}

TEST(PythonTextTest, Whitespace) {
  for (char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000,
                     0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}) {
    EXPECT_TRUE(IsPythonSpace(c)) << std::hex << c;
  }
  for (char32_t c : {0x00, 0x08, 0x21, 0x200B, 0x180E, 0xFEFF, 0x41}) {
    EXPECT_FALSE(IsPythonSpace(c)) << std::hex << c;
  }
}

TEST(PythonTextTest, SplitAndStrip) {
  EXPECT_EQ(Split("  a\u00a0b\tc\u2028d\u200be  "),
            (std::vector<std::string>{"a", "b", "c", "d\u200be"}));
  EXPECT_TRUE(Split(" \r\n").empty());
  EXPECT_EQ(StripTrailingPythonWhitespace("x y \r\n\u3000"), "x y");
  EXPECT_EQ(StripTrailingPythonWhitespace(" lead"), " lead");
}

TEST(PythonTextTest, IllFormedBytesAreWordCharacters) {
  EXPECT_EQ(Split("a\xff b"), (std::vector<std::string>{"a\xff", "b"}));
  // C2 A0 is a no-break space; a lone A0 byte is not.
  const std::string lone_a0 = std::string("a\xa0") + "b";
  EXPECT_EQ(Split(lone_a0), (std::vector<std::string>{lone_a0}));
}

TEST(PythonTextTest, LowercaseSpecialCases) {
  EXPECT_EQ(LowercasePython("Hello WORLD"), "hello world");
  EXPECT_EQ(LowercasePython("\u00c9T\u00c9 \u0416"), "\u00e9t\u00e9 \u0436");
  // U+0130 lowercases to "i" + COMBINING DOT ABOVE.
  EXPECT_EQ(LowercasePython("\u0130stanbul"), "i\u0307stanbul");
  // Final sigma at the end of a word, also before case-ignorable characters ('.', '\'', U+0301).
  EXPECT_EQ(LowercasePython("\u039f\u0394\u039f\u03a3"), "\u03bf\u03b4\u03bf\u03c2");
  EXPECT_EQ(LowercasePython("\u03a3\u0391\u03a3 \u03a3\u0391\u03a3"),
            "\u03c3\u03b1\u03c2 \u03c3\u03b1\u03c2");
  EXPECT_EQ(LowercasePython("\u0391\u03a3."), "\u03b1\u03c2.");
  EXPECT_EQ(LowercasePython("\u0391\u03a3'"), "\u03b1\u03c2'");
  // Not final: alone, or followed (past ignorable characters) by a letter.
  EXPECT_EQ(LowercasePython("\u03a3"), "\u03c3");
  EXPECT_EQ(LowercasePython("\u0391\u03a3.\u0391"), "\u03b1\u03c3.\u03b1");
  EXPECT_EQ(LowercasePython("\u0391\u03a3\u0301\u0392"), "\u03b1\u03c3\u0301\u03b2");
}

TEST(PythonTextTest, FindInvalidUtf8) {
  EXPECT_EQ(FindInvalidUtf8("plain \u00e9\u20ac\U0001F600"), absl::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8(""), absl::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("\xc0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(FindInvalidUtf8("ab\xed\xa0\x80"), 2u);    // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ok\xe2\x82"), 2u);        // truncated
  EXPECT_EQ(FindInvalidUtf8("x\x80"), 1u);             // stray continuation byte
  EXPECT_EQ(FindInvalidUtf8("\xe0\x9f\xbf"), 0u);      // overlong three-byte form
}

}  // namespace
}  // namespace text
}  // namespace meshrt
