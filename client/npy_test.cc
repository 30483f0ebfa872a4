#include "client/npy.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// A v1.0 file with `header` (unpadded dict text) and `data`, written the long way so the tests do
// not depend on EncodeNpy.
std::string HandWritten(const std::string& header, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const std::string h = header + "\n";
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  if (major == 2) out.append(2, '\0');
  return out + h + data;
}

std::string FloatBytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

TEST(NpyTest, RoundTripsFloatsAndInts) {
  const Tensor f = Tensor::Float(Shape({{"a", 2}, {"b", 3}}), {1, -2, 3.5, 4, 5, -6.25});
  ASSERT_OK_AND_ASSIGN(NpyArray fa, ParseNpy(EncodeNpy(f), "f.npy"));
  EXPECT_EQ(fa.dtype, DType::kFloat32);
  EXPECT_EQ(fa.dims, (std::vector<int64_t>{2, 3}));
  ASSERT_OK_AND_ASSIGN(Tensor f2, NpyToTensor(fa, f.shape(), "f"));
  EXPECT_EQ(f2.shape(), f.shape());
  EXPECT_EQ(std::vector<float>(f2.floats().begin(), f2.floats().end()),
            std::vector<float>(f.floats().begin(), f.floats().end()));

  const Tensor i = Tensor::Int(Shape({{"n", 4}}), {7, -1, 0, 2147483647});
  ASSERT_OK_AND_ASSIGN(NpyArray ia, ParseNpy(EncodeNpy(i), "i.npy"));
  EXPECT_EQ(ia.dtype, DType::kInt32);
  EXPECT_EQ(ia.dims, (std::vector<int64_t>{4}));
  ASSERT_OK_AND_ASSIGN(Tensor i2, NpyToTensor(ia, i.shape(), "i"));
  EXPECT_EQ(std::vector<int32_t>(i2.ints().begin(), i2.ints().end()),
            (std::vector<int32_t>{7, -1, 0, 2147483647}));
}

TEST(NpyTest, RoundTripsThroughAFile) {
  const std::string path = testing::TempDir() + "/npy_test_file.npy";
  const Tensor s = Tensor::Float(Shape(), {42.5});
  ASSERT_OK(WriteNpy(path, s));
  ASSERT_OK_AND_ASSIGN(NpyArray a, ReadNpy(path));
  EXPECT_TRUE(a.dims.empty());
  ASSERT_OK_AND_ASSIGN(Tensor t, NpyToTensor(a, Shape(), "scalar"));
  EXPECT_EQ(t.floats()[0], 42.5f);
}

TEST(NpyTest, WritesTheHeaderNumpyWrites) {
  const std::string bytes = EncodeNpy(Tensor(DType::kFloat32, Shape({{"batch", 8}, {"d", 16}})));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 16), }";
  ASSERT_GE(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_EQ(bytes.substr(10 + dict.size(), header_len - dict.size() - 1),
            std::string(header_len - dict.size() - 1, ' '));
  EXPECT_EQ(bytes.size(), 10 + header_len + 8 * 16 * 4);

  const std::string one_d = EncodeNpy(Tensor(DType::kInt32, Shape({{"n", 3}})));
  EXPECT_NE(one_d.find("'descr': '<i4'"), std::string::npos);
  EXPECT_NE(one_d.find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(EncodeNpy(Tensor(DType::kInt32, Shape())).find("'shape': ()"), std::string::npos);
}

TEST(NpyTest, ReadsAHandWrittenHeader) {
  // Keys in another order, double quotes, a Python 2 long, no trailing comma, version 2.0.
  const std::string bytes = HandWritten(
      "{\"shape\": (2L, 1), 'fortran_order': False, 'descr': '<f4'}", FloatBytes({1.5, -2}), 2);
  ASSERT_OK_AND_ASSIGN(NpyArray a, ParseNpy(bytes, "hand.npy"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 1}));
  ASSERT_OK_AND_ASSIGN(Tensor t, NpyToTensor(a, Shape({{"x", 2}, {"y", 1}}), "hand"));
  EXPECT_EQ(t.floats()[0], 1.5f);
  EXPECT_EQ(t.floats()[1], -2.0f);
}

TEST(NpyTest, RefusesTruncatedFiles) {
  const std::string good = HandWritten("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                       FloatBytes({1, 2, 3}));
  EXPECT_TRUE(StatusIs(ParseNpy(good.substr(0, good.size() - 1), "t.npy").status(),
                       absl::StatusCode::kInvalidArgument, {"t.npy", "truncated", "(3,)"}));
  EXPECT_TRUE(StatusIs(ParseNpy(good.substr(0, 20), "t.npy").status(),
                       absl::StatusCode::kInvalidArgument, {"t.npy", "truncated"}));
  EXPECT_TRUE(StatusIs(ParseNpy(good.substr(0, 7), "t.npy").status(),
                       absl::StatusCode::kInvalidArgument, {"truncated"}));
  EXPECT_TRUE(StatusIs(ParseNpy(good + "xxxx", "t.npy").status(),
                       absl::StatusCode::kInvalidArgument, {"oversized"}));
}

TEST(NpyTest, RefusesBadMagicAndVersion) {
  EXPECT_TRUE(StatusIs(ParseNpy("PK\x03\x04 not numpy at all", "z.npy").status(),
                       absl::StatusCode::kInvalidArgument, {"z.npy", "not a .npy file"}));
  std::string v3 =
      HandWritten("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", FloatBytes({1}));
  v3[6] = 3;
  EXPECT_TRUE(StatusIs(ParseNpy(v3, "v3.npy").status(), absl::StatusCode::kInvalidArgument,
                       {"version 3.0"}));
}

TEST(NpyTest, RefusesOtherDtypesNamingThem) {
  const std::string f8 = HandWritten("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
                                     std::string(8, '\0'));
  EXPECT_TRUE(StatusIs(ParseNpy(f8, "/tmp/d.npy").status(), absl::StatusCode::kInvalidArgument,
                       {"/tmp/d.npy", "'<f8'"}));
  const std::string big = HandWritten("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                                      std::string(4, '\0'));
  EXPECT_TRUE(
      StatusIs(ParseNpy(big, "b.npy").status(), absl::StatusCode::kInvalidArgument, {"'>i4'"}));
}

TEST(NpyTest, RefusesFortranOrder) {
  const std::string f = HandWritten("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                    FloatBytes({1, 2, 3, 4}));
  EXPECT_TRUE(StatusIs(ParseNpy(f, "f.npy").status(), absl::StatusCode::kInvalidArgument,
                       {"f.npy", "fortran_order"}));
}

TEST(NpyTest, RefusesMalformedHeaders) {
  for (const std::string& header :
       {std::string("{'descr': '<f4', 'shape': (2,), }"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
        std::string("{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) } junk"),
        std::string("{'descr': '<f4', 'fortran_order': False, 'shape': "
                    "(9999999999, 9999999999, 9999999999), }")}) {
    SCOPED_TRACE(header);
    EXPECT_TRUE(StatusIs(ParseNpy(HandWritten(header, FloatBytes({1, 2})), "m.npy").status(),
                         absl::StatusCode::kInvalidArgument, {"m.npy"}));
  }
}

TEST(NpyTest, NpyToTensorChecksSizesInOrder) {
  NpyArray a;
  a.dims = {8, 15};
  a.data.assign(8 * 15 * 4, '\0');
  EXPECT_TRUE(StatusIs(
      NpyToTensor(a, Shape({{"batch", 8}, {"d_in", 16}}), "feed 'x' (x.npy)").status(),
      absl::StatusCode::kInvalidArgument, {"feed 'x' (x.npy)", "[batch:8, d_in:16]", "(8, 15)"}));
  a.dims = {15, 8};
  EXPECT_FALSE(NpyToTensor(a, Shape({{"a", 8}, {"b", 15}}), "t").ok());
  a.dims = {120};
  EXPECT_FALSE(NpyToTensor(a, Shape({{"a", 8}, {"b", 15}}), "t").ok());
  NpyArray scalar;
  scalar.data.assign(4, '\0');
  EXPECT_TRUE(NpyToTensor(scalar, Shape(), "s").ok());
  EXPECT_TRUE(StatusIs(NpyToTensor(scalar, Shape({{"n", 1}}), "s").status(),
                       absl::StatusCode::kInvalidArgument, {"[n:1]", "()"}));
}

TEST(NpyTest, ReadNpyNamesAMissingFile) {
  const std::string path = testing::TempDir() + "/no_such_file.npy";
  EXPECT_TRUE(StatusIs(ReadNpy(path).status(), absl::StatusCode::kNotFound, {path}));
  EXPECT_FALSE(WriteNpy(testing::TempDir() + "/no_such_dir/x.npy", Tensor()).ok());
}

// NumPy is the format's owner: when it is installed, it must read our files and we must read its.
TEST(NpyTest, InteroperatesWithNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import numpy; interoperability not checked";
  }
  const std::string ours = testing::TempDir() + "/ours.npy";
  const std::string theirs = testing::TempDir() + "/theirs.npy";
  ASSERT_OK(WriteNpy(ours, Tensor::Float(Shape({{"a", 2}, {"b", 3}}), {0, 1, 2, 3, 4, 5.5})));
  const std::string script = absl::StrCat(
      "import numpy as np\n"
      "a = np.load('",
      ours,
      "')\n"
      "assert a.dtype == np.float32 and a.shape == (2, 3), (a.dtype, a.shape)\n"
      "assert a[1, 2] == 5.5 and a[0, 1] == 1\n"
      "np.save('",
      theirs, "', np.arange(24, dtype=np.int32).reshape(2, 3, 4))\n");
  ASSERT_EQ(std::system(absl::StrCat("/usr/bin/python3 -c \"", script, "\"").c_str()), 0);
  ASSERT_OK_AND_ASSIGN(NpyArray a, ReadNpy(theirs));
  ASSERT_OK_AND_ASSIGN(Tensor t, NpyToTensor(a, Shape({{"x", 2}, {"y", 3}, {"z", 4}}), "numpy"));
  ASSERT_EQ(t.dtype(), DType::kInt32);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(t.ints()[i], i);
}

}  // namespace
}  // namespace meshrt
