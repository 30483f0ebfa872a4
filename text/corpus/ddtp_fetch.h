// FetchDdtp: downloads the DDTP files (the archive's dists/SUITE/COMPONENT/i18n/Translation-en and
// Translation-LANG) with apt-get into a private cache, without touching the system's apt
// configuration or state, and returns their text with checksums to record.
//
// How: writes CACHE/apt.conf (Acquire::Languages en and LANG, which the machine's apt
// configuration may turn off; no update hooks), then runs
//   apt-get -c CACHE/apt.conf -o Dir::State::Lists=CACHE/lists -o Dir::Cache=CACHE/apt-cache
//           -o APT::Sandbox::User=root -o
//           Acquire::IndexTargets::deb::Packages::DefaultEnabled=false update
// against the machine's sources list (so its mirror is used), asks
// `apt-get ... indextargets` which files hold the translations, and decompresses them with
// `apt-helper cat-file`. Programs run with fixed argument vectors (subprocess.h); the language
// code is validated first. Not thread-safe for one cache directory (apt locks it; a second
// concurrent fetch fails with apt's error).
#ifndef MESHRT_TEXT_CORPUS_DDTP_FETCH_H_
#define MESHRT_TEXT_CORPUS_DDTP_FETCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace meshrt {
namespace text {

struct DdtpFetchOptions {
  std::string lang;                   // the translation's language code (ValidateLangCode)
  std::string cache_dir;              // holds apt.conf, lists/ and apt-cache/; created when missing
  bool update = true;                 // false: use the files the cache already holds (no network)
  std::string codename = "bookworm";  // the release whose files are used (indextargets' Release)
  std::string component = "main";
  std::string apt_get = "apt-get";  // the programs (tests substitute stand-ins)
  std::string apt_helper = "/usr/lib/apt/apt-helper";
  absl::Duration timeout = absl::Minutes(10);  // for each program run
};

// One translation file as used.
struct DdtpFile {
  std::string language;
  std::string uri;   // where apt fetched it from (without compression suffix)
  std::string path;  // the file in the cache (as apt keeps it, usually .lz4-compressed)
  int64_t compressed_bytes = 0;
  std::string compressed_sha256;
  std::string text;  // the decompressed file
  std::string text_sha256;
  // The SHA256 that the Release file lists for the uncompressed file, "" when it lists none. The
  // text's own checksum equals it when the file is what the archive published.
  std::string release_sha256;
};

struct DdtpFetchResult {
  DdtpFile en;
  DdtpFile lang;
  std::string release_path;               // the (In)Release file of the suite, in the cache
  std::string release_sha256;             // of that file
  std::string release_summary;            // "Origin: Debian, Suite: ..., Version: ..., Date: ..."
  std::vector<std::string> apt_messages;  // apt's warning and error lines ("W: ...", "Err: ...")
};

// Fetches (or, without `update`, reads from the cache) the English and LANG files. Errors:
// InvalidArgument for a bad language code or empty cache_dir; Unavailable when apt-get fails
// (with its message); NotFound naming the language, the Translation-* files the cache holds and
// the languages the archive's Release file lists when there is no Translation-LANG; NotFound
// naming the cache when there is no Translation-en (with apt's messages); I/O errors naming paths.
absl::StatusOr<DdtpFetchResult> FetchDdtp(const DdtpFetchOptions& options);

// The private apt configuration (pure; exposed for tests).
std::string AptConfigText(absl::string_view lang);

// One stanza of `apt-get indextargets` output (the fields used).
struct IndexTarget {
  std::string meta_key;  // "main/i18n/Translation-fr"
  std::string uri;
  std::string filename;  // the file in the lists directory (it may not exist)
  std::string release;   // the suite's codename, "bookworm" or "bookworm-updates"
  std::string component;
  std::string language;
  std::string identifier;  // "Translations"
};

// Errors: those of ParseStanzas (deb822.h), naming "apt-get indextargets output".
absl::StatusOr<std::vector<IndexTarget>> ParseIndexTargets(absl::string_view text);

// The InRelease file in the same lists directory as `target`'s file: apt names lists files after
// their URI, so it is the target's file name with the escaped MetaKey (and compression suffix)
// replaced by "InRelease". "" when the file name does not contain the MetaKey.
std::string InReleasePathFor(const IndexTarget& target);

// The fields of a (In)Release file this code uses.
struct ReleaseInfo {
  std::map<std::string, std::string> fields;          // Origin, Suite, Version, Codename, Date...
  std::map<std::string, std::string> sha256_by_path;  // "main/i18n/Translation-fr" → hex
  // "Origin: Debian, Label: Debian, Suite: oldstable, Version: 12.15, Codename: bookworm, Date:
  // ...", the fields present.
  std::string Summary() const;
};

// Parses a Release or (clearsigned) InRelease file. Errors: InvalidArgument naming `what` when it
// is not one deb822 stanza.
absl::StatusOr<ReleaseInfo> ParseRelease(absl::string_view text, absl::string_view what);

// The language codes of the Translation files the Release file lists for `component`, sorted.
std::vector<std::string> ReleaseTranslationLanguages(const ReleaseInfo& release,
                                                     absl::string_view component);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_DDTP_FETCH_H_
