// text_windows on token-id files (core/ops/ops_dataset.h): each format (bytes, npy int32 and uint16,
// raw uint16) against a file written here with ids computed by hand; bad npy headers, odd uint16
// files and ids outside [0, vocab) refused naming the op, path, position and value; the train and
// eval splits disjoint and together the file; every format on a mesh with the batch split equal to
// the reference interpreter; bad attrs refused at build.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "core/ops/reference_kernels.h"
#include "core/reference/interpreter.h"
#include "core/testing/data_index_test_util.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

using testing_util::GraphWriter;

// Little-endian bytes of `ids`, `width` bytes each.
std::string LittleEndian(const std::vector<int64_t>& ids, int width) {
  std::string s;
  for (int64_t id : ids) {
    const uint64_t u = static_cast<uint64_t>(id);
    for (int i = 0; i < width; ++i) s.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return s;
}

// A version 1.0 .npy file holding `ids` as `descr` ("<i4" or "<u2") with header dict `dict`
// (default: the 1-D shape of ids), padded as NumPy pads.
std::string Npy(const std::vector<int64_t>& ids, const std::string& descr, std::string dict = "") {
  if (dict.empty()) {
    dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", ids.size(),
                        ",), }");
  }
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out += LittleEndian({static_cast<int64_t>(dict.size())}, 2) + dict;
  return out + LittleEndian(ids, descr == "<i4" ? 4 : 2);
}

// Token i has id (i * 37 + 11) mod vocab.
std::vector<int64_t> Ids(int count, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

struct Windows {
  std::string format = "bytes";
  int64_t vocab = 0;  // 0: no attr
  std::string split;  // "": no attr
  float eval_fraction = 0;
};

// step (int32 placeholder) -> x, y = text_windows offsets 0 and 1 of shape [b: batch, l: length].
absl::StatusOr<Graph> WindowsGraph(const std::string& path, int batch, int length,
                                   const Windows& w) {
  GraphWriter g;
  g.Placeholder("step", Shape(), DType::kInt32);
  for (const auto& [name, offset] : {std::pair<const char*, int>{"x", 0}, {"y", 1}}) {
    v1::Op& op = g.Op(name, "text_windows", {"step"}, {}, {});
    auto& attrs = *op.mutable_attrs();
    attrs["path"].set_s(path);
    attrs["offset"].set_i(offset);
    if (w.format != "bytes") attrs["format"].set_s(w.format);
    if (w.vocab != 0) attrs["vocab"].set_i(w.vocab);
    if (!w.split.empty()) attrs["split"].set_s(w.split);
    if (w.eval_fraction != 0) attrs["eval_fraction"].set_f(w.eval_fraction);
    *op.mutable_shape() = Shape::Parse(absl::StrCat("b:", batch, ",l:", length)).value().ToProto();
  }
  return g.Build();
}

Tensor Step(int32_t s) { return Tensor::Int(Shape(), {s}); }

// The tensors x and y of `step` from the interpreter.
absl::StatusOr<TensorMap> RunStep(const Graph& g, int32_t step) {
  return Interpret(g, {{"step", Step(step)}});
}

// x and y by hand from the token list: row r of step s starts at part_begin + ((s*B + r)*L) mod n.
void ExpectWindows(const TensorMap& out, const std::vector<int64_t>& ids, int64_t part_begin,
                   int64_t part_size, int step, int batch, int length) {
  const int64_t n = part_size - (length + 1);
  for (int r = 0; r < batch; ++r) {
    const int64_t start = part_begin + ((static_cast<int64_t>(step) * batch + r) * length) % n;
    for (int j = 0; j < length; ++j) {
      ASSERT_EQ(out.at("x").i32()[r * length + j], ids[start + j]) << "row " << r << " col " << j;
      ASSERT_EQ(out.at("y").i32()[r * length + j], ids[start + j + 1]) << "row " << r;
    }
  }
}

// Each format's file of `count` ids below `vocab`: the path, and the ids as they are in the file.
struct FormatCase {
  std::string name;
  Windows windows;
  std::string bytes;
};

std::vector<FormatCase> FormatCases(const std::vector<int64_t>& ids, int64_t vocab) {
  return {{"npy_int32", {"npy", vocab}, Npy(ids, "<i4")},
          {"npy_uint16", {"npy", vocab}, Npy(ids, "<u2")},
          {"uint16", {"uint16", vocab}, LittleEndian(ids, 2)}};
}

TEST(TextWindowsTokensTest, EachFormatByHand) {
  // 1000 = 0x3e8 needs both bytes of a uint16: the high byte matters.
  const int64_t vocab = 1000;
  const std::vector<int64_t> ids = Ids(90, vocab);
  for (const FormatCase& c : FormatCases(ids, vocab)) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(WriteTestFile(c.name, c.bytes), 3, 7, c.windows));
    for (int s : {0, 1, 5, 40}) {
      SCOPED_TRACE(absl::StrCat("step ", s));
      ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, s));
      ExpectWindows(out, ids, 0, 90, s, 3, 7);
    }
  }
  // bytes, named or by default: the same windows; a vocab below 256 bounds the bytes.
  std::string text;
  for (int64_t id : Ids(90, 256)) text.push_back(static_cast<char>(id));
  const std::string path = WriteTestFile("bytes.bin", text);
  for (const Windows& w : {Windows{}, Windows{"bytes", 256}}) {
    ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(path, 3, 7, w));
    ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, 2));
    ExpectWindows(out, Ids(90, 256), 0, 90, 2, 3, 7);
  }
}

TEST(TextWindowsTokensTest, SameOnAMeshWithTheBatchSplit) {
  const int64_t vocab = 300;
  const std::vector<int64_t> ids = Ids(200, vocab);
  std::vector<FormatCase> cases = FormatCases(ids, vocab);
  for (FormatCase& c : cases) {
    c.windows.split = "eval";
    c.windows.eval_fraction = 0.5f;
  }
  cases.push_back({"train_uint16", {"uint16", vocab, "train", 0.25f}, LittleEndian(ids, 2)});
  for (const FormatCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(Graph g,
                         WindowsGraph(WriteTestFile(c.name + ".mesh", c.bytes), 8, 6, c.windows));
    for (int s : {0, 3, 17}) {
      for (const auto& [mesh, layout] : std::vector<std::pair<std::string, std::string>>{
               {"p:4", "b:p"}, {"rows:2,cols:2", "b:rows,l:cols"}}) {
        testing_util::ExpectMatchesInterpreter(g, {{"step", Step(s)}}, mesh, layout, CpuKernels());
      }
    }
  }
}

TEST(TextWindowsTokensTest, SplitsAreDisjointAndTogetherTheFile) {
  // T = 100 tokens whose ids are their positions; eval_fraction 0.2: eval = [80, 100), train =
  // [0, 80). Length 3 and batch 2: n = 76 (train) and 16 (eval), both prime to 3, so the starts
  // reach every residue and the windows read every token of the part but its last (start < n).
  std::vector<int64_t> positions;
  for (int i = 0; i < 100; ++i) positions.push_back(i);
  const std::string path = WriteTestFile("split.npy", Npy(positions, "<i4"));
  std::set<int32_t> seen[2];
  for (int part = 0; part < 2; ++part) {
    const std::string split = part == 0 ? "train" : "eval";
    ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(path, 2, 3, {"npy", 100, split, 0.2f}));
    for (int s = 0; s < 60; ++s) {
      ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, s));
      ExpectWindows(out, positions, part == 0 ? 0 : 80, part == 0 ? 80 : 20, s, 2, 3);
      for (const char* name : {"x", "y"}) {
        for (int32_t id : out.at(name).ints()) seen[part].insert(id);
      }
    }
  }
  EXPECT_EQ(*seen[0].begin(), 0);
  EXPECT_EQ(*seen[0].rbegin(), 78);
  EXPECT_EQ(seen[0].size(), 79u);
  EXPECT_EQ(*seen[1].begin(), 80);
  EXPECT_EQ(*seen[1].rbegin(), 98);
  EXPECT_EQ(seen[1].size(), 19u);
  // round(0.25 * 10) = 3 (half away from zero): a part too small for a window is named.
  const std::string small = WriteTestFile("small.u16", LittleEndian(positions, 2).substr(0, 20));
  ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(small, 1, 2, {"uint16", 100, "eval", 0.25f}));
  EXPECT_TRUE(StatusIs(RunStep(g, 0).status(), absl::StatusCode::kInvalidArgument,
                       {small, "10 tokens", "eval part", "has 3"}));
}

TEST(TextWindowsTokensTest, OutOfRangeIdsNameTheirPosition) {
  std::vector<int64_t> ids = Ids(50, 64);
  ids[12] = 64;
  const std::string path = WriteTestFile("range.npy", Npy(ids, "<i4"));
  ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(path, 1, 5, {"npy", 64}));
  ASSERT_OK(RunStep(g, 0).status());  // tokens 0..5
  // step 2: start 10, tokens 10..15 include token 12.
  EXPECT_TRUE(
      StatusIs(RunStep(g, 2).status(), absl::StatusCode::kInvalidArgument,
               {"text_windows", "'x'", path, "token position 12", "token id 64", "vocab 64"}));
  ids[12] = -3;
  const std::string negative = WriteTestFile("negative.npy", Npy(ids, "<i4"));
  ASSERT_OK_AND_ASSIGN(Graph gn, WindowsGraph(negative, 1, 5, {"npy", 64}));
  EXPECT_TRUE(StatusIs(RunStep(gn, 2).status(), absl::StatusCode::kInvalidArgument,
                       {negative, "token id -3", "token position 12"}));
  // A byte above a small vocab.
  const std::string bytes = WriteTestFile("range.txt", std::string(20, 'z'));
  ASSERT_OK_AND_ASSIGN(Graph gb, WindowsGraph(bytes, 1, 5, {"bytes", 100}));
  EXPECT_TRUE(StatusIs(RunStep(gb, 0).status(), absl::StatusCode::kInvalidArgument,
                       {bytes, "token id 122", "token position 0"}));
}

TEST(TextWindowsTokensTest, BadFilesAreRefused) {
  const std::vector<int64_t> ids = Ids(40, 100);
  const std::string good = Npy(ids, "<i4");
  struct Case {
    std::string name, bytes;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"magic.npy", "PK\x03\x04" + good.substr(4), {"not a .npy file"}},
      {"version.npy", good.substr(0, 6) + "\x03" + good.substr(7), {"version 3.0"}},
      {"dict.npy", Npy(ids, "<i4", "{'descr': '<i4', 'shape': (40,), }"), {"must have the keys"}},
      {"float.npy",
       Npy(ids, "<i4", "{'descr': '<f4', 'fortran_order': False, 'shape': (40,), }"),
       {"int32 ('<i4') or uint16 ('<u2')", "'<f4'"}},
      {"2d.npy",
       Npy(ids, "<i4", "{'descr': '<i4', 'fortran_order': False, 'shape': (4, 10), }"),
       {"1-D", "(4, 10)"}},
      {"short.npy", good.substr(0, good.size() - 4), {"(40,)", "the file has 156"}},
      {"header.npy", good.substr(0, 30), {"truncated .npy file"}},
      {"tiny.npy", good.substr(0, 5), {"not a .npy file"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = WriteTestFile(c.name, c.bytes);
    ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(path, 1, 4, {"npy", 100}));
    std::vector<std::string> parts = c.parts;
    parts.push_back(path);
    parts.push_back("text_windows");
    EXPECT_TRUE(StatusIs(RunStep(g, 0).status(), absl::StatusCode::kInvalidArgument, parts));
  }
  const std::string odd = WriteTestFile("odd.bin", LittleEndian(ids, 2) + "x");
  ASSERT_OK_AND_ASSIGN(Graph g, WindowsGraph(odd, 1, 4, {"uint16", 100}));
  EXPECT_TRUE(StatusIs(RunStep(g, 0).status(), absl::StatusCode::kInvalidArgument,
                       {odd, "odd number of bytes (81)"}));
}

TEST(TextWindowsTokensTest, BadAttrsAreRefusedAtBuild) {
  const std::string path = WriteTestFile("attrs.bin", LittleEndian(Ids(40, 100), 2));
  const std::vector<std::pair<Windows, std::vector<std::string>>> cases = {
      {{"text"}, {"format", "'text'"}},
      {{"npy"}, {"format npy needs", "vocab"}},
      {{"uint16", 0}, {"format uint16 needs", "vocab"}},
      {{"uint16", -2}, {"vocab must be >= 1", "-2"}},
      {{"uint16", 100, "test", 0.1f}, {"split", "'test'"}},
      {{"uint16", 100, "train"}, {"eval_fraction must be in (0, 1)", "train"}},
      {{"uint16", 100, "eval", 1.5f}, {"eval_fraction must be in (0, 1)", "1.5"}},
      {{"uint16", 100, "all", 0.1f}, {"eval_fraction needs split train or eval"}},
  };
  for (const auto& [w, parts] : cases) {
    std::vector<std::string> want = parts;
    want.push_back("'x'");
    EXPECT_TRUE(
        StatusIs(WindowsGraph(path, 2, 4, w).status(), absl::StatusCode::kInvalidArgument, want))
        << want[0];
  }
  EXPECT_TRUE(WindowsGraph(path, 2, 4, {"uint16", 100, "eval", 0.5f}).ok());
}

// ---- token_rows ----------------------------------------------------------------------------

// step (int32 placeholder) -> x = token_rows of shape [b: batch, l: length].
absl::StatusOr<Graph> RowsGraph(const std::string& path, int batch, int length, int64_t vocab) {
  GraphWriter g;
  g.Placeholder("step", Shape(), DType::kInt32);
  v1::Op& op = g.Op("x", "token_rows", {"step"}, {}, {});
  (*op.mutable_attrs())["path"].set_s(path);
  if (vocab != 0) (*op.mutable_attrs())["vocab"].set_i(vocab);
  *op.mutable_shape() = Shape::Parse(absl::StrCat("b:", batch, ",l:", length)).value().ToProto();
  return g.Build();
}

// A [rows, cols] int32 .npy of Ids(rows * cols, vocab).
std::string RowsNpy(int rows, int cols, int64_t vocab) {
  return Npy(Ids(rows * cols, vocab), "<i4",
             absl::StrCat("{'descr': '<i4', 'fortran_order': False, 'shape': (", rows, ", ", cols,
                          "), }"));
}

TEST(TokenRowsTest, RowsOfTheFileInOrderEpochAfterEpoch) {
  const int rows = 7, cols = 5;
  const std::vector<int64_t> ids = Ids(rows * cols, 1000);
  ASSERT_OK_AND_ASSIGN(Graph g,
                       RowsGraph(WriteTestFile("rows.npy", RowsNpy(rows, cols, 1000)), 3, cols, 1000));
  for (int s : {0, 1, 2, 3, 11}) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, Interpret(g, {{"step", Step(s)}}));
    for (int r = 0; r < 3; ++r) {
      const int file_row = (s * 3 + r) % rows;
      for (int j = 0; j < cols; ++j) {
        EXPECT_EQ(out.at("x").i32()[r * cols + j], ids[file_row * cols + j])
            << "step " << s << " row " << r << " col " << j;
      }
    }
  }
}

TEST(TokenRowsTest, BadFilesAndAttrsAreRefused) {
  const std::string path = WriteTestFile("rows_bad.npy", RowsNpy(4, 6, 50));
  // A row length other than the op's, ids outside the vocab, a 1-D file: named.
  ASSERT_OK_AND_ASSIGN(Graph wrong_length, RowsGraph(path, 2, 5, 50));
  EXPECT_TRUE(StatusIs(Interpret(wrong_length, {{"step", Step(0)}}).status(),
                       absl::StatusCode::kInvalidArgument, {path, "rows of 6 tokens", "length is 5"}));
  ASSERT_OK_AND_ASSIGN(Graph small_vocab, RowsGraph(path, 2, 6, 20));
  EXPECT_TRUE(StatusIs(Interpret(small_vocab, {{"step", Step(0)}}).status(),
                       absl::StatusCode::kInvalidArgument, {path, "outside [0, vocab 20)", "row 0"}));
  const std::string flat = WriteTestFile("rows_flat.npy", Npy(Ids(24, 50), "<i4"));
  ASSERT_OK_AND_ASSIGN(Graph one_d, RowsGraph(flat, 2, 6, 50));
  EXPECT_TRUE(StatusIs(Interpret(one_d, {{"step", Step(0)}}).status(),
                       absl::StatusCode::kInvalidArgument, {flat, "2-D C-order int32", "(24,)"}));
  EXPECT_TRUE(StatusIs(RowsGraph(path, 2, 6, 0).status(), absl::StatusCode::kInvalidArgument,
                       {"'x'", "needs attrs {vocab"}));
}

}  // namespace
}  // namespace meshrt
