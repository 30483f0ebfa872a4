#include "text/corpus/ddtp_fetch.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "text/corpus/deb822.h"
#include "text/corpus/parallel.h"
#include "text/corpus/sha256.h"
#include "text/corpus/subprocess.h"
#include "util/file.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The last lines of `text` (apt's errors come last), joined with "; ".
std::string Tail(absl::string_view text, size_t lines) {
  std::vector<absl::string_view> all =
      absl::StrSplit(absl::StripAsciiWhitespace(text), '\n', absl::SkipWhitespace());
  if (all.size() > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, "; ");
}

// The Translation-* files in the lists directory, by file name.
std::vector<std::string> TranslationFilesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (absl::StrContains(name, "_i18n_Translation-")) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The argv of `apt-get COMMAND` against the private configuration and lists.
std::vector<std::string> AptGetArgs(const DdtpFetchOptions& options,
                                    const std::vector<std::string>& command) {
  std::vector<std::string> argv = {
      options.apt_get,
      "-c",
      absl::StrCat(options.cache_dir, "/apt.conf"),
      "-o",
      absl::StrCat("Dir::State::Lists=", options.cache_dir, "/lists"),
      "-o",
      absl::StrCat("Dir::Cache=", options.cache_dir, "/apt-cache"),
      "-o",
      "APT::Sandbox::User=root",
      "-o",
      "Acquire::IndexTargets::deb::Packages::DefaultEnabled=false",
  };
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

// Reads one target's file: its compressed bytes' checksum, and its text through apt-helper.
absl::StatusOr<DdtpFile> ReadTarget(const DdtpFetchOptions& options, const IndexTarget& target) {
  DdtpFile file;
  file.language = target.language;
  file.uri = target.uri;
  file.path = target.filename;
  ASSIGN_OR_RETURN(const std::string compressed, ReadFile(target.filename));
  file.compressed_bytes = static_cast<int64_t>(compressed.size());
  file.compressed_sha256 = Sha256Hex(compressed);
  ASSIGN_OR_RETURN(ProcessResult cat,
                   RunProcess({options.apt_helper, "cat-file", target.filename}, options.timeout));
  if (cat.exit_code != 0) {
    return absl::InternalError(absl::StrCat(options.apt_helper, " cat-file ", target.filename,
                                            " failed (exit ", cat.exit_code,
                                            "): ", Tail(cat.stderr_text, 3)));
  }
  file.text = std::move(cat.stdout_text);
  file.text_sha256 = Sha256Hex(file.text);
  return file;
}

}  // namespace

std::string AptConfigText(absl::string_view lang) {
  return absl::StrCat(
      "// Written by `meshrt data translations --source ddtp`: fetch the DDTP translations into a\n"
      "// private lists directory (the machine's configuration may turn translations off).\n"
      "#clear Acquire::Languages;\n"
      "Acquire::Languages { \"en\"; \"",
      lang, "\"; };\n",
      "// The system's update hooks (PackageKit, AppStream) are not for a private cache.\n"
      "#clear APT::Update::Pre-Invoke;\n"
      "#clear APT::Update::Post-Invoke;\n"
      "#clear APT::Update::Post-Invoke-Success;\n");
}

absl::StatusOr<std::vector<IndexTarget>> ParseIndexTargets(absl::string_view text) {
  ASSIGN_OR_RETURN(const std::vector<Stanza> stanzas,
                   ParseStanzas(text, "apt-get indextargets output"));
  std::vector<IndexTarget> targets;
  for (const Stanza& s : stanzas) {
    auto get = [&s](absl::string_view name) {
      const std::string* v = s.Find(name);
      return v == nullptr ? std::string() : *v;
    };
    targets.push_back({get("MetaKey"), get("URI"), get("Filename"), get("Release"),
                       get("Component"), get("Language"), get("Identifier")});
  }
  return targets;
}

std::string InReleasePathFor(const IndexTarget& target) {
  // apt's URItoFileName: '_' (and other specials) %-escaped, then '/' → '_'.
  const std::string escaped =
      absl::StrReplaceAll(absl::StrReplaceAll(target.meta_key, {{"_", "%5f"}}), {{"/", "_"}});
  if (escaped.empty()) return "";
  const size_t at = target.filename.rfind(escaped);
  if (at == std::string::npos) return "";
  return absl::StrCat(target.filename.substr(0, at), "InRelease");
}

std::string ReleaseInfo::Summary() const {
  std::vector<std::string> parts;
  for (const char* name : {"Origin", "Label", "Suite", "Version", "Codename", "Date"}) {
    auto it = fields.find(name);
    if (it != fields.end()) parts.push_back(absl::StrCat(name, ": ", it->second));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<ReleaseInfo> ParseRelease(absl::string_view text, absl::string_view what) {
  ASSIGN_OR_RETURN(const std::vector<Stanza> stanzas, ParseStanzas(StripClearsign(text), what));
  if (stanzas.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected one stanza, found ", stanzas.size()));
  }
  ReleaseInfo info;
  for (const StanzaField& f : stanzas[0].fields) {
    if (f.name == "SHA256") {
      // " HEX SIZE PATH" per line; the first line (the field's own) is empty.
      for (absl::string_view line : absl::StrSplit(f.value, '\n', absl::SkipWhitespace())) {
        std::vector<absl::string_view> words =
            absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
        if (words.size() == 3) info.sha256_by_path[std::string(words[2])] = std::string(words[0]);
      }
    } else if (f.value.find('\n') == std::string::npos) {
      info.fields[f.name] = f.value;
    }
  }
  return info;
}

std::vector<std::string> ReleaseTranslationLanguages(const ReleaseInfo& release,
                                                     absl::string_view component) {
  const std::string prefix = absl::StrCat(component, "/i18n/Translation-");
  std::set<std::string> languages;
  for (const auto& entry : release.sha256_by_path) {
    absl::string_view path = entry.first;
    if (!absl::ConsumePrefix(&path, prefix)) continue;
    languages.insert(std::string(path.substr(0, path.find('.'))));
  }
  return std::vector<std::string>(languages.begin(), languages.end());
}

absl::StatusOr<DdtpFetchResult> FetchDdtp(const DdtpFetchOptions& options) {
  RETURN_IF_ERROR(ValidateLangCode(options.lang));
  if (options.cache_dir.empty()) return absl::InvalidArgumentError("--cache must not be empty");
  const std::string lists = absl::StrCat(options.cache_dir, "/lists");
  RETURN_IF_ERROR(MakeDirs(absl::StrCat(lists, "/partial")));
  RETURN_IF_ERROR(MakeDirs(absl::StrCat(options.cache_dir, "/apt-cache")));
  RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(options.cache_dir, "/apt.conf"),
                                      AptConfigText(options.lang)));
  DdtpFetchResult result;
  if (options.update) {
    ASSIGN_OR_RETURN(ProcessResult update,
                     RunProcess(AptGetArgs(options, {"update"}), options.timeout));
    for (absl::string_view out : {update.stdout_text, update.stderr_text}) {
      for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
        if (absl::StartsWith(line, "W:") || absl::StartsWith(line, "E:") ||
            absl::StartsWith(line, "Err:")) {
          result.apt_messages.emplace_back(line);
        }
      }
    }
    if (update.exit_code != 0) {
      return absl::UnavailableError(absl::StrCat(
          options.apt_get, " update (cache ", options.cache_dir, ") failed with exit status ",
          update.exit_code, ": ", Tail(update.stderr_text + update.stdout_text, 4)));
    }
  }
  ASSIGN_OR_RETURN(ProcessResult listed,
                   RunProcess(AptGetArgs(options, {"indextargets", "Identifier: Translations"}),
                              options.timeout));
  if (listed.exit_code != 0) {
    return absl::InternalError(absl::StrCat(options.apt_get, " indextargets failed (exit ",
                                            listed.exit_code, "): ", Tail(listed.stderr_text, 3)));
  }
  ASSIGN_OR_RETURN(const std::vector<IndexTarget> targets, ParseIndexTargets(listed.stdout_text));
  const IndexTarget* en = nullptr;
  const IndexTarget* lang = nullptr;
  for (const IndexTarget& t : targets) {
    if (t.release != options.codename || t.component != options.component || !Exists(t.filename)) {
      continue;
    }
    if (t.language == "en" && en == nullptr) en = &t;
    if (t.language == options.lang && lang == nullptr) lang = &t;
  }
  const std::string where = absl::StrCat(options.codename, "/", options.component);
  if (en == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no DDTP Translation-en for ", where, " in the cache ", lists,
        options.update
            ? absl::StrCat(" after apt-get update (apt said: ",
                           result.apt_messages.empty() ? std::string("nothing wrong")
                                                       : absl::StrJoin(result.apt_messages, "; "),
                           ")")
            : std::string(" (run without --noupdate to fetch it)")));
  }
  result.release_path = InReleasePathFor(*en);
  if (!Exists(result.release_path)) {
    const std::string release =
        absl::StrCat(absl::StripSuffix(result.release_path, "InRelease"), "Release");
    result.release_path = Exists(release) ? release : "";
  }
  ReleaseInfo release;
  if (!result.release_path.empty()) {
    ASSIGN_OR_RETURN(const std::string release_text, ReadFile(result.release_path));
    result.release_sha256 = Sha256Hex(release_text);
    ASSIGN_OR_RETURN(release, ParseRelease(release_text, result.release_path));
    result.release_summary = release.Summary();
  }
  if (lang == nullptr) {
    const std::vector<std::string> offered =
        ReleaseTranslationLanguages(release, options.component);
    const std::vector<std::string> present = TranslationFilesIn(lists);
    return absl::NotFoundError(absl::StrCat(
        "DDTP has no Translation-", options.lang, " for ", where,
        options.update ? " after apt-get update" : " in the cache (run without --noupdate)",
        "; the cache ", lists, " holds ",
        present.empty() ? std::string("no Translation-* files") : absl::StrJoin(present, ", "),
        offered.empty() ? std::string()
                        : absl::StrCat("; the archive's Release file lists these languages: ",
                                       absl::StrJoin(offered, " "))));
  }
  ASSIGN_OR_RETURN(result.en, ReadTarget(options, *en));
  ASSIGN_OR_RETURN(result.lang, ReadTarget(options, *lang));
  for (DdtpFile* file : {&result.en, &result.lang}) {
    auto it = release.sha256_by_path.find(
        absl::StrCat(options.component, "/i18n/Translation-", file->language));
    if (it != release.sha256_by_path.end()) file->release_sha256 = it->second;
  }
  return result;
}

}  // namespace text
}  // namespace meshrt
