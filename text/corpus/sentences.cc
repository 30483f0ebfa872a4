#include "text/corpus/sentences.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

// The code point at text[i] and its length in bytes; a malformed sequence reads as U+FFFD of
// length 1 (the splitter only needs to recognise a few characters, never to reject text).
uint32_t Decode(absl::string_view text, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  int extra = 0;
  uint32_t cp = 0;
  if (c < 0x80) {
    *len = 1;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    extra = 1;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    extra = 2;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    extra = 3;
    cp = c & 0x07;
  } else {
    *len = 1;
    return 0xFFFD;
  }
  if (i + extra >= text.size()) {
    *len = 1;
    return 0xFFFD;
  }
  for (int k = 1; k <= extra; ++k) {
    const unsigned char cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xC0) != 0x80) {
      *len = 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *len = 1 + extra;
  return cp;
}

bool IsTerminator(uint32_t cp) { return cp == '.' || cp == '!' || cp == '?' || cp == 0x2026; }

// 。！？: end a sentence whatever follows (these scripts put no space after them).
bool IsCjkTerminator(uint32_t cp) { return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; }

bool IsClosing(uint32_t cp) {
  switch (cp) {
    case '"':
    case '\'':
    case ')':
    case ']':
    case '}':
    case 0x00BB:
    case 0x2019:
    case 0x201D:
    case 0x300D:
    case 0x300F:
    case 0xFF09:
      return true;
    default:
      return false;
  }
}

bool IsOpening(uint32_t cp) {
  switch (cp) {
    case '"':
    case '\'':
    case '(':
    case '[':
    case 0x00AB:
    case 0x00A1:
    case 0x00BF:
    case 0x2018:
    case 0x201C:
    case 0x201E:
      return true;
    default:
      return false;
  }
}

// Capital letters of the Latin (Basic, Latin-1, Extended-A), Greek and Cyrillic blocks.
bool IsUpper(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return true;
  if (cp >= 0xC0 && cp <= 0xDE) return cp != 0xD7;
  if (cp >= 0x100 && cp <= 0x137) return cp % 2 == 0;
  if (cp >= 0x139 && cp <= 0x148) return cp % 2 == 1;
  if (cp >= 0x14A && cp <= 0x177) return cp % 2 == 0;
  if (cp == 0x178) return true;
  if (cp >= 0x179 && cp <= 0x17E) return cp % 2 == 1;
  if (cp == 0x386 || (cp >= 0x388 && cp <= 0x38F) || (cp >= 0x391 && cp <= 0x3AB)) {
    return cp != 0x38B && cp != 0x38D && cp != 0x3A2;
  }
  return cp >= 0x400 && cp <= 0x42F;
}

// Words whose final '.' does not end a sentence (compared in ASCII lower case).
bool IsAbbreviation(absl::string_view word) {
  static constexpr absl::string_view kAbbreviations[] = {
      "e.g.", "i.e.", "cf.",  "vs.",  "mr.",     "mrs.",  "ms.",   "dr.",   "prof.", "st.",
      "no.",  "nr.",  "vol.", "fig.", "approx.", "incl.", "resp.", "ca.",   "z.b.",  "d.h.",
      "u.a.", "bzw.", "vgl.", "ggf.", "evtl.",   "inkl.", "sog.",  "p.ex.", "ex.",   "c.-à-d.",
      "mme.", "env.", "pp.",  "sr.",  "jr.",     "sp.",   "eg.",   "ie."};
  const std::string lower = absl::AsciiStrToLower(word);
  for (absl::string_view a : kAbbreviations) {
    if (lower == a) return true;
  }
  return false;
}

// Whether the '.' at text[dot] ends an abbreviation or an initial: the word it ends (back to the
// previous space, without opening brackets or quotes) is a listed abbreviation or one letter.
bool DotEndsAbbreviation(absl::string_view text, size_t dot) {
  size_t begin = dot;
  while (begin > 0 && text[begin - 1] != ' ') --begin;
  while (begin < dot && (text[begin] == '(' || text[begin] == '"' || text[begin] == '\'')) ++begin;
  const absl::string_view word = text.substr(begin, dot + 1 - begin);
  if (word.size() == 2 && absl::ascii_isalpha(static_cast<unsigned char>(word[0]))) return true;
  if (word.size() == 3 || word.size() == 4) {
    // One non-ASCII letter (2 or 3 bytes) before the dot: an initial such as "É."
    size_t len = 0;
    const uint32_t cp = Decode(word, 0, &len);
    if (len == word.size() - 1 && cp >= 0x80 && cp != 0xFFFD) return true;
  }
  return IsAbbreviation(word);
}

// Whether a new sentence starts at text[k]: a capital letter, possibly after an opening quote or
// bracket and a space (French "« Le").
bool StartsSentence(absl::string_view text, size_t k) {
  if (k >= text.size()) return false;
  size_t len = 0;
  uint32_t cp = Decode(text, k, &len);
  if (IsOpening(cp)) {
    k += len;
    if (k >= text.size()) return false;
    cp = Decode(text, k, &len);
    if (cp == ' ' || cp == 0xA0 || cp == 0x202F) {
      k += len;
      if (k >= text.size()) return false;
      cp = Decode(text, k, &len);
    }
  }
  return IsUpper(cp);
}

void Emit(absl::string_view text, size_t begin, size_t end, std::vector<std::string>* out) {
  const absl::string_view s = absl::StripAsciiWhitespace(text.substr(begin, end - begin));
  if (!s.empty()) out->emplace_back(s);
}

}  // namespace

std::string NormalizeWhitespace(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (IsAsciiSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

int CountWords(absl::string_view text) {
  int words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = IsAsciiSpace(c);
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

bool IsValidUtf8(absl::string_view bytes) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i <= static_cast<size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += 1 + extra;
  }
  return true;
}

bool LooksDoubleEncoded(absl::string_view text) {
  // In bytes: C3 83 or C3 82 ('Ã', 'Â') then C2 80..BF; or C3 A2 E2 82 AC ("â€").
  for (size_t i = 0; i + 3 < text.size(); ++i) {
    if (text[i] != '\xC3') continue;
    const unsigned char b1 = static_cast<unsigned char>(text[i + 1]);
    const unsigned char b3 = static_cast<unsigned char>(text[i + 3]);
    if ((b1 == 0x83 || b1 == 0x82) && text[i + 2] == '\xC2' && b3 >= 0x80 && b3 <= 0xBF) {
      return true;
    }
    if (b1 == 0xA2 && text.substr(i + 2, 3) == "\xE2\x82\xAC") return true;
  }
  return false;
}

std::vector<std::string> SplitSentences(absl::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    size_t len = 0;
    const uint32_t cp = Decode(text, i, &len);
    if (!IsTerminator(cp) && !IsCjkTerminator(cp)) {
      i += len;
      continue;
    }
    // The end of the terminator cluster: more terminators ("?!", "...") and closing marks.
    size_t j = i + len;
    while (j < n) {
      size_t l2 = 0;
      const uint32_t c2 = Decode(text, j, &l2);
      if (!IsTerminator(c2) && !IsCjkTerminator(c2) && !IsClosing(c2)) break;
      j += l2;
    }
    const bool ends = IsCjkTerminator(cp)
                          ? true
                          : j < n && text[j] == ' ' && StartsSentence(text, j + 1) &&
                                !(cp == '.' && DotEndsAbbreviation(text, i));
    if (ends) {
      Emit(text, start, j, &out);
      start = j;
    }
    i = j;
  }
  Emit(text, start, n, &out);
  return out;
}

}  // namespace text
}  // namespace meshrt
