#include "text/corpus/ddtp_fetch.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"
#include "text/corpus/sha256.h"

namespace meshrt {
namespace text {
namespace {

std::string TestData(const std::string& name) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(dir ? dir : ".", "/", ws ? ws : "meshrt", "/text/corpus/testdata/", name);
}

std::string ReadAll(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

TEST(AptConfigTextTest, ClearsTheSystemsLanguagesAndHooks) {
  const std::string conf = AptConfigText("pt_BR");
  EXPECT_TRUE(absl::StrContains(conf, "#clear Acquire::Languages;\n"));
  EXPECT_TRUE(absl::StrContains(conf, "Acquire::Languages { \"en\"; \"pt_BR\"; };\n"));
  EXPECT_TRUE(absl::StrContains(conf, "#clear APT::Update::Post-Invoke-Success;"));
}

TEST(ParseIndexTargetsTest, ReadsFieldsAndFindsTheInRelease) {
  absl::StatusOr<std::vector<IndexTarget>> t = ParseIndexTargets(
      "MetaKey: main/i18n/Translation-pt_BR\n"
      "URI: http://deb.example/debian/dists/bookworm/main/i18n/Translation-pt_BR\n"
      "Filename: /c/lists/deb.example_debian_dists_bookworm_main_i18n_Translation-pt%5fBR.lz4\n"
      "Fallback-Of: \n"
      "Release: bookworm\n"
      "Component: main\n"
      "Language: pt_BR\n"
      "Identifier: Translations\n"
      "\n"
      "MetaKey: main/i18n/Translation-en\n"
      "Filename: /c/lists/odd-name\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].language, "pt_BR");
  EXPECT_EQ((*t)[0].release, "bookworm");
  EXPECT_EQ((*t)[0].component, "main");
  EXPECT_EQ((*t)[0].identifier, "Translations");
  EXPECT_EQ(InReleasePathFor((*t)[0]), "/c/lists/deb.example_debian_dists_bookworm_InRelease");
  EXPECT_EQ(InReleasePathFor((*t)[1]), "");
}

TEST(ParseReleaseTest, FieldsChecksumsAndLanguages) {
  absl::StatusOr<ReleaseInfo> r = ParseRelease(
      "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n"
      "Origin: Debian\nSuite: oldstable\nVersion: 12.15\nCodename: bookworm\n"
      "Date: Sat, 11 Jul 2026 10:16:37 UTC\n"
      "MD5Sum:\n 0123 10 main/i18n/Translation-en\n"
      "SHA256:\n"
      " aaaa 10 main/i18n/Translation-en\n"
      " bbbb 5 main/i18n/Translation-en.bz2\n"
      " cccc 7 main/i18n/Translation-pt_BR.bz2\n"
      " dddd 7 contrib/i18n/Translation-de\n"
      " eeee 9 main/binary-amd64/Packages\n"
      "-----BEGIN PGP SIGNATURE-----\n\nsig\n-----END PGP SIGNATURE-----\n",
      "InRelease");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Summary(),
            "Origin: Debian, Suite: oldstable, Version: 12.15, Codename: bookworm, "
            "Date: Sat, 11 Jul 2026 10:16:37 UTC");
  EXPECT_EQ(r->sha256_by_path.at("main/i18n/Translation-en"), "aaaa");
  EXPECT_EQ(ReleaseTranslationLanguages(*r, "main"), (std::vector<std::string>{"en", "pt_BR"}));
  EXPECT_TRUE(StatusIs(ParseRelease("A: b\n\nC: d\n", "two.txt").status(),
                       absl::StatusCode::kInvalidArgument, {"two.txt", "one stanza"}));
}

// FetchDdtp with the stand-ins of testdata/ for apt-get and apt-helper.
class FetchDdtpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    archive_ = MakeTempDir("archive");
    cache_ = MakeTempDir("cache") + "/ddtp";
    log_ = MakeTempDir("log") + "/apt.log";
    WriteTestFile(archive_ + "/fake.example_debian_dists_bookworm_main_i18n_Translation-en.lz4",
                  en_);
    WriteTestFile(archive_ + "/fake.example_debian_dists_bookworm_main_i18n_Translation-de.lz4",
                  de_);
    WriteTestFile(
        archive_ + "/fake.example_debian_dists_bookworm_InRelease",
        absl::StrCat("Origin: Fake\nCodename: bookworm\nDate: Mon, 1 Jun 2026\nSHA256:\n ",
                     Sha256Hex(en_), " 10 main/i18n/Translation-en\n ", std::string(64, '0'),
                     " 10 main/i18n/Translation-de\n ", std::string(64, '1'),
                     " 10 main/i18n/Translation-pt_BR.bz2\n"));
    setenv("FAKE_ARCHIVE", archive_.c_str(), 1);
    setenv("FAKE_APT_LOG", log_.c_str(), 1);
    unsetenv("FAKE_APT_FAIL");
    options_.cache_dir = cache_;
    options_.lang = "de";
    options_.apt_get = TestData("fake_apt_get.sh");
    options_.apt_helper = TestData("fake_apt_helper.sh");
  }

  const std::string en_ = "Package: a\nDescription-md5: 1\nDescription-en: thing\n";
  const std::string de_ = "Package: a\nDescription-md5: 1\nDescription-de: Ding\n";
  std::string archive_, cache_, log_;
  DdtpFetchOptions options_;
};

TEST_F(FetchDdtpTest, FetchesIntoThePrivateCacheAndRecordsChecksums) {
  absl::StatusOr<DdtpFetchResult> r = FetchDdtp(options_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->en.text, en_);
  EXPECT_EQ(r->lang.text, de_);
  EXPECT_EQ(r->lang.language, "de");
  EXPECT_EQ(r->en.uri, "http://fake.example/debian/dists/bookworm/main/i18n/Translation-en");
  EXPECT_EQ(r->en.path,
            cache_ + "/lists/fake.example_debian_dists_bookworm_main_i18n_Translation-en.lz4");
  EXPECT_EQ(r->en.compressed_sha256, Sha256Hex(en_));  // the stand-in's files are not compressed
  EXPECT_EQ(r->en.text_sha256, Sha256Hex(en_));
  EXPECT_EQ(r->en.release_sha256, r->en.text_sha256);
  EXPECT_EQ(r->lang.release_sha256, std::string(64, '0'));  // recorded, so a mismatch shows
  EXPECT_EQ(r->release_path, cache_ + "/lists/fake.example_debian_dists_bookworm_InRelease");
  EXPECT_EQ(r->release_summary, "Origin: Fake, Codename: bookworm, Date: Mon, 1 Jun 2026");
  EXPECT_EQ(r->apt_messages, std::vector<std::string>{"W: a warning from the fake"});
  // apt ran against the private configuration, lists and cache only.
  const std::string log = ReadAll(log_);
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("-c\n", cache_, "/apt.conf\n")));
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("Dir::State::Lists=", cache_, "/lists\n")));
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("Dir::Cache=", cache_, "/apt-cache\n")));
  EXPECT_TRUE(absl::StrContains(log, "APT::Sandbox::User=root\n"));
  EXPECT_TRUE(absl::StrContains(
      log, "Acquire::IndexTargets::deb::Packages::DefaultEnabled=false\nupdate\n"));
  EXPECT_TRUE(absl::StrContains(log, "indextargets\nIdentifier: Translations\n"));
  EXPECT_TRUE(absl::StrContains(ReadAll(cache_ + "/apt.conf"), "{ \"en\"; \"de\"; }"));

  // Without update, the cache is reused as it is.
  setenv("FAKE_APT_FAIL", "1", 1);
  options_.update = false;
  absl::StatusOr<DdtpFetchResult> again = FetchDdtp(options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->lang.text_sha256, r->lang.text_sha256);
}

TEST_F(FetchDdtpTest, MissingLanguageIsNotFoundListingWhatThereIs) {
  options_.lang = "fr";
  EXPECT_TRUE(StatusIs(FetchDdtp(options_).status(), absl::StatusCode::kNotFound,
                       {"no Translation-fr", "bookworm/main",
                        "fake.example_debian_dists_bookworm_main_i18n_Translation-de.lz4",
                        "fake.example_debian_dists_bookworm_main_i18n_Translation-en.lz4",
                        "lists these languages: de en pt_BR"}));
}

TEST_F(FetchDdtpTest, AptFailureIsUnavailableWithAptsMessage) {
  setenv("FAKE_APT_FAIL", "1", 1);
  EXPECT_TRUE(StatusIs(FetchDdtp(options_).status(), absl::StatusCode::kUnavailable,
                       {"update", "exit status 100", "Could not resolve fake.example"}));
}

TEST_F(FetchDdtpTest, EmptyCacheWithoutUpdateIsNotFound) {
  options_.update = false;
  EXPECT_TRUE(StatusIs(FetchDdtp(options_).status(), absl::StatusCode::kNotFound,
                       {"Translation-en", "--noupdate"}));
}

TEST_F(FetchDdtpTest, BadLanguageCodeRunsNothing) {
  options_.lang = "de\"; }; Dir \"/";
  EXPECT_TRUE(
      StatusIs(FetchDdtp(options_).status(), absl::StatusCode::kInvalidArgument, {"--lang"}));
  EXPECT_EQ(ReadAll(log_), "");
  options_.lang = "de";
  options_.cache_dir = "";
  EXPECT_TRUE(
      StatusIs(FetchDdtp(options_).status(), absl::StatusCode::kInvalidArgument, {"--cache"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
