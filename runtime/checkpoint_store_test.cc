// Checkpoint names under a root (escapes refused) and versions committed by CURRENT: a save that
// fails or dies before its commit leaves the previous version the one restored; cleanup after a
// commit keeps the previous version and removes only meshrt's files of older versions.
#include "runtime/checkpoint_store.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint.h"
#include "util/file.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

std::string RealTempDir(const std::string& prefix) {
  char* real = realpath(MakeTestTempDir(prefix).c_str(), nullptr);
  EXPECT_NE(real, nullptr);
  std::string out = real != nullptr ? real : "";
  free(real);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CheckpointRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = RealTempDir("ckroot");
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_);
    fs::create_directories(outside_);
    ASSERT_OK_AND_ASSIGN(CheckpointRoot r, CheckpointRoot::Open(root_));
    root_obj_ = std::make_unique<CheckpointRoot>(std::move(r));
  }
  std::string base_, root_, outside_;
  std::unique_ptr<CheckpointRoot> root_obj_;
};

TEST_F(CheckpointRootTest, NamesInsideResolveAndAreCreated) {
  ASSERT_OK_AND_ASSIGN(const std::string dir, root_obj_->Resolve("runs/ck", /*create=*/true));
  EXPECT_EQ(dir, root_ + "/runs/ck");
  EXPECT_TRUE(fs::is_directory(dir));
  ASSERT_OK_AND_ASSIGN(const std::string again, root_obj_->Resolve("runs/ck", /*create=*/false));
  EXPECT_EQ(again, dir);
  EXPECT_TRUE(StatusIs(root_obj_->Resolve("other", /*create=*/false).status(),
                       absl::StatusCode::kNotFound, {"no checkpoint 'other'", "--checkpoint_root"}));
  EXPECT_FALSE(fs::exists(root_ + "/other"));
}

TEST_F(CheckpointRootTest, EscapesAreRefusedNamingTheNameAndTheFlag) {
  for (const std::string& name : {outside_ + "/ck", std::string("../outside/ck"),
                                  std::string("a/../../x"), std::string("")}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(StatusIs(root_obj_->Resolve(name, /*create=*/true).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"checkpoint name '" + name + "'", "--checkpoint_root", root_}));
  }
  // A symlink inside the root leading out of it: refused before anything is created outside.
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/link").c_str()), 0);
  EXPECT_TRUE(StatusIs(root_obj_->Resolve("link/ck", /*create=*/true).status(),
                       absl::StatusCode::kPermissionDenied,
                       {"link", "resolves to '" + outside_ + "'", "--checkpoint_root"}));
  EXPECT_TRUE(fs::is_empty(outside_));
  // A file where a directory should be.
  std::ofstream(root_ + "/file") << "x";
  EXPECT_TRUE(StatusIs(root_obj_->Resolve("file/ck", /*create=*/true).status(),
                       absl::StatusCode::kFailedPrecondition, {"not a directory"}));
}

TEST_F(CheckpointRootTest, NoRootMeansCheckpointsAreOff) {
  EXPECT_TRUE(StatusIs(CheckpointRoot::Open("").status(), absl::StatusCode::kFailedPrecondition,
                       {"--checkpoint_root"}));
  EXPECT_TRUE(StatusIs(CheckpointRoot::Open(base_ + "/missing").status(),
                       absl::StatusCode::kInvalidArgument, {"--checkpoint_root", "missing"}));
}

TEST(CheckpointVersionNameTest, Pattern) {
  EXPECT_TRUE(IsCheckpointVersionName("v-0000000042-0123456789abcdef"));
  EXPECT_TRUE(IsCheckpointVersionName("v-7-ffffffffffffffff"));
  EXPECT_FALSE(IsCheckpointVersionName("v--0123456789abcdef"));
  EXPECT_FALSE(IsCheckpointVersionName("v-1-0123456789ABCDEF"));
  EXPECT_FALSE(IsCheckpointVersionName("v-1-0123456789abcde"));
  EXPECT_FALSE(IsCheckpointVersionName("v-1-0123456789abcdef/.."));
  EXPECT_FALSE(IsCheckpointVersionName("../v-1-0123456789abcdef"));
  EXPECT_FALSE(IsCheckpointVersionName("manifest.pbtxt"));
}

// A one-processor program with one variable, and saves of it.
class CheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = RealTempDir("ckwrite");
    GraphBuilder b;
    TensorRef w = b.Variable("w", Shape({{"a", 4}}));
    b.MarkOutput(w);
    ASSERT_OK_AND_ASSIGN(Graph g, b.Build());
    ASSERT_OK_AND_ASSIGN(program_, Lower(g, *Mesh::Parse("x:1"), LayoutRules()));
  }

  // Saves w = {v, v, v, v} as step `step` and commits it; returns the version directory.
  std::string Save(float v, int64_t step, int keep = 2) {
    auto writer = CheckpointWriter::Begin(dir_, step, keep);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return "";
    auto shards = SaveShards(program_, {0}, Values(v), writer->version_dir());
    EXPECT_TRUE(shards.ok()) << shards.status();
    auto manifest = BuildManifest(program_, step, *shards);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_TRUE(writer->Commit(*manifest).ok());
    return writer->version_dir();
  }

  static std::map<std::string, Tensor> Values(float v) {
    return {{"w", Tensor::Float(Shape({{"a", 4}}), {v, v, v, v})}};
  }

  // The committed value of w and the step.
  std::pair<float, int64_t> Restored() {
    auto c = ReadCommittedCheckpoint(dir_);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return {NAN, -1};
    auto slices = LoadSlices(c->manifest, c->directory, program_, {0});
    EXPECT_TRUE(slices.ok()) << slices.status();
    if (!slices.ok()) return {NAN, -1};
    return {slices->at("w").f32()[0], c->manifest.step()};
  }

  std::vector<std::string> Versions() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (IsCheckpointVersionName(e.path().filename().string())) {
        out.push_back(e.path().filename().string());
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
  v1::Program program_;
};

TEST_F(CheckpointWriterTest, CurrentNamesTheCommittedVersion) {
  EXPECT_TRUE(StatusIs(ReadCommittedCheckpoint(dir_).status(), absl::StatusCode::kNotFound,
                       {"no committed checkpoint", "CURRENT"}));
  const std::string v1 = Save(1.5f, 10);
  EXPECT_EQ(ReadFile(dir_ + "/CURRENT"), fs::path(v1).filename().string() + "\n");
  EXPECT_EQ(Restored(), std::make_pair(1.5f, int64_t{10}));
  const std::string v2 = Save(2.5f, 20);
  EXPECT_EQ(Restored(), std::make_pair(2.5f, int64_t{20}));
  EXPECT_TRUE(fs::exists(v1));  // the previous version is kept
  for (const auto& e : fs::directory_iterator(v2)) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
}

TEST_F(CheckpointWriterTest, ASaveThatDiesBeforeItsCommitIsIgnored) {
  Save(1.5f, 10);
  {
    // The coordinator dies after the workers wrote their shards: no manifest, no commit.
    ASSERT_OK_AND_ASSIGN(CheckpointWriter dying, CheckpointWriter::Begin(dir_, 11));
    ASSERT_OK(SaveShards(program_, {0}, Values(9.0f), dying.version_dir()).status());
  }
  {
    // ... or after writing the manifest, before CURRENT.
    ASSERT_OK_AND_ASSIGN(CheckpointWriter dying, CheckpointWriter::Begin(dir_, 12));
    ASSERT_OK_AND_ASSIGN(auto shards,
                         SaveShards(program_, {0}, Values(9.0f), dying.version_dir()));
    ASSERT_OK_AND_ASSIGN(auto manifest, BuildManifest(program_, 12, shards));
    ASSERT_OK(WriteManifest(dying.version_dir(), manifest));
  }
  EXPECT_EQ(Versions().size(), 3u);
  EXPECT_EQ(Restored(), std::make_pair(1.5f, int64_t{10}));
}

TEST_F(CheckpointWriterTest, AbandonRemovesOnlyTheNewVersion) {
  const std::string v1 = Save(1.5f, 10);
  ASSERT_OK_AND_ASSIGN(CheckpointWriter failing, CheckpointWriter::Begin(dir_, 11));
  ASSERT_OK(SaveShards(program_, {0}, Values(9.0f), failing.version_dir()).status());
  failing.Abandon();
  EXPECT_FALSE(fs::exists(failing.version_dir()));
  EXPECT_EQ(Versions(), std::vector<std::string>{fs::path(v1).filename().string()});
  EXPECT_EQ(Restored(), std::make_pair(1.5f, int64_t{10}));
}

TEST_F(CheckpointWriterTest, CleanupKeepsThePreviousVersionAndOnlyTouchesMeshrtFiles) {
  const std::string v1 = Save(1.0f, 1);
  // Things that are not meshrt's: a directory not named like a version, a file, and a version
  // directory holding a foreign file.
  fs::create_directories(dir_ + "/notes");
  std::ofstream(dir_ + "/README") << "mine";
  const std::string v2 = Save(2.0f, 2);
  std::ofstream(v2 + "/keep.txt") << "mine";
  const std::string v3 = Save(3.0f, 3);
  // v1 is gone (neither the new version nor the one it replaced); v2 survived v3's cleanup as the
  // previous one.
  EXPECT_FALSE(fs::exists(v1));
  EXPECT_TRUE(fs::exists(v2 + "/manifest.pbtxt"));
  const std::string v4 = Save(4.0f, 4);
  // v2 is now older than the previous: its meshrt files go, its foreign file and so it stays.
  EXPECT_TRUE(fs::exists(v2 + "/keep.txt"));
  EXPECT_FALSE(fs::exists(v2 + "/manifest.pbtxt"));
  EXPECT_TRUE(fs::exists(v3));
  EXPECT_TRUE(fs::exists(dir_ + "/notes"));
  EXPECT_TRUE(fs::exists(dir_ + "/README"));
  EXPECT_EQ(Restored(), std::make_pair(4.0f, int64_t{4}));
}

TEST_F(CheckpointWriterTest, KeepLeavesTheNewestCompleteVersions) {
  std::vector<std::string> saved;
  for (int step = 1; step <= 5; ++step) saved.push_back(Save(step, step, /*keep=*/3));
  // A save that died after its shards (no manifest): never kept, never restorable.
  std::string dead;
  {
    ASSERT_OK_AND_ASSIGN(CheckpointWriter dying, CheckpointWriter::Begin(dir_, 6, 3));
    dead = dying.version_dir();
    ASSERT_OK(SaveShards(program_, {0}, Values(9.0f), dead).status());
  }
  EXPECT_EQ(Versions(), (std::vector<std::string>{fs::path(saved[2]).filename().string(),
                                                  fs::path(saved[3]).filename().string(),
                                                  fs::path(saved[4]).filename().string(),
                                                  fs::path(dead).filename().string()}));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> restorable, RestorableVersions(dir_));
  EXPECT_EQ(restorable, (std::vector<std::string>{saved[4], saved[3], saved[2]}));
  ASSERT_OK_AND_ASSIGN(CommittedCheckpoint older, ReadCheckpointVersion(saved[3]));
  EXPECT_EQ(older.manifest.step(), 4);
  // keep=1 leaves only the new version; a keep below 1 is refused.
  const std::string last = Save(7.0f, 7, /*keep=*/1);
  EXPECT_EQ(Versions(), std::vector<std::string>{fs::path(last).filename().string()});
  EXPECT_TRUE(StatusIs(CheckpointWriter::Begin(dir_, 8, 0).status(),
                       absl::StatusCode::kInvalidArgument, {"at least 1"}));
}

TEST_F(CheckpointWriterTest, RestorableVersionsWithADamagedCurrent) {
  EXPECT_TRUE(RestorableVersions(dir_)->empty());  // no checkpoint yet
  const std::string v1 = Save(1.0f, 1);
  const std::string v2 = Save(2.0f, 2);
  std::ofstream(dir_ + "/CURRENT", std::ios::trunc) << "garbage\n";
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> restorable, RestorableVersions(dir_));
  EXPECT_EQ(restorable, (std::vector<std::string>{v2, v1}));
}

TEST_F(CheckpointWriterTest, OneSaveAtATime) {
  ASSERT_OK_AND_ASSIGN(CheckpointWriter first, CheckpointWriter::Begin(dir_, 1));
  EXPECT_TRUE(StatusIs(CheckpointWriter::Begin(dir_, 2).status(),
                       absl::StatusCode::kFailedPrecondition, {"another save", "LOCK"}));
}

TEST_F(CheckpointWriterTest, BrokenCurrentAndVersionsAreRefused) {
  const std::string v1 = Save(1.0f, 1);
  const std::string name = fs::path(v1).filename().string();
  ASSERT_OK(WriteFileAtomically(dir_ + "/CURRENT", "../elsewhere\n"));
  EXPECT_TRUE(StatusIs(ReadCommittedCheckpoint(dir_).status(), absl::StatusCode::kDataLoss,
                       {dir_ + "/CURRENT", "corrupted"}));
  ASSERT_OK(WriteFileAtomically(dir_ + "/CURRENT", "v-9-0123456789abcdef\n"));
  EXPECT_TRUE(StatusIs(ReadCommittedCheckpoint(dir_).status(), absl::StatusCode::kNotFound,
                       {"v-9-0123456789abcdef", "missing"}));
  // The manifest's step edited by hand: its checksum no longer matches.
  ASSERT_OK(WriteFileAtomically(dir_ + "/CURRENT", name + "\n"));
  std::string text = ReadFile(v1 + "/manifest.pbtxt");
  const size_t at = text.find("step: 1\n");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "step: 7\n");
  ASSERT_OK(WriteFileAtomically(v1 + "/manifest.pbtxt", text));
  EXPECT_TRUE(StatusIs(ReadCommittedCheckpoint(dir_).status(), absl::StatusCode::kDataLoss,
                       {v1 + "/manifest.pbtxt", "checksum"}));
}

TEST_F(CheckpointWriterTest, AnOldFormatCheckpointStillRestores) {
  // Format 1: shards and a manifest without checksum directly in the directory.
  ASSERT_OK_AND_ASSIGN(auto shards, SaveShards(program_, {0}, Values(6.0f), dir_));
  ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest manifest, BuildManifest(program_, 5, shards));
  manifest.set_format_version(1);
  ASSERT_OK(WriteManifest(dir_, manifest));
  std::string text = ReadFile(dir_ + "/manifest.pbtxt");
  const size_t at = text.find("manifest_checksum");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, text.find('\n', at) - at + 1);
  ASSERT_OK(WriteFileAtomically(dir_ + "/manifest.pbtxt", text));
  EXPECT_EQ(Restored(), std::make_pair(6.0f, int64_t{5}));
  // Saving over it commits a version beside it and leaves its files.
  Save(7.0f, 8);
  EXPECT_EQ(Restored(), std::make_pair(7.0f, int64_t{8}));
  EXPECT_TRUE(fs::exists(dir_ + "/manifest.pbtxt"));
  EXPECT_TRUE(fs::exists(dir_ + "/" + shards[0].file()));
}

}  // namespace
}  // namespace meshrt
