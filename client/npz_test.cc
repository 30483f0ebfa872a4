#include "client/npz.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "client/file_bytes.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using ::testing::HasSubstr;

Tensor Floats(std::vector<Dim> dims, std::vector<float> v) { return Tensor::Float(Shape(dims), v); }

void ExpectArray(const NpyArray& a, DType dtype, std::vector<int64_t> dims, const Tensor& want) {
  EXPECT_EQ(a.dtype, dtype);
  EXPECT_EQ(a.dims, dims);
  ASSERT_EQ(a.data.size(), static_cast<size_t>(want.num_elements()) * 4);
  const void* src = want.dtype() == DType::kFloat32 ? static_cast<const void*>(want.f32())
                                                    : static_cast<const void*>(want.i32());
  EXPECT_EQ(a.data, std::string(static_cast<const char*>(src), a.data.size()));
}

std::map<std::string, Tensor> Sample() {
  return {
      {"odd", Floats({{"a", 3}, {"b", 5}, {"c", 1}},
                     {0.5f, -1.25f, 3e-8f, 1e30f, -0.0f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})},
      {"layer_0/w", Tensor::Int(Shape({{"x", 7}}), {1, -2, 3, 2147483647, -2147483647 - 1, 0, 9})},
      {"scalar", Tensor::Float(Shape({}), {2.5f})},
      {"empty", Tensor(DType::kFloat32, Shape({{"n", 0}, {"m", 3}}))},
  };
}

void ExpectSample(const std::map<std::string, NpyArray>& got) {
  const std::map<std::string, Tensor> want = Sample();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, t] : want) {
    ASSERT_TRUE(got.count(key)) << key;
    ExpectArray(got.at(key), t.dtype(), t.shape().Sizes(), t);
  }
}

TEST(NpzTest, RoundTripsFloatsIntsScalarsEmptyArraysAndSlashedNames) {
  for (bool zip64 : {false, true}) {
    NpzWriteOptions options;
    options.force_zip64 = zip64;
    ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz(Sample(), options));
    ASSERT_OK_AND_ASSIGN(auto got, ParseNpz(bytes, "x.npz"));
    ExpectSample(got);
  }
}

TEST(NpzTest, EmptyArchiveRoundTrips) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz({}));
  EXPECT_EQ(bytes.size(), 22u);  // only the end of central directory record
  ASSERT_OK_AND_ASSIGN(auto got, ParseNpz(bytes, "x.npz"));
  EXPECT_TRUE(got.empty());
}

TEST(NpzTest, RefusesAnEmptyKey) {
  auto s = EncodeNpz({{"", Tensor::Float(Shape({}), {1})}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

// A byte of a member's data changed: its CRC-32 no longer matches.
TEST(NpzTest, CorruptedDataFailsTheCrc) {
  ASSERT_OK_AND_ASSIGN(std::string bytes,
                       EncodeNpz({{"w", Floats({{"a", 4}}, {1, 2, 3, 4})}}));
  // The member's data ends 4 bytes before its central directory entry (46 + "w.npy") and the end
  // record (22): flip a byte of the last float.
  bytes[bytes.size() - 22 - 46 - 5 - 1] ^= 0x40;
  auto s = ParseNpz(bytes, "w.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), HasSubstr("w.npz: member 'w.npy'"));
  EXPECT_THAT(s.status().message(), HasSubstr("CRC-32"));
}

TEST(NpzTest, TruncatedArchivesAreDataLoss) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz(Sample()));
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{10}}) {
    auto s = ParseNpz(bytes.substr(0, keep), "t.npz");
    EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_THAT(s.status().message(), HasSubstr("t.npz"));
  }
  // A member's data cut short, the records after it intact: the directory no longer fits.
  ASSERT_OK_AND_ASSIGN(std::string one, EncodeNpz({{"w", Floats({{"a", 4}}, {1, 2, 3, 4})}}));
  one.erase(one.size() - 22 - 51 - 8, 8);  // 8 bytes of data gone, directory offsets now wrong
  EXPECT_FALSE(ParseNpz(one, "c.npz").ok());
}

TEST(NpzTest, NotAZipFileIsInvalidArgument) {
  auto s = ParseNpz("\x93NUMPY this is an .npy, not an .npz", "x.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("x.npz: not a .npz file"));
}

// Rewrites the 2-byte field at `offset` of the central directory entry and the local header of
// the single member of `bytes` (one member, no ZIP64).
void PatchBoth(std::string* bytes, size_t local_offset, size_t central_offset, uint16_t v) {
  const size_t central = bytes->size() - 22 - (46 + 5);  // "w.npy" / "w.txt"
  for (size_t at : {local_offset, central + central_offset}) {
    (*bytes)[at] = static_cast<char>(v & 0xff);
    (*bytes)[at + 1] = static_cast<char>(v >> 8);
  }
}

TEST(NpzTest, UnsupportedCompressionIsInvalidArgumentNamingTheMember) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz({{"w", Floats({{"a", 2}}, {1, 2})}}));
  PatchBoth(&bytes, 8, 10, 12);  // bzip2
  auto s = ParseNpz(bytes, "b.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("member 'w.npy': compression method 12"));
}

TEST(NpzTest, BadSignatureIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz({{"w", Floats({{"a", 2}}, {1, 2})}}));
  bytes[1] = 'X';  // the local header's "PK\3\4"
  auto s = ParseNpz(bytes, "b.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("member 'w.npy': bad local header signature"));
}

TEST(NpzTest, MemberNamesMustEndInNpyAndBeUnique) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz({{"w", Floats({{"a", 2}}, {1, 2})}}));
  std::string txt = bytes;
  for (size_t at = 0; (at = txt.find("w.npy", at)) != std::string::npos;) txt.replace(at, 5, "w.txt");
  auto s = ParseNpz(txt, "n.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("member 'w.txt'"));

  // Two members both named "w.npy": "v" and "w" renamed.
  ASSERT_OK_AND_ASSIGN(std::string two, EncodeNpz({{"v", Floats({{"a", 1}}, {1})},
                                                   {"w", Floats({{"a", 1}}, {2})}}));
  for (size_t at = 0; (at = two.find("v.npy", at)) != std::string::npos;) two.replace(at, 5, "w.npy");
  s = ParseNpz(two, "d.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("key 'w' appears twice"));
}

// A member whose .npy holds float64 (CRC fixed up): ParseNpy's error, naming the member.
TEST(NpzTest, MemberThatIsNotASupportedNpyIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeNpz({{"w", Floats({{"a", 2}}, {1, 2})}}));
  const size_t descr = bytes.find("<f4");
  ASSERT_NE(descr, std::string::npos);
  bytes[descr + 2] = '8';
  const size_t data = 30 + 5, central = bytes.size() - 22 - (46 + 5);
  const uLong crc =
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data() + data), central - data);
  for (size_t at : {size_t{14}, central + 16}) {
    for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  }
  auto s = ParseNpz(bytes, "f.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("f.npz: member 'w.npy'"));
  EXPECT_THAT(s.status().message(), HasSubstr("<f8"));
}

std::string TestData(const std::string& name) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(dir ? dir : ".", "/", ws ? ws : "meshrt", "/client/testdata/", name);
}

// The fixtures were written by NumPy 1.24 (python3-numpy) with
//   arrays = {"a": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
//             "layer_0/w": np.array([[1, -2], [3, 40000]], np.int32),
//             "scalar": np.float32(3.25), "empty": np.zeros((0, 3), np.float32)}
//   np.savez("numpy_savez.npz", **arrays)
//   np.savez_compressed("numpy_savez_compressed.npz", **arrays)
TEST(NpzTest, ReadsWhatNumpyWrites) {
  for (const char* file : {"numpy_savez.npz", "numpy_savez_compressed.npz"}) {
    ASSERT_OK_AND_ASSIGN(auto got, ReadNpz(TestData(file)));
    ASSERT_EQ(got.size(), 4u) << file;
    ExpectArray(got.at("a"), DType::kFloat32, {2, 3},
                Floats({{"r", 2}, {"c", 3}}, {-1, -0.5f, 0, 0.5f, 1, 1.5f}));
    ExpectArray(got.at("layer_0/w"), DType::kInt32, {2, 2},
                Tensor::Int(Shape({{"r", 2}, {"c", 2}}), {1, -2, 3, 40000}));
    ExpectArray(got.at("scalar"), DType::kFloat32, {}, Tensor::Float(Shape({}), {3.25f}));
    ExpectArray(got.at("empty"), DType::kFloat32, {0, 3},
                Tensor(DType::kFloat32, Shape({{"n", 0}, {"m", 3}})));
  }
}

TEST(NpzTest, CorruptedDeflateStreamIsDataLoss) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileBytes(TestData("numpy_savez_compressed.npz")));
  // The first member's data starts after its local header (30 bytes, "a.npy", a 20-byte ZIP64
  // extra field numpy writes): damage the deflate stream there.
  for (int i = 0; i < 8; ++i) bytes[30 + 5 + 20 + 2 + i] ^= 0x5a;
  auto s = ParseNpz(bytes, "z.npz");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), HasSubstr("z.npz: member 'a.npy'"));
}

// NumPy reads what we write, plain and with ZIP64 records, and finds the same values.
TEST(NpzTest, NumpyReadsWhatWeWrite) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  for (bool zip64 : {false, true}) {
    const std::string path = absl::StrCat(tmp ? tmp : "/tmp", "/ours", zip64, ".npz");
    NpzWriteOptions options;
    options.force_zip64 = zip64;
    ASSERT_OK(WriteNpz(path, Sample(), options));
    const std::string script = absl::StrCat(
        "import numpy as np, zipfile\n"
        "assert zipfile.ZipFile('", path, "').testzip() is None\n"
        "f = np.load('", path, "')\n"
        "assert sorted(f.files) == ['empty', 'layer_0/w', 'odd', 'scalar'], f.files\n"
        "o = f['odd']\n"
        "assert o.dtype == np.float32 and o.shape == (3, 5, 1)\n"
        "assert o[0, 1, 0] == np.float32(-1.25) and o[2, 4, 0] == 10 and o[0, 3, 0] == np.float32(1e30)\n"
        "w = f['layer_0/w']\n"
        "assert w.dtype == np.int32 and w.tolist() == [1, -2, 3, 2**31 - 1, -2**31, 0, 9]\n"
        "assert f['scalar'].shape == () and f['scalar'] == 2.5\n"
        "assert f['empty'].shape == (0, 3) and f['empty'].dtype == np.float32\n");
    const std::string script_path = path + ".py";
    ASSERT_OK(WriteFileBytes(script_path, script));
    EXPECT_EQ(std::system(("/usr/bin/python3 " + script_path).c_str()), 0) << "zip64=" << zip64;
  }
}

}  // namespace
}  // namespace meshrt
