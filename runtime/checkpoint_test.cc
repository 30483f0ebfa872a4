// Checkpoints without transport: every processor of a 2x2 mesh saves its slices, the coordinator's
// half builds the manifest, and every processor of another mesh/layout restores its slices from
// the shards overlapping them. Corrupted, truncated and missing shards and incomplete directories
// are refused, naming the file.
#include "runtime/checkpoint.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/ir/slicing.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "xxhash.h"
#include "util/file.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

std::string MakeTempDir() { return MakeTestTempDir("ckpt"); }

v1::Graph ModelGraph() {
  GraphBuilder b;
  Initializer init;
  init.kind = "uniform";
  TensorRef w1 = b.Variable("layer/w1", Shape({{"d_in", 8}, {"hidden", 12}}), init);
  TensorRef w2 = b.Variable("w2", Shape({{"hidden", 12}, {"d_out", 4}}), init);
  b.Variable("step", Shape({}));
  b.Variable("ids", Shape({{"hidden", 12}}), {}, DType::kInt32);
  b.MarkOutput(b.Einsum({w1, w2}, Shape({{"d_in", 8}, {"d_out", 4}}), "y"));
  return b.proto();
}

v1::Program LowerOn(const std::string& mesh_text, const std::string& rules_text) {
  auto graph = Graph::Build(ModelGraph());
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto mesh = Mesh::Parse(mesh_text);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  auto rules = LayoutRules::Parse(rules_text, *mesh);
  EXPECT_TRUE(rules.ok()) << rules.status();
  auto program = Lower(*graph, *mesh, *rules);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

// Whole values of the model's variables, distinct per element.
std::map<std::string, Tensor> WholeValues() {
  std::map<std::string, Tensor> whole;
  Tensor w1(DType::kFloat32, Shape({{"d_in", 8}, {"hidden", 12}}));
  for (int64_t i = 0; i < w1.num_elements(); ++i) w1.f32()[i] = 0.5f * i - 3;
  Tensor w2(DType::kFloat32, Shape({{"hidden", 12}, {"d_out", 4}}));
  for (int64_t i = 0; i < w2.num_elements(); ++i) w2.f32()[i] = -0.25f * i + 1;
  Tensor step = Tensor::Float(Shape({}), {3});
  Tensor ids(DType::kInt32, Shape({{"hidden", 12}}));
  for (int64_t i = 0; i < ids.num_elements(); ++i) ids.i32()[i] = 100 + static_cast<int>(i);
  whole.emplace("layer/w1", w1);
  whole.emplace("w2", w2);
  whole.emplace("step", step);
  whole.emplace("ids", ids);
  return whole;
}

// Processor `coord`'s slices of `whole` under `program`'s layouts.
std::map<std::string, Tensor> SlicesAt(const v1::Program& program,
                                       const std::map<std::string, Tensor>& whole,
                                       const std::vector<int64_t>& coord) {
  Mesh mesh = *Mesh::FromProto(program.mesh());
  std::map<std::string, Tensor> out;
  for (const v1::ProgramVariable& v : program.variables()) {
    out.emplace(v.name(), ExtractSlice(whole.at(v.name()), TensorLayout::FromProto(v.layout()),
                                       mesh, coord));
  }
  return out;
}

// Saves `whole` from every processor of `program` into `dir` and writes the manifest.
void SaveAll(const v1::Program& program, const std::map<std::string, Tensor>& whole,
             const std::string& dir, int64_t step = 3) {
  Mesh mesh = *Mesh::FromProto(program.mesh());
  std::vector<v1::CheckpointShard> shards;
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    ASSERT_OK_AND_ASSIGN(std::vector<v1::CheckpointShard> mine,
                         SaveShards(program, coord, SlicesAt(program, whole, coord), dir));
    shards.insert(shards.end(), mine.begin(), mine.end());
  }
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest,
                       BuildManifest(program, step, std::move(shards)));
  ASSERT_OK(WriteManifest(dir, manifest));
}

// Restores on every processor of `program` and checks each slice equals the expected one.
void ExpectRestores(const v1::Program& program, const std::string& dir,
                    const std::map<std::string, Tensor>& whole) {
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  ASSERT_OK(CheckManifestForProgram(manifest, program));
  Mesh mesh = *Mesh::FromProto(program.mesh());
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    SCOPED_TRACE(absl::StrCat("processor ", p));
    ASSERT_OK_AND_ASSIGN(auto got, LoadSlices(manifest, dir, program, coord));
    const auto want = SlicesAt(program, whole, coord);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, t] : want) {
      ASSERT_EQ(got.at(name).shape(), t.shape()) << name;
      ASSERT_EQ(got.at(name).dtype(), t.dtype()) << name;
      EXPECT_EQ(std::memcmp(TensorData(got.at(name)), TensorData(t), TensorBytes(t)), 0) << name;
    }
  }
}

const char kSaveMesh[] = "rows:2,cols:2";
const char kSaveRules[] = "d_in:rows,hidden:cols";

TEST(CheckpointTest, SavedOnTwoByTwoRestoresUnderOtherMeshesAndLayouts) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  const auto whole = WholeValues();
  SaveAll(saved, whole, dir);

  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  EXPECT_EQ(manifest.step(), 3);
  EXPECT_EQ(manifest.variables_size(), 4);
  // Distinct slices only: w1 split both ways (4), w2 and ids split over cols (2 each), step (1).
  EXPECT_EQ(manifest.shards_size(), 4 + 2 + 2 + 1);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension() == ".tmp", false) << e.path();
    ++files;
  }
  EXPECT_EQ(files, manifest.shards_size() + 1);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "layer%2Fw1.4_6.shard"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step..shard"));

  for (const auto& [mesh, rules] : std::vector<std::pair<std::string, std::string>>{
           {"x:4", "hidden:x"},
           {"x:4", "d_in:x"},
           {"x:2", "d_out:x"},
           {"x:1", ""},
           {"rows:2,cols:2", "hidden:rows,d_out:cols"},
           {"a:2,b:3", "d_in:a,hidden:b"},
           {kSaveMesh, kSaveRules}}) {
    SCOPED_TRACE(mesh + " / " + rules);
    ExpectRestores(LowerOn(mesh, rules), dir, whole);
  }
}

// `program` with variable w2 a partial sum over mesh axis `axis` (proto ProgramVariable), as the
// lowering makes a microbatch accumulator.
v1::Program WithPartialW2(v1::Program program, int axis) {
  for (v1::ProgramVariable& v : *program.mutable_variables()) {
    if (v.name() == "w2") v.add_partial_sum_axes(axis);
  }
  return program;
}

// A partial-sum variable is saved as one addend per processor along its axes (format 3) and
// restores as their sum onto any mesh: whole on an ordinary variable; on a partial one, on the
// processors at 0 along its axes and zeros on the others.
TEST(CheckpointTest, PartialSumVariablesAreSavedAsAddendsAndRestoreAsTheirSum) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = WithPartialW2(LowerOn(kSaveMesh, kSaveRules), 0);  // over rows
  const Mesh mesh = *Mesh::FromProto(saved.mesh());
  const auto whole = WholeValues();
  // Row 0 holds w2 - 1, row 1 holds 1: the sum is w2.
  std::vector<v1::CheckpointShard> shards;
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    auto slices = SlicesAt(saved, whole, coord);
    Tensor& w2 = slices.at("w2");
    for (int64_t i = 0; i < w2.num_elements(); ++i) w2.f32()[i] = coord[0] == 0 ? w2.f32()[i] - 1 : 1;
    ASSERT_OK_AND_ASSIGN(std::vector<v1::CheckpointShard> mine,
                         SaveShards(saved, coord, slices, dir));
    shards.insert(shards.end(), mine.begin(), mine.end());
  }
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest built, BuildManifest(saved, 3, shards));
  ASSERT_OK(WriteManifest(dir, built));
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  EXPECT_EQ(manifest.format_version(), 3);
  for (const v1::CheckpointVariable& v : manifest.variables()) {
    EXPECT_EQ(v.addends(), v.name() == "w2" ? 2 : 0) << v.name();
  }
  // w2: its 2 slices over cols, each as 2 addends.
  EXPECT_EQ(manifest.shards_size(), 4 + 4 + 2 + 1);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "w2.6_0.a1.shard"));
  for (const auto& [mesh_text, rules] : std::vector<std::pair<std::string, std::string>>{
           {"x:4", "hidden:x"}, {"x:1", ""}, {kSaveMesh, kSaveRules}}) {
    SCOPED_TRACE(mesh_text + " / " + rules);
    ExpectRestores(LowerOn(mesh_text, rules), dir, whole);
  }
  // Onto a partial w2 over b of a:2,b:2 (2 processors along b, 2 addends): rank r along b takes
  // addend r, w2 - 1 or 1. Over b of a:1,b:4 (4 processors): the sum where b is 0, zeros elsewhere.
  for (const char* mesh_text : {"a:2,b:2", "a:1,b:4"}) {
    SCOPED_TRACE(mesh_text);
    const v1::Program target = WithPartialW2(LowerOn(mesh_text, "d_out:a"), 1);
    const Mesh target_mesh = *Mesh::FromProto(target.mesh());
    const bool per_rank = target_mesh.size(1) == 2;
    for (int p = 0; p < target_mesh.num_processors(); ++p) {
      const std::vector<int64_t> coord = target_mesh.Coordinate(p);
      ASSERT_OK_AND_ASSIGN(auto got, LoadSlices(manifest, dir, target, coord));
      Tensor want = SlicesAt(target, whole, coord).at("w2");
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        const float w = want.f32()[i];
        want.f32()[i] = per_rank ? (coord[1] == 0 ? w - 1 : 1) : (coord[1] == 0 ? w : 0);
      }
      EXPECT_EQ(MaxRelativeError(got.at("w2"), want), 0) << "processor " << p;
    }
  }
}

TEST(CheckpointTest, AddendsThatDoNotTileAreDataLoss) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = WithPartialW2(LowerOn(kSaveMesh, kSaveRules), 0);
  SaveAll(saved, WholeValues(), dir);
  ASSERT_OK_AND_ASSIGN(const v1::CheckpointManifest good, ReadManifest(dir));
  auto rewritten = [&](const std::function<void(v1::CheckpointManifest*)>& change) {
    v1::CheckpointManifest m = good;
    change(&m);
    EXPECT_TRUE(WriteManifest(dir, m).ok());  // checksummed again: a consistent-looking file
    return ReadManifest(dir).status();
  };
  auto find_shard = [](v1::CheckpointManifest* m, const std::string& file) {
    for (v1::CheckpointShard& s : *m->mutable_shards()) {
      if (s.file() == file) return &s;
    }
    ADD_FAILURE() << "no shard " << file;
    return &*m->mutable_shards()->begin();
  };
  EXPECT_TRUE(StatusIs(rewritten([&](v1::CheckpointManifest* m) {
                         find_shard(m, "w2.6_0.a1.shard")->set_addend(0);
                       }),
                       absl::StatusCode::kDataLoss, {"'w2'", "overlap"}));
  EXPECT_TRUE(StatusIs(rewritten([&](v1::CheckpointManifest* m) {
                         find_shard(m, "w2.6_0.a1.shard")->set_addend(2);
                       }),
                       absl::StatusCode::kDataLoss, {"w2.6_0.a1.shard", "addend 2 of 2"}));
  EXPECT_TRUE(StatusIs(rewritten([&](v1::CheckpointManifest* m) {
                         auto* shards = m->mutable_shards();
                         shards->erase(std::find_if(shards->begin(), shards->end(), [](auto& s) {
                           return s.file() == "w2.0_0.a1.shard";
                         }));
                       }),
                       absl::StatusCode::kDataLoss, {"'w2' (addend 1) cover 24 of its 48"}));
  EXPECT_TRUE(StatusIs(rewritten([](v1::CheckpointManifest* m) { m->set_format_version(2); }),
                       absl::StatusCode::kDataLoss, {"'w2' has 2 addends", "format 3"}));
}

TEST(CheckpointTest, CorruptedShardIsRefusedNamingTheFileWhereItIsNeeded) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  SaveAll(saved, WholeValues(), dir);
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  const std::string file = "layer%2Fw1.0_6.shard";  // rows 0-3, hidden 6-11
  {
    std::fstream f(fs::path(dir) / file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5);
    char c;
    f.get(c);
    f.seekp(5);
    f.put(static_cast<char>(c ^ 0x01));
  }
  // Under x:4 with hidden split, processors 2 and 3 (hidden 6-11) need it; 0 and 1 do not.
  const v1::Program target = LowerOn("x:4", "hidden:x");
  for (int64_t p = 0; p < 4; ++p) {
    auto got = LoadSlices(manifest, dir, target, {p});
    if (p < 2) {
      EXPECT_TRUE(got.ok()) << got.status();
    } else {
      EXPECT_TRUE(StatusIs(got.status(), absl::StatusCode::kDataLoss,
                           {file, "layer/w1", "checksum"}));
    }
  }
  // On one processor every shard is needed.
  EXPECT_TRUE(StatusIs(LoadSlices(manifest, dir, LowerOn("x:1", ""), {0}).status(),
                       absl::StatusCode::kDataLoss, {file, "layer/w1"}));

  // A truncated shard (processor 0 of x:4 needs it, not the corrupted one).
  fs::resize_file(fs::path(dir) / "w2.0_0.shard", 8);
  EXPECT_TRUE(StatusIs(LoadSlices(manifest, dir, target, {0}).status(),
                       absl::StatusCode::kDataLoss, {"w2.0_0.shard", "'w2'", "bytes"}));
}

TEST(CheckpointTest, MissingShardIsNotFoundNamingTheFile) {
  const std::string dir = MakeTempDir();
  SaveAll(LowerOn(kSaveMesh, kSaveRules), WholeValues(), dir);
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  ASSERT_TRUE(fs::remove(fs::path(dir) / "ids.6.shard"));
  EXPECT_TRUE(StatusIs(LoadSlices(manifest, dir, LowerOn("x:2", "d_in:x"), {1}).status(),
                       absl::StatusCode::kNotFound, {"ids.6.shard", "'ids'", "missing"}));
  // A processor whose slice lies elsewhere does not read it.
  EXPECT_TRUE(LoadSlices(manifest, dir, LowerOn("x:2", "hidden:x"), {0}).ok());
}

TEST(CheckpointTest, DirectoryWithoutManifestIsAnIncompleteCheckpoint) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  const auto whole = WholeValues();
  // Shards written, manifest never: what a save that died half way leaves.
  for (int p = 0; p < 4; ++p) {
    const std::vector<int64_t> coord = Mesh::Parse(kSaveMesh)->Coordinate(p);
    ASSERT_TRUE(SaveShards(saved, coord, SlicesAt(saved, whole, coord), dir).ok());
  }
  EXPECT_TRUE(StatusIs(ReadManifest(dir).status(), absl::StatusCode::kNotFound,
                       {"manifest.pbtxt", "incomplete"}));
  EXPECT_TRUE(StatusIs(ReadManifest(dir + "/nope").status(), absl::StatusCode::kNotFound,
                       {"nope", "shared"}));
  // A manifest that does not parse.
  ASSERT_OK(WriteFileAtomically(dir + "/manifest.pbtxt", "format_version: \"x\""));
  EXPECT_TRUE(StatusIs(ReadManifest(dir).status(), absl::StatusCode::kDataLoss, {"manifest"}));
}

TEST(CheckpointTest, ManifestMustMatchTheProgramsVariables) {
  const std::string dir = MakeTempDir();
  SaveAll(LowerOn(kSaveMesh, kSaveRules), WholeValues(), dir);
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));

  GraphBuilder b;
  b.Variable("layer/w1", Shape({{"d_in", 8}, {"hidden", 10}}));  // other shape
  b.Variable("w3", Shape({{"other", 12}}));                        // not saved
  TensorRef s = b.Variable("step", Shape({}), {}, DType::kInt32);  // other dtype
  b.MarkOutput(s);
  ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, *Mesh::Parse("x:1"), LayoutRules()));
  EXPECT_TRUE(StatusIs(CheckManifestForProgram(manifest, program),
                       absl::StatusCode::kInvalidArgument,
                       {"missing from the checkpoint: 'w3'", "does not have: 'ids', 'w2'",
                        "'layer/w1' is float32 [d_in:8, hidden:10]", "'step' is int32"}));
  EXPECT_TRUE(StatusIs(LoadSlices(manifest, dir, program, {0}).status(),
                       absl::StatusCode::kInvalidArgument, {"w3"}));
}

TEST(CheckpointTest, SavingBeforeTheFirstStepIsRefused) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  EXPECT_TRUE(StatusIs(SaveShards(saved, {0, 0}, {}, dir).status(),
                       absl::StatusCode::kFailedPrecondition, {"no value yet"}));
  EXPECT_TRUE(fs::is_empty(dir));
  const auto whole = WholeValues();
  EXPECT_TRUE(StatusIs(SaveShards(saved, {0, 0}, SlicesAt(saved, whole, {0, 0}), dir + "/absent")
                           .status(),
                       absl::StatusCode::kNotFound, {"absent", "shared"}));
}

TEST(CheckpointTest, BrokenManifestsAreRefused) {
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  const auto whole = WholeValues();
  // Shards of one processor only do not tile the variables.
  const std::string dir = MakeTempDir();
  ASSERT_OK_AND_ASSIGN(auto shards, SaveShards(saved, {0, 0}, SlicesAt(saved, whole, {0, 0}), dir));
  EXPECT_TRUE(StatusIs(BuildManifest(saved, 0, shards).status(), absl::StatusCode::kInternal,
                       {"cover"}));
  // A file name escaping the directory.
  SaveAll(saved, whole, dir);
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest m, ReadManifest(dir));
  m.mutable_shards(0)->set_file("../x.shard");
  ASSERT_OK(WriteManifest(dir, m));
  EXPECT_TRUE(StatusIs(ReadManifest(dir).status(), absl::StatusCode::kDataLoss, {"../x.shard"}));
}

// Shards are checksummed with XXH3 now; checkpoints whose shards carry FNV-1a checksums (no
// checksum_kind: every checkpoint written before) still restore, and a kind this build does not
// know is refused naming the shard.
TEST(CheckpointTest, ShardChecksumKinds) {
  const std::string dir = MakeTempDir();
  const v1::Program saved = LowerOn(kSaveMesh, kSaveRules);
  const auto whole = WholeValues();
  SaveAll(saved, whole, dir);
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, ReadManifest(dir));
  for (const v1::CheckpointShard& s : manifest.shards()) {
    EXPECT_EQ(s.checksum_kind(), v1::CHECKSUM_XXH3_64) << s.file();
    std::ifstream f(fs::path(dir) / s.file(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(s.checksum(), XXH3_64bits(bytes.data(), bytes.size())) << s.file();
    EXPECT_NE(s.checksum(), Fnv1a64(bytes.data(), bytes.size())) << s.file();
  }

  // The old format: FNV-1a checksums and no checksum_kind field in the manifest text.
  v1::CheckpointManifest old = manifest;
  for (v1::CheckpointShard& s : *old.mutable_shards()) {
    std::ifstream f(fs::path(dir) / s.file(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    s.clear_checksum_kind();
    s.set_checksum(Fnv1a64(bytes.data(), bytes.size()));
  }
  ASSERT_OK(WriteManifest(dir, old));
  {
    std::ifstream f(fs::path(dir) / kCheckpointManifestFile);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("checksum_kind"), std::string::npos);
  }
  ExpectRestores(LowerOn("x:4", "hidden:x"), dir, whole);
  // ... and its checksums still catch corruption (the FNV-1a one is what is checked).
  v1::CheckpointManifest wrong = old;
  wrong.mutable_shards(0)->set_checksum(wrong.shards(0).checksum() ^ 1);
  ASSERT_OK(WriteManifest(dir, wrong));
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest reread, ReadManifest(dir));
  EXPECT_TRUE(StatusIs(LoadSlices(reread, dir, LowerOn("x:1", ""), {0}).status(),
                       absl::StatusCode::kDataLoss, {wrong.shards(0).file(), "checksum"}));

  // A kind from a newer meshrt.
  v1::CheckpointManifest newer = manifest;
  newer.mutable_shards(0)->set_checksum_kind(static_cast<v1::ChecksumKind>(7));
  ASSERT_OK(WriteManifest(dir, newer));
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest newer_read, ReadManifest(dir));
  EXPECT_TRUE(StatusIs(LoadSlices(newer_read, dir, LowerOn("x:1", ""), {0}).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {newer.shards(0).file(), "checksum kind 7", "newer"}));
}

TEST(CheckpointTest, FileNamesAndChecksum) {
  EXPECT_EQ(ShardFileName("a/b.c%", {0, 16}), "a%2Fb%2Ec%25.0_16.shard");
  EXPECT_EQ(ShardFileName("step", {}), "step..shard");
  EXPECT_EQ(Fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace meshrt
