#include "text/corpus/deb822.h"

#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"

namespace meshrt {
namespace text {
namespace {

TEST(ParseStanzasTest, FieldsContinuationsAndBlankLines) {
  const char* text =
      "Package: alpha\n"
      "Description-en: short text  \n"
      " first line\n"
      "   indented more\n"
      " .\n"
      "\n"
      "\n"
      "# a comment\n"
      "Package: beta\r\n"
      "Empty:\n";
  absl::StatusOr<std::vector<Stanza>> s = ParseStanzas(text, "t.txt");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].line, 1);
  ASSERT_NE((*s)[0].Find("package"), nullptr);  // names ignore case
  EXPECT_EQ(*(*s)[0].Find("Package"), "alpha");
  EXPECT_EQ(*(*s)[0].Find("Description-en"), "short text\nfirst line\n  indented more\n.");
  EXPECT_EQ((*s)[1].line, 9);
  EXPECT_EQ(*(*s)[1].Find("Package"), "beta");
  EXPECT_EQ(*(*s)[1].Find("Empty"), "");
  EXPECT_EQ((*s)[1].Find("Missing"), nullptr);
}

TEST(ParseStanzasTest, ErrorsNameTheFileAndLine) {
  EXPECT_TRUE(StatusIs(ParseStanzas(" continuation first\n", "a.txt").status(),
                       absl::StatusCode::kInvalidArgument, {"a.txt line 1", "continuation"}));
  EXPECT_TRUE(StatusIs(ParseStanzas("Package: x\nno colon here\n", "b.txt").status(),
                       absl::StatusCode::kInvalidArgument, {"b.txt line 2", "no colon here"}));
}

TEST(StripClearsignTest, RemovesTheArmour) {
  const char* signed_text =
      "-----BEGIN PGP SIGNED MESSAGE-----\n"
      "Hash: SHA256\n"
      "\n"
      "Origin: Example\n"
      "Date: today\n"
      "-----BEGIN PGP SIGNATURE-----\n"
      "\n"
      "abcdef\n"
      "-----END PGP SIGNATURE-----\n";
  EXPECT_EQ(StripClearsign(signed_text), "Origin: Example\nDate: today");
  EXPECT_EQ(StripClearsign("Origin: Plain\n"), "Origin: Plain\n");
}

}  // namespace
}  // namespace text
}  // namespace meshrt
