// EncodeLinesToNpy: the exact bytes of a tiny case (header, EOS, truncation, padding), its
// statistics, and its errors; the header as util/npy_header.h and NumPy read it.
#include "text/vocab/encode_npy.h"

#include <cstdio>

#include "absl/strings/str_split.h"
#include "text/vocab/text_file.h"
#include "text/vocab/vocab_test_util.h"
#include "util/npy_header.h"

namespace meshrt {
namespace text {
namespace {

std::string Int32Bytes(const std::vector<int32_t>& values) {
  std::string out;
  for (const int32_t v : values) {
    const auto u = static_cast<uint32_t>(v);
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((u >> (8 * b)) & 0xff));
  }
  return out;
}

class EncodeNpyTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestTempDir("encode_npy_test"));
    const std::string model = *dir_ + "/test.model";
    const absl::Status trained = TrainVocab(TestOptions({WriteTestCorpus(*dir_)}), model);
    ASSERT_TRUE(trained.ok()) << trained;
    absl::StatusOr<Vocab> vocab = Vocab::Load(model);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    vocab_ = new Vocab(*std::move(vocab));
  }

  static std::string* dir_;
  static Vocab* vocab_;
};

std::string* EncodeNpyTest::dir_ = nullptr;
Vocab* EncodeNpyTest::vocab_ = nullptr;

TEST(NpyInt32HeaderTest, IsNumPyVersion1PaddedTo64Bytes) {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }";
  // 10 + 59 + 1 bytes do not fit in 64: 128, as NumPy 1.24 writes it too (header length 118).
  const std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict +
                               std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  ASSERT_EQ(expected.size(), 128u);
  EXPECT_EQ(NpyInt32Header({3, 4}), expected);

  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0, 7}, {1, 1}, {123456789012, 65536}, {5, 100000}}) {
    const std::string header = NpyInt32Header(dims);
    EXPECT_EQ(header.size() % 64, 0u);
    EXPECT_EQ(header.back(), '\n');
    absl::StatusOr<NpyHeader> parsed = ParseNpyHeader(header, "header");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->descr, "<i4");
    EXPECT_FALSE(parsed->fortran_order);
    EXPECT_EQ(parsed->dims, dims);
    EXPECT_EQ(parsed->data_offset, header.size());
  }
}

TEST_F(EncodeNpyTest, WritesEosTruncatesAndPads) {
  const std::vector<int32_t> a = vocab_->Encode("the cat");
  const std::vector<int32_t> b = vocab_->Encode("Le garçon voit «bonjour» à Noël depuis 2024.");
  constexpr int64_t kLength = 5;
  ASSERT_LE(a.size() + 1, static_cast<size_t>(kLength)) << "the short line must fit";
  ASSERT_GT(b.size() + 1, static_cast<size_t>(kLength)) << "the long line must be truncated";
  // CRLF endings, an empty line, no newline at the end.
  const std::string text =
      WriteFile(*dir_ + "/tiny.txt", "the cat\r\n\nLe garçon voit «bonjour» à Noël depuis 2024.");
  const std::string npy = *dir_ + "/tiny.npy";
  EncodeStats stats;
  ASSERT_TRUE(EncodeLinesToNpy(*vocab_, text, kLength, npy, &stats).ok());

  std::vector<int32_t> rows = a;
  rows.push_back(1);
  rows.resize(kLength, 0);
  rows.insert(rows.end(), {1, 0, 0, 0, 0});
  rows.insert(rows.end(), b.begin(), b.begin() + kLength - 1);
  rows.push_back(1);
  const std::string header = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 5), }" +
                             std::string(128 - 10 - 59 - 1, ' ') + "\n";
  const std::string bytes = ReadBytes(npy);
  EXPECT_EQ(bytes, header + Int32Bytes(rows));

  absl::StatusOr<NpyHeader> parsed = ParseNpyHeader(bytes, npy);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(bytes.size(), parsed->data_offset + 3 * 5 * 4);

  EXPECT_EQ(stats.lines, 3);
  EXPECT_EQ(stats.truncated, 1);
  EXPECT_EQ(stats.tokens, static_cast<int64_t>(a.size()) + 1 + 1 + kLength);
  EXPECT_EQ(stats.max_tokens, static_cast<int64_t>(b.size()) + 1);
  EXPECT_EQ(stats.median_tokens, static_cast<double>(a.size() + 1));
}

TEST_F(EncodeNpyTest, AnEmptyFileHasNoRows) {
  const std::string npy = *dir_ + "/empty.npy";
  EncodeStats stats;
  ASSERT_TRUE(EncodeLinesToNpy(*vocab_, WriteFile(*dir_ + "/empty.txt", ""), 8, npy, &stats).ok());
  EXPECT_EQ(ReadBytes(npy), NpyInt32Header({0, 8}));
  EXPECT_EQ(stats.lines, 0);
  EXPECT_EQ(stats.median_tokens, 0);
}

TEST_F(EncodeNpyTest, LengthOneHoldsOnlyEos) {
  const std::string npy = *dir_ + "/one.npy";
  EncodeStats stats;
  ASSERT_TRUE(
      EncodeLinesToNpy(*vocab_, WriteFile(*dir_ + "/two.txt", "the cat\n\n"), 1, npy, &stats).ok());
  EXPECT_EQ(ReadBytes(npy), NpyInt32Header({2, 1}) + Int32Bytes({1, 1}));
  EXPECT_EQ(stats.truncated, 1);
  EXPECT_EQ(stats.tokens, 2);
}

TEST_F(EncodeNpyTest, ErrorsNameTheFileAndLeaveNoOutput) {
  const std::string npy = *dir_ + "/bad.npy";
  const std::string text = WriteFile(*dir_ + "/ok.txt", "the cat\n");
  EXPECT_TRUE(StatusIs(EncodeLinesToNpy(*vocab_, text, 0, npy, nullptr),
                       absl::StatusCode::kInvalidArgument, {"--length 0"}));
  EXPECT_TRUE(StatusIs(EncodeLinesToNpy(*vocab_, *dir_ + "/missing.txt", 4, npy, nullptr),
                       absl::StatusCode::kNotFound, {*dir_ + "/missing.txt"}));
  const std::string latin1 = WriteFile(*dir_ + "/latin1.txt", "the cat\nle gar\xE7on\n");
  EXPECT_TRUE(StatusIs(EncodeLinesToNpy(*vocab_, latin1, 4, npy, nullptr),
                       absl::StatusCode::kInvalidArgument,
                       {latin1 + ":2 is not valid UTF-8 (byte 7 of the line)"}));
  EXPECT_TRUE(StatusIs(EncodeLinesToNpy(*vocab_, text, 4, *dir_ + "/no/dir/x.npy", nullptr),
                       absl::StatusCode::kNotFound, {*dir_ + "/no/dir/x.npy"}));
  EXPECT_EQ(ReadBytes(npy), "");
  EXPECT_EQ(fopen(npy.c_str(), "rb"), nullptr);
}

TEST(Utf8Test, AcceptsUtf8AndFindsTheFirstBadByte) {
  size_t bad = 0;
  EXPECT_TRUE(IsValidUtf8("plain ascii", &bad));
  EXPECT_TRUE(IsValidUtf8("é ç «» 漢 \xF0\x9F\x98\x80", &bad));
  EXPECT_FALSE(IsValidUtf8("ab\xE7on", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF", &bad));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80", &bad));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80", &bad));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ok\xE2\x81", &bad));        // cut short
  EXPECT_EQ(bad, 2u);
}

// NumPy itself loads the file (python3-numpy, from tools/setup.sh).
TEST_F(EncodeNpyTest, NumPyLoadsTheFile) {
  const std::string text = WriteFile(*dir_ + "/numpy.txt", "the cat\n\nLe garçon voit\n");
  const std::string npy = *dir_ + "/numpy.npy";
  ASSERT_TRUE(EncodeLinesToNpy(*vocab_, text, 6, npy, nullptr).ok());
  const std::string command = absl::StrCat(
      "/usr/bin/python3 -c \"import numpy, sys; a = numpy.load(sys.argv[1]); "
      "print(a.dtype, a.shape, a.flags['C_CONTIGUOUS'], ' '.join(map(str, a.ravel())))\" ",
      npy, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << output;
  std::vector<int32_t> rows;
  for (const std::string line : {"the cat", "", "Le garçon voit"}) {
    std::vector<int32_t> ids = vocab_->Encode(line);
    if (ids.size() > 5) ids.resize(5);
    ids.push_back(1);
    ids.resize(6, 0);
    rows.insert(rows.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(output, absl::StrCat("int32 (3, 6) True ", absl::StrJoin(rows, " "), "\n"));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
