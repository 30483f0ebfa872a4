// Shared by text/vocab's tests: a small made-up bilingual corpus and a vocabulary trained on it.
#ifndef MESHRT_TEXT_VOCAB_VOCAB_TEST_UTIL_H_
#define MESHRT_TEXT_VOCAB_VOCAB_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "text/vocab/vocab.h"

namespace meshrt {
namespace text {

inline constexpr int64_t kTestVocabSize = 150;

// Succeeds when `status` has `code` and its message contains every one of `parts` (the installed
// GoogleTest and Abseil lack StatusIs; core/testing has one, but //text sits below //core).
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           const std::vector<std::string>& parts = {}) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got " << status.ToString();
  }
  for (const std::string& p : parts) {
    if (std::string(status.message()).find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << p << "': " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// A new empty directory under TEST_TMPDIR (or /tmp), named `prefix` + a random suffix.
inline std::string MakeTestTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string path = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "XXXXXX";
  EXPECT_NE(mkdtemp(path.data()), nullptr) << path;
  return path;
}

// `lines` sentences of made-up English and French with accents, guillemets and numbers, the same
// every time (a fixed linear congruential generator, not the library's distributions).
inline std::vector<std::string> TestSentences(int lines = 400) {
  const std::vector<std::string> subjects = {
      "the boy",        "a girl",       "my teacher", "le garçon",     "la fille",  "l'élève",
      "our river",      "the garden",   "ce médecin", "notre ville",   "the cat",   "un français",
      "your neighbour", "chaque matin", "the pilot",  "ma grand-mère", "their dog", "le boulanger"};
  const std::vector<std::string> verbs = {"sees",    "sings",   "voit",   "chante",  "reads",
                                          "écrit",   "likes",   "mange",  "built",   "déçoit",
                                          "forgets", "répare",  "paints", "cherche", "follows",
                                          "oublie",  "carries", "préfère"};
  const std::vector<std::string> objects = {
      "the garden",        "a letter",     "«bonjour»",       "la rivière",     "une fenêtre",
      "the old bridge",    "le café noir", "three apples",    "des leçons",     "the summer",
      "l'hiver froid",     "«au revoir»",  "a yellow kite",   "la boîte bleue", "quelques œufs",
      "the quiet harbour", "un gâteau",    "the broken clock"};
  const std::vector<std::string> tails = {
      "",       " today",       " à Noël",  " in 1999",       " at 7 pm",      " depuis 2024",
      " twice", " près du lac", " slowly",  " le 14 juillet", " for 365 days", "",
      " à 8 h", ", hélas",      " in 1848", ", twice"};
  uint64_t state = 42;
  auto pick = [&state](const std::vector<std::string>& v) -> const std::string& {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return v[(state >> 33) % v.size()];
  };
  std::vector<std::string> out;
  for (int i = 0; i < lines; ++i) {
    std::string s = absl::StrCat(pick(subjects), " ", pick(verbs), " ", pick(objects), pick(tails),
                                 i % 3 == 0 ? "." : (i % 3 == 1 ? "!" : " ?"));
    s[0] = static_cast<char>(s[0] >= 'a' && s[0] <= 'z' ? s[0] - 'a' + 'A' : s[0]);
    out.push_back(s);
  }
  return out;
}

inline std::string WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The test corpus as a file in `dir`.
inline std::string WriteTestCorpus(const std::string& dir, const std::string& name = "corpus.txt",
                                   int lines = 400) {
  return WriteFile(absl::StrCat(dir, "/", name), absl::StrJoin(TestSentences(lines), "\n") + "\n");
}

// Options for a small vocabulary of the test corpus.
inline VocabTrainOptions TestOptions(const std::vector<std::string>& inputs) {
  VocabTrainOptions options;
  options.inputs = inputs;
  options.size = kTestVocabSize;
  return options;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_VOCAB_TEST_UTIL_H_
