// The few Python 3 `str` operations sacreBLEU relies on, on UTF-8 text, with Python's meaning:
// which characters are whitespace for str.split() and str.rstrip(), what str.lower() does, and
// which bytes Python's strict "utf-8" codec accepts. sacreBLEU's scores depend on these details (a
// no-break space separates tokens, "ΣΑΣ".lower() ends in a final sigma), so BLEU built on plain
// ASCII helpers would disagree with it on non-English text.
//
// Every function is thread-safe. Ill-formed UTF-8 is never rejected here: each byte of an
// ill-formed sequence counts as one non-whitespace character and is copied unchanged (check input
// with FindInvalidUtf8 first where that matters).
#ifndef MESHRT_TEXT_BLEU_PYTHON_TEXT_H_
#define MESHRT_TEXT_BLEU_PYTHON_TEXT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

// Byte offset of the first sequence Python's strict "utf-8" codec rejects (overlong forms,
// surrogates, code points above U+10FFFF, truncated or stray continuation bytes), or
// absl::string_view::npos when `text` is well-formed.
size_t FindInvalidUtf8(absl::string_view text);

// Whether code point `c` is whitespace for Python's str.isspace(), str.split() and str.rstrip():
// \t \n \v \f \r, U+001C..U+001F, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
bool IsPythonSpace(char32_t c);

// str.split() without arguments: the maximal runs of non-whitespace, as views into `text`.
std::vector<absl::string_view> SplitPythonWhitespace(absl::string_view text);

// str.rstrip() without arguments: `text` without its trailing whitespace.
absl::string_view StripTrailingPythonWhitespace(absl::string_view text);

// str.lower(): Unicode lowercase mapping, including the two context rules Python applies (U+0130
// becomes "i" + U+0307; U+03A3 becomes final sigma U+03C2 at the end of a word). Simple mappings
// come from the C library's "C.UTF-8" locale (the same Unicode tables as Python on this system);
// without that locale only ASCII letters are lowered and `*full` is set to false when the text
// had a non-ASCII character (the caller reports it). `full` may be null.
std::string LowercasePython(absl::string_view text, bool* full = nullptr);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_BLEU_PYTHON_TEXT_H_
