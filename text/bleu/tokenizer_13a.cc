#include "text/bleu/tokenizer_13a.h"

#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "text/bleu/python_text.h"

namespace meshrt {
namespace text {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsPeriodOrComma(char c) { return c == '.' || c == ','; }

// The character class of mteval's first rule, [\{-\~\[-\` -\&\(-\+\:-\@\/]: every printable ASCII
// character (and space) except letters, digits, '\'', '-', '.' and ','.
bool IsSplitSymbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// The rules below are regular expressions of exactly two characters whose classes only name
// ASCII characters, applied as Python's re.sub does: leftmost matches, not overlapping, scanning
// on after each match. Working on bytes gives the same result as working on code points: a
// negated class ([^0-9]) accepts every byte of a multi-byte character just as it accepts the
// character, and every match ends or starts on the ASCII character the other class names.
template <typename Matches, typename Replace>
std::string SubstitutePairs(const std::string& in, Matches matches, Replace replace) {
  std::string out;
  out.reserve(in.size() + in.size() / 2);
  size_t i = 0;
  while (i < in.size()) {
    if (i + 1 < in.size() && matches(in[i], in[i + 1])) {
      replace(in[i], in[i + 1], &out);
      i += 2;
    } else {
      out.push_back(in[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string Tokenize13a(absl::string_view line) {
  // Each replacement runs on the previous one's result, as sacreBLEU's chained str.replace calls.
  std::string text = absl::StrReplaceAll(line, {{"<skipped>", ""}});
  text = absl::StrReplaceAll(text, {{"-\n", ""}});
  text = absl::StrReplaceAll(text, {{"\n", " "}});
  if (text.find('&') != std::string::npos) {
    text = absl::StrReplaceAll(text, {{"&quot;", "\""}});
    text = absl::StrReplaceAll(text, {{"&amp;", "&"}});
    text = absl::StrReplaceAll(text, {{"&lt;", "<"}});
    text = absl::StrReplaceAll(text, {{"&gt;", ">"}});
  }

  std::string spaced;
  spaced.reserve(text.size() * 2 + 2);
  spaced.push_back(' ');
  for (char c : text) {
    if (IsSplitSymbol(c)) {
      spaced.push_back(' ');
      spaced.push_back(c);
      spaced.push_back(' ');
    } else {
      spaced.push_back(c);
    }
  }
  spaced.push_back(' ');

  // ([^0-9])([\.,]) -> "\1 \2 "
  spaced = SubstitutePairs(
      spaced, [](char a, char b) { return !IsDigit(a) && IsPeriodOrComma(b); },
      [](char a, char b, std::string* out) {
        out->push_back(a);
        out->push_back(' ');
        out->push_back(b);
        out->push_back(' ');
      });
  // ([\.,])([^0-9]) -> " \1 \2"
  spaced = SubstitutePairs(
      spaced, [](char a, char b) { return IsPeriodOrComma(a) && !IsDigit(b); },
      [](char a, char b, std::string* out) {
        out->push_back(' ');
        out->push_back(a);
        out->push_back(' ');
        out->push_back(b);
      });
  // ([0-9])(-) -> "\1 \2 "
  spaced = SubstitutePairs(
      spaced, [](char a, char b) { return IsDigit(a) && b == '-'; },
      [](char a, char b, std::string* out) {
        out->push_back(a);
        out->push_back(' ');
        out->push_back(b);
        out->push_back(' ');
      });

  return absl::StrJoin(SplitPythonWhitespace(spaced), " ");
}

}  // namespace text
}  // namespace meshrt
