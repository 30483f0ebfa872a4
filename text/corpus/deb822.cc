#include "text/corpus/deb822.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace meshrt {
namespace text {

const std::string* Stanza::Find(absl::string_view name) const {
  for (const StanzaField& f : fields) {
    if (absl::EqualsIgnoreCase(f.name, name)) return &f.value;
  }
  return nullptr;
}

absl::StatusOr<std::vector<Stanza>> ParseStanzas(absl::string_view text, absl::string_view what) {
  std::vector<Stanza> stanzas;
  Stanza current;
  int line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) {
      if (!current.fields.empty()) stanzas.push_back(std::move(current));
      current = Stanza();
      continue;
    }
    if (line[0] == '#') continue;
    if (line[0] == ' ' || line[0] == '\t') {
      if (current.fields.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " line ", line_number,
                         ": a continuation line (starting with a space) before any "
                         "field"));
      }
      std::string& value = current.fields.back().value;
      value.push_back('\n');
      value.append(line.data() + 1, line.size() - 1);
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " line ", line_number, ": expected 'Name: value', got '", line.substr(0, 80), "'"));
    }
    if (current.fields.empty()) current.line = line_number;
    current.fields.push_back({std::string(line.substr(0, colon)),
                              std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)))});
  }
  if (!current.fields.empty()) stanzas.push_back(std::move(current));
  return stanzas;
}

absl::string_view StripClearsign(absl::string_view text) {
  constexpr absl::string_view kBegin = "-----BEGIN PGP SIGNED MESSAGE-----";
  constexpr absl::string_view kSignature = "\n-----BEGIN PGP SIGNATURE-----";
  if (!absl::StartsWith(text, kBegin)) return text;
  // The armour headers ("Hash: SHA256") end at the first blank line.
  size_t body = text.find("\n\n");
  if (body == absl::string_view::npos) return absl::string_view();
  body += 2;
  size_t end = text.find(kSignature, body);
  if (end == absl::string_view::npos) end = text.size();
  return text.substr(body, end - body);
}

}  // namespace text
}  // namespace meshrt
