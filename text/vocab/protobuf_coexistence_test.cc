// The reason for the shim (sentencepiece_library.h): a process that uses libprotobuf, as meshrt
// does, trains, loads and applies a vocabulary, and its own protobuf keeps working. Linking
// Debian's libsentencepiece directly into such a process aborts in SentencePiece's protobuf
// version check or crashes at start-up.
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/struct.pb.h>

#include "text/vocab/encode_npy.h"
#include "text/vocab/vocab_test_util.h"

namespace meshrt {
namespace text {
namespace {

void CheckProtobuf() {
  google::protobuf::Struct message;
  (*message.mutable_fields())["word"].set_string_value("garçon");
  std::string bytes;
  ASSERT_TRUE(message.SerializeToString(&bytes));
  google::protobuf::Struct parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.fields().at("word").string_value(), "garçon");
  // The full (not lite) runtime: descriptors and reflection.
  EXPECT_EQ(google::protobuf::Struct::descriptor()->full_name(), "google.protobuf.Struct");
  google::protobuf::FileDescriptorProto file;
  file.set_name("x.proto");
  EXPECT_EQ(file.DebugString(), "name: \"x.proto\"\n");
}

TEST(ProtobufCoexistenceTest, ProtobufAndSentencePieceShareAProcess) {
  CheckProtobuf();
  const std::string dir = MakeTestTempDir("coexistence");
  const std::string model = dir + "/v.model";
  ASSERT_TRUE(TrainVocab(TestOptions({WriteTestCorpus(dir)}), model).ok());
  CheckProtobuf();
  absl::StatusOr<Vocab> vocab = Vocab::Load(model);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->Decode(vocab->Encode("Le garçon voit «bonjour».")), "Le garçon voit «bonjour».");
  ASSERT_TRUE(
      EncodeLinesToNpy(*vocab, WriteFile(dir + "/t.txt", "the cat\n"), 4, dir + "/t.npy", nullptr)
          .ok());
  CheckProtobuf();
}

}  // namespace
}  // namespace text
}  // namespace meshrt
