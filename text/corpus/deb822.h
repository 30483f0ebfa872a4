// Debian's RFC-822-style control format ("deb822"), as in the archive's Translation-* and Release
// files and `apt-get indextargets` output: stanzas separated by blank lines, each a list of
// `Name: value` fields whose value may go on over continuation lines starting with a space or
// tab. Pure functions, thread-safe.
#ifndef MESHRT_TEXT_CORPUS_DEB822_H_
#define MESHRT_TEXT_CORPUS_DEB822_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

struct StanzaField {
  std::string name;
  // The text after "Name:" on the field's first line, without surrounding whitespace; then each
  // continuation line, after a '\n', with only its first character (the space or tab) removed,
  // so indentation beyond that is kept.
  std::string value;
};

struct Stanza {
  std::vector<StanzaField> fields;  // in file order
  int line = 0;                     // 1-based line number of the first field

  // The value of the first field called `name` (compared ignoring ASCII case, as Debian does), or
  // nullptr. The pointer lives as long as the stanza is not modified.
  const std::string* Find(absl::string_view name) const;
};

// The stanzas of `text`, in order. Lines that hold only whitespace separate stanzas; a line
// starting with '#' is a comment. A trailing '\r' on a line is ignored. Errors: InvalidArgument
// naming `what` and the line number for a continuation line before any field or a line without a
// ':' after a field name.
absl::StatusOr<std::vector<Stanza>> ParseStanzas(absl::string_view text, absl::string_view what);

// The text of a clearsigned file (an InRelease) without its OpenPGP armour: the lines between
// the armour header's blank line and "-----BEGIN PGP SIGNATURE-----". Text that is not
// clearsigned is returned as it is. The signature is not checked (apt has checked it).
absl::string_view StripClearsign(absl::string_view text);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_DEB822_H_
