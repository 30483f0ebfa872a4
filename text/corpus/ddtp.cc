#include "text/corpus/ddtp.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "text/corpus/deb822.h"
#include "text/corpus/sentences.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

// The length in bytes of the bullet that `t` starts with (the mark and one space after it), or
// 0. Marks: * - + and the bullet and dash characters translators use instead (• – — −); the space
// may be an ASCII space or tab, a no-break space or one of the Unicode spaces U+2000-U+200A and
// U+202F.
size_t BulletLength(absl::string_view t) {
  static constexpr absl::string_view kMarks[] = {
      "*", "-", "+", "\xE2\x80\xA2", "\xE2\x80\x93", "\xE2\x80\x94", "\xE2\x88\x92"};
  for (absl::string_view mark : kMarks) {
    if (!absl::StartsWith(t, mark)) continue;
    const absl::string_view rest = t.substr(mark.size());
    if (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) return mark.size() + 1;
    if (absl::StartsWith(rest, "\xC2\xA0")) return mark.size() + 2;
    if (rest.size() >= 3 && absl::StartsWith(rest, "\xE2\x80")) {
      const unsigned char c = static_cast<unsigned char>(rest[2]);
      if ((c >= 0x80 && c <= 0x8A) || c == 0xAF) return mark.size() + 3;  // U+2000-200A, 202F
    }
    return 0;
  }
  return 0;
}

size_t Indent(absl::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  return i;
}

std::vector<DescriptionBlock::Kind> Kinds(const Paragraph& p) {
  std::vector<DescriptionBlock::Kind> kinds;
  for (const DescriptionBlock& b : p) kinds.push_back(b.kind);
  return kinds;
}

void PairProse(const std::string& en, const std::string& other, std::vector<SentencePair>* out,
               DdtpStats* stats) {
  std::vector<std::string> en_sentences = SplitSentences(en);
  std::vector<std::string> other_sentences = SplitSentences(other);
  if (en_sentences.size() != other_sentences.size()) {
    ++stats->sentence_count_mismatch;
    return;
  }
  ++stats->prose_blocks_paired;
  for (size_t i = 0; i < en_sentences.size(); ++i) {
    out->push_back({std::move(en_sentences[i]), std::move(other_sentences[i])});
    ++stats->sentence_pairs;
    ++stats->pairs;
  }
}

void PairParagraph(const Paragraph& en, const Paragraph& other, std::vector<SentencePair>* out,
                   DdtpStats* stats) {
  if (Kinds(en) != Kinds(other)) {
    // Lists that disagree, or a list on one side only (often a list written inline as prose):
    // even the prose around it may hold different text, so nothing of the paragraph is paired.
    ++stats->paragraph_structure_mismatch;
    for (const DescriptionBlock& b : en) {
      if (b.kind == DescriptionBlock::Kind::kItem) ++stats->items_skipped;
    }
    return;
  }
  ++stats->paragraphs_paired;
  for (size_t i = 0; i < en.size(); ++i) {
    if (en[i].kind == DescriptionBlock::Kind::kItem) {
      out->push_back({en[i].text, other[i].text});
      ++stats->items_paired;
      ++stats->pairs;
    } else {
      PairProse(en[i].text, other[i].text, out, stats);
    }
  }
}

}  // namespace

absl::StatusOr<TranslationFile> ParseTranslationFile(absl::string_view text, absl::string_view lang,
                                                     absl::string_view what) {
  ASSIGN_OR_RETURN(std::vector<Stanza> stanzas, ParseStanzas(text, what));
  const std::string description_field = absl::StrCat("Description-", lang);
  TranslationFile file;
  file.stanzas = static_cast<int64_t>(stanzas.size());
  for (Stanza& stanza : stanzas) {
    const std::string* md5 = stanza.Find("Description-md5");
    const std::string* description = stanza.Find(description_field);
    if (md5 == nullptr || description == nullptr || md5->empty()) {
      ++file.malformed;
      continue;
    }
    DdtpDescription d;
    const std::string* package = stanza.Find("Package");
    if (package != nullptr) d.package = *package;
    d.md5 = *md5;
    const size_t newline = description->find('\n');
    d.short_text = description->substr(0, newline);
    if (newline != std::string::npos) d.long_text = description->substr(newline + 1);
    file.descriptions.push_back(std::move(d));
  }
  return file;
}

std::vector<Paragraph> SplitParagraphs(absl::string_view long_text) {
  std::vector<Paragraph> paragraphs;
  Paragraph current;
  size_t item_indent = 0;  // the indentation of the current item's bullet
  auto finish_paragraph = [&]() {
    for (DescriptionBlock& b : current) b.text = NormalizeWhitespace(b.text);
    if (!current.empty()) paragraphs.push_back(std::move(current));
    current = Paragraph();
  };
  for (absl::string_view line : absl::StrSplit(long_text, '\n')) {
    if (absl::StripAsciiWhitespace(line) == ".") {
      finish_paragraph();
      continue;
    }
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const size_t indent = Indent(line);
    const absl::string_view rest = line.substr(indent);
    const size_t bullet = BulletLength(rest);
    if (bullet > 0) {
      current.push_back({DescriptionBlock::Kind::kItem, std::string(rest.substr(bullet))});
      item_indent = indent;
      continue;
    }
    const bool continues_item = !current.empty() &&
                                current.back().kind == DescriptionBlock::Kind::kItem &&
                                indent > item_indent;
    if (!continues_item &&
        (current.empty() || current.back().kind != DescriptionBlock::Kind::kProse)) {
      current.push_back({DescriptionBlock::Kind::kProse, ""});
    }
    absl::StrAppend(&current.back().text, " ", rest);
  }
  finish_paragraph();
  return paragraphs;
}

void PairDescription(const DdtpDescription& en, const DdtpDescription& other,
                     const DdtpOptions& options, std::vector<SentencePair>* out, DdtpStats* stats) {
  if (options.short_descriptions) {
    out->push_back({NormalizeWhitespace(en.short_text), NormalizeWhitespace(other.short_text)});
    ++stats->short_pairs;
    ++stats->pairs;
  }
  const std::vector<Paragraph> en_paragraphs = SplitParagraphs(en.long_text);
  const std::vector<Paragraph> other_paragraphs = SplitParagraphs(other.long_text);
  if (en_paragraphs.size() != other_paragraphs.size()) {
    ++stats->paragraph_count_mismatch;
    return;
  }
  for (size_t i = 0; i < en_paragraphs.size(); ++i) {
    PairParagraph(en_paragraphs[i], other_paragraphs[i], out, stats);
  }
}

absl::StatusOr<std::vector<SentencePair>> DdtpPairs(absl::string_view en_text,
                                                    absl::string_view lang_text,
                                                    absl::string_view lang,
                                                    absl::string_view en_what,
                                                    absl::string_view lang_what,
                                                    const DdtpOptions& options, DdtpStats* stats) {
  ASSIGN_OR_RETURN(const TranslationFile en, ParseTranslationFile(en_text, "en", en_what));
  ASSIGN_OR_RETURN(const TranslationFile other, ParseTranslationFile(lang_text, lang, lang_what));
  stats->en_stanzas += en.stanzas;
  stats->lang_stanzas += other.stanzas;
  stats->malformed_stanzas += en.malformed + other.malformed;

  absl::flat_hash_map<absl::string_view, const DdtpDescription*> translations;
  for (const DdtpDescription& d : other.descriptions) translations.emplace(d.md5, &d);
  stats->lang_descriptions += static_cast<int64_t>(translations.size());

  std::vector<SentencePair> pairs;
  absl::flat_hash_set<absl::string_view> english_seen;  // md5s of the English file
  for (const DdtpDescription& d : en.descriptions) {
    if (!english_seen.insert(d.md5).second) continue;
    auto found = translations.find(d.md5);
    if (found == translations.end()) continue;
    ++stats->joined;
    PairDescription(d, *found->second, options, &pairs, stats);
  }
  stats->en_descriptions += static_cast<int64_t>(english_seen.size());
  for (const auto& entry : translations) {
    if (!english_seen.contains(entry.first)) ++stats->lang_only;
  }
  return pairs;
}

}  // namespace text
}  // namespace meshrt
