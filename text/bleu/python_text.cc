#include "text/bleu/python_text.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cstdint>

namespace meshrt {
namespace text {
namespace {

// Marks a byte that does not start a well-formed UTF-8 sequence (not a code point).
constexpr char32_t kInvalid = 0xFFFFFFFF;

struct Range {
  char32_t first;
  char32_t last;
};

constexpr Range kCaseIgnorable[] = {
#include "text/bleu/case_ignorable_ranges.inc"
};

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Decodes the character at text[pos]: its code point, or kInvalid for one stray byte. Returns the
// number of bytes it takes (at least 1). The ranges are those of the Unicode standard's table of
// well-formed byte sequences, which is what Python's strict decoder accepts.
size_t Decode(absl::string_view text, size_t pos, char32_t* cp) {
  const auto byte = [&](size_t i) -> unsigned char {
    return pos + i < text.size() ? static_cast<unsigned char>(text[pos + i]) : 0;
  };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *cp = kInvalid;
    return 1;
  }
  const unsigned char b1 = byte(1);
  if (b1 < lo || b1 > hi) {
    *cp = kInvalid;
    return 1;
  }
  char32_t value = b0 & (0xFF >> (len + 1));
  for (size_t i = 1; i < len; ++i) {
    const unsigned char b = byte(i);
    if (!IsContinuation(b)) {
      *cp = kInvalid;
      return 1;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  return len;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The "C.UTF-8" locale for the Unicode case tables, or null when the system lacks it. Created
// once and never freed (newlocale objects are immutable and safe to share between threads).
locale_t Utf8Locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return locale;
}

bool IsCaseIgnorable(char32_t c) {
  if (c == kInvalid) return false;
  const Range* end = std::end(kCaseIgnorable);
  const Range* it = std::upper_bound(std::begin(kCaseIgnorable), end, c,
                                     [](char32_t v, const Range& r) { return v < r.first; });
  return it != std::begin(kCaseIgnorable) && c <= (it - 1)->last;
}

// Unicode's Cased property for a character that is not case-ignorable (the only ones Python's
// Final_Sigma rule asks about): letters with a case mapping or an upper/lower classification.
bool IsCased(char32_t c, locale_t locale) {
  if (c == kInvalid) return false;
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  if (locale == static_cast<locale_t>(0)) return false;
  const wint_t w = static_cast<wint_t>(c);
  return towlower_l(w, locale) != w || towupper_l(w, locale) != w || iswupper_l(w, locale) ||
         iswlower_l(w, locale);
}

struct Char {
  char32_t cp;
  size_t pos;
  size_t len;
};

// Python's Final_Sigma test for the sigma at chars[i]: a cased letter before it (skipping
// case-ignorable characters) and none after it (likewise).
bool IsFinalSigma(const std::vector<Char>& chars, size_t i, locale_t locale) {
  size_t j = i;
  while (j > 0 && IsCaseIgnorable(chars[j - 1].cp)) --j;
  if (j == 0 || !IsCased(chars[j - 1].cp, locale)) return false;
  size_t k = i + 1;
  while (k < chars.size() && IsCaseIgnorable(chars[k].cp)) ++k;
  return k == chars.size() || !IsCased(chars[k].cp, locale);
}

}  // namespace

size_t FindInvalidUtf8(absl::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const size_t len = Decode(text, pos, &cp);
    if (cp == kInvalid) return pos;
    pos += len;
  }
  return absl::string_view::npos;
}

bool IsPythonSpace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<absl::string_view> SplitPythonWhitespace(absl::string_view text) {
  std::vector<absl::string_view> words;
  size_t pos = 0;
  size_t word_start = absl::string_view::npos;
  while (pos < text.size()) {
    char32_t cp;
    const size_t len = Decode(text, pos, &cp);
    if (IsPythonSpace(cp)) {
      if (word_start != absl::string_view::npos) {
        words.push_back(text.substr(word_start, pos - word_start));
        word_start = absl::string_view::npos;
      }
    } else if (word_start == absl::string_view::npos) {
      word_start = pos;
    }
    pos += len;
  }
  if (word_start != absl::string_view::npos) words.push_back(text.substr(word_start));
  return words;
}

absl::string_view StripTrailingPythonWhitespace(absl::string_view text) {
  size_t keep = 0;  // end of the last non-whitespace character
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const size_t len = Decode(text, pos, &cp);
    pos += len;
    if (!IsPythonSpace(cp)) keep = pos;
  }
  return text.substr(0, keep);
}

std::string LowercasePython(absl::string_view text, bool* full) {
  if (full != nullptr) *full = true;
  std::string out;
  out.reserve(text.size());
  // ASCII text (the common case) needs neither the locale nor the sigma rule.
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    for (char c : text) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    return out;
  }
  std::vector<Char> chars;
  for (size_t pos = 0; pos < text.size();) {
    Char c;
    c.pos = pos;
    c.len = Decode(text, pos, &c.cp);
    chars.push_back(c);
    pos += c.len;
  }
  const locale_t locale = Utf8Locale();
  if (locale == static_cast<locale_t>(0) && full != nullptr) *full = false;
  for (size_t i = 0; i < chars.size(); ++i) {
    const char32_t cp = chars[i].cp;
    if (cp == kInvalid) {
      out.append(text.data() + chars[i].pos, chars[i].len);
    } else if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp - 'A' + 'a' : cp));
    } else if (cp == 0x130) {
      // LATIN CAPITAL LETTER I WITH DOT ABOVE: the one unconditional multi-character mapping.
      out.append("i\xCC\x87");
    } else if (cp == 0x3A3) {
      AppendUtf8(IsFinalSigma(chars, i, locale) ? 0x3C2 : 0x3C3, &out);
    } else if (locale != static_cast<locale_t>(0)) {
      AppendUtf8(static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), locale)), &out);
    } else {
      out.append(text.data() + chars[i].pos, chars[i].len);
    }
  }
  return out;
}

}  // namespace text
}  // namespace meshrt
