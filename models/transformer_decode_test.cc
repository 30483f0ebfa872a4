// Decoding the Transformer LM on the mesh (models/transformer.h BuildTransformerDecoder): greedy
// decoding with the key/value cache gives the argmax of the whole forward pass (the sampler graph,
// teacher-forced on the decoded ids) at every position; greedy and top-k sampling give the same
// tokens on the interpreter and on data-parallel, model-parallel, 2-D and length-split layouts of
// the simulated mesh; top_k 1 is greedy; sampled tokens lie in the top k of the forward pass's
// logits; seeds matter; bad options are refused.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/test_util.h"
#include "models/transformer.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace models {
namespace {

constexpr int kBatch = 4;
constexpr int kLength = 8;
constexpr int kVocab = 32;

TransformerOptions Tiny() {
  TransformerOptions o = TinyTransformerOptions();  // batch 4, length 8, d_model 16, 2 heads
  o.vocab = kVocab;
  o.layers = 2;  // two caches per layer, each carried and updated
  return o;
}

// Prompts of 1, 2, 3 and 5 ids; the positions after them hold junk the decoder must not read.
constexpr int kPromptLength[kBatch] = {1, 2, 3, 5};
TensorMap Feeds() {
  const std::vector<std::vector<int32_t>> prompts = {{3}, {7, 1}, {30, 2, 9}, {4, 4, 4, 11, 20}};
  std::vector<int32_t> ids(kBatch * kLength, 17), lengths;
  for (int r = 0; r < kBatch; ++r) {
    std::copy(prompts[r].begin(), prompts[r].end(), ids.begin() + r * kLength);
    lengths.push_back(kPromptLength[r]);
  }
  return {{"prompt", Tensor::Int(Shape({{"batch", kBatch}, {"length", kLength}}), ids)},
          {"prompt_length", Tensor::Int(Shape({{"batch", kBatch}}), lengths)}};
}

struct Decoder {
  Graph graph;
  LmDecoderOutputs outputs;
};

Decoder Build(const LmDecodeOptions& d, const TransformerOptions& o = Tiny()) {
  GraphBuilder b;
  auto built = BuildTransformerDecoder(b, o, d);
  EXPECT_TRUE(built.ok()) << built.status();
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!built.ok() || !graph.ok()) return {};
  return {*std::move(graph), *std::move(built)};
}

// The decoded ids [batch, length] on the interpreter; `state` holds the weights (initialised from
// their initializers on first use).
std::vector<int32_t> Decode(const LmDecodeOptions& d, TensorMap* state) {
  Decoder dec = Build(d);
  auto out = InterpretStep(dec.graph, Feeds(), {dec.outputs.generated.name}, state, CpuKernels());
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const Tensor& t = out->at(dec.outputs.generated.name);
  EXPECT_EQ(t.shape().ToString(), Shape({{"batch", kBatch}, {"length", kLength}}).ToString());
  return std::vector<int32_t>(t.i32(), t.i32() + t.num_elements());
}

// The whole forward pass (the sampler graph: no cache) on `row`'s ids: logits [length, vocab];
// the logits at position t predict the id at t + 1.
std::vector<float> ForcedLogits(const std::vector<int32_t>& generated, int row, TensorMap* state) {
  GraphBuilder b;
  auto s = BuildTransformerSampler(b, Tiny());
  EXPECT_TRUE(s.ok()) << s.status();
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!s.ok() || !graph.ok()) return {};
  std::vector<int32_t> ids(generated.begin() + row * kLength,
                           generated.begin() + (row + 1) * kLength);
  auto out = InterpretStep(*graph,
                           {{"prompt", Tensor::Int(Shape({{"length", kLength}}), ids)},
                            {"position", Tensor::Int(Shape({}), {0})}},
                           {s->logits.name}, state, CpuKernels());
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const Tensor& t = out->at(s->logits.name);
  return std::vector<float>(t.f32(), t.f32() + t.num_elements());
}

// How many ids of `logits` (one position's, kVocab of them) are larger than that of `id`.
int Rank(const float* logits, int32_t id) {
  int above = 0;
  for (int v = 0; v < kVocab; ++v) above += logits[v] > logits[id] ? 1 : 0;
  return above;
}

void ExpectPromptsKept(const std::vector<int32_t>& generated) {
  const Tensor prompt = Feeds().at("prompt");
  for (int r = 0; r < kBatch; ++r) {
    for (int t = 0; t < kPromptLength[r]; ++t) {
      EXPECT_EQ(generated[r * kLength + t], prompt.i32()[r * kLength + t])
          << "row " << r << " position " << t;
    }
  }
}

TEST(TransformerDecodeTest, GreedyEqualsTheArgmaxOfTheWholeForwardPass) {
  TensorMap state;
  const std::vector<int32_t> generated = Decode({}, &state);
  ASSERT_EQ(generated.size(), static_cast<size_t>(kBatch * kLength));
  ExpectPromptsKept(generated);
  int checked = 0;
  std::vector<int32_t> seen;
  for (int r = 0; r < kBatch; ++r) {
    const std::vector<float> logits = ForcedLogits(generated, r, &state);
    ASSERT_EQ(logits.size(), static_cast<size_t>(kLength * kVocab));
    for (int t = kPromptLength[r]; t < kLength; ++t) {
      const float* at = logits.data() + (t - 1) * kVocab;
      const int32_t best =
          static_cast<int32_t>(std::max_element(at, at + kVocab) - at);  // first of ties
      EXPECT_EQ(generated[r * kLength + t], best) << "row " << r << " position " << t;
      seen.push_back(best);
      ++checked;
    }
  }
  EXPECT_EQ(checked, kBatch * kLength - (1 + 2 + 3 + 5));
  std::sort(seen.begin(), seen.end());
  EXPECT_GE(std::unique(seen.begin(), seen.end()) - seen.begin(), 3)
      << "too few distinct tokens for the comparison to mean much";
}

struct MeshCase {
  std::string mesh, rules;
};

const std::vector<MeshCase>& Layouts() {
  static const auto* cases = new std::vector<MeshCase>{
      {"x:2", "batch:x"},                                               // data parallel
      {"x:2", "heads:x,d_ff:x,vocab:x"},                                // model parallel
      {"rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"},  // dp x mp
      {"rows:2,cols:2", "length:rows,memory:rows,heads:cols"},          // positions split
  };
  return *cases;
}

// `graph` lowered for `c` and run on a simulated mesh; the program lives as long as the mesh.
struct OnMesh {
  OnMesh(const Graph& graph, const MeshCase& c) {
    auto mesh = Mesh::Parse(c.mesh);
    if (!mesh.ok()) {
      status = mesh.status();
      return;
    }
    auto rules = LayoutRules::Parse(c.rules, *mesh);
    if (!rules.ok()) {
      status = rules.status();
      return;
    }
    auto lowered = Lower(graph, *mesh, *rules);
    if (!lowered.ok()) {
      status = lowered.status();
      return;
    }
    program = *std::move(lowered);
    auto created = SimulatedMesh::Create(program, {&CpuKernels()});
    if (!created.ok()) {
      status = created.status();
      return;
    }
    sim = *std::move(created);
  }
  bool ok() const { return status.ok(); }
  SimulatedMesh* operator->() { return sim.get(); }
  absl::Status status;
  v1::Program program;
  std::unique_ptr<SimulatedMesh> sim;
};

TEST(TransformerDecodeTest, TheSameTokensOnEveryLayout) {
  LmDecodeOptions greedy;
  LmDecodeOptions sampled;
  sampled.temperature = 1.0f;
  sampled.top_k = 5;
  sampled.seed = 11;
  for (const LmDecodeOptions& d : {greedy, sampled}) {
    SCOPED_TRACE(absl::StrCat("temperature ", d.temperature, " top_k ", d.top_k));
    TensorMap state;
    const std::vector<int32_t> want = Decode(d, &state);
    ASSERT_EQ(want.size(), static_cast<size_t>(kBatch * kLength));
    Decoder dec = Build(d);
    for (const MeshCase& c : Layouts()) {
      SCOPED_TRACE(c.mesh + " " + c.rules);
      OnMesh sim(dec.graph, c);
      ASSERT_TRUE(sim.ok()) << sim.status;
      auto got = sim->Step(Feeds(), {dec.outputs.generated.name});
      ASSERT_TRUE(got.ok()) << got.status();
      const Tensor& t = got->at(dec.outputs.generated.name);
      ASSERT_EQ(t.num_elements(), kBatch * kLength);
      for (int i = 0; i < kBatch * kLength; ++i) {
        EXPECT_EQ(t.i32()[i], want[i]) << "row " << i / kLength << " position " << i % kLength;
      }
    }
  }
}

TEST(TransformerDecodeTest, TopOneSamplingIsGreedy) {
  TensorMap state;
  const std::vector<int32_t> greedy = Decode({}, &state);
  LmDecodeOptions d;
  d.temperature = 0.7f;
  d.top_k = 1;
  EXPECT_EQ(Decode(d, &state), greedy);
  // Without the top-k restriction the same temperature strays from greedy somewhere.
  d.top_k = 0;
  d.temperature = 2.0f;
  EXPECT_NE(Decode(d, &state), greedy);
}

TEST(TransformerDecodeTest, SampledTokensAreAmongTheTopKLogits) {
  constexpr int kK = 3;
  TensorMap state;
  int outside_without_top_k = 0, not_argmax = 0;
  for (int64_t seed : {1, 2, 3}) {
    LmDecodeOptions d;
    d.temperature = 1.5f;
    d.seed = seed;
    d.top_k = kK;
    const std::vector<int32_t> top = Decode(d, &state);
    ExpectPromptsKept(top);
    d.top_k = 0;
    const std::vector<int32_t> any = Decode(d, &state);
    for (int r = 0; r < kBatch; ++r) {
      const std::vector<float> logits = ForcedLogits(top, r, &state);
      const std::vector<float> any_logits = ForcedLogits(any, r, &state);
      ASSERT_EQ(logits.size(), static_cast<size_t>(kLength * kVocab));
      for (int t = kPromptLength[r]; t < kLength; ++t) {
        const int rank = Rank(logits.data() + (t - 1) * kVocab, top[r * kLength + t]);
        EXPECT_LT(rank, kK) << "seed " << seed << " row " << r << " position " << t;
        not_argmax += rank > 0 ? 1 : 0;
        outside_without_top_k +=
            Rank(any_logits.data() + (t - 1) * kVocab, any[r * kLength + t]) >= kK ? 1 : 0;
      }
    }
  }
  // The check means something: the samples are not all the argmax, and without top_k some fall
  // outside the top k.
  EXPECT_GT(not_argmax, 0);
  EXPECT_GT(outside_without_top_k, 0);
}

TEST(TransformerDecodeTest, SeedsGiveDifferentSamplesAndTheSameSeedTheSame) {
  TensorMap state;
  LmDecodeOptions d;
  d.temperature = 1.0f;
  d.seed = 1;
  const std::vector<int32_t> first = Decode(d, &state);
  EXPECT_EQ(Decode(d, &state), first);
  d.seed = 2;
  EXPECT_NE(Decode(d, &state), first);
}

TEST(TransformerDecodeTest, MaxNewStopsEachRowAfterItsPrompt) {
  TensorMap state;
  const std::vector<int32_t> all = Decode({}, &state);
  LmDecodeOptions d;
  d.max_new = 2;
  const std::vector<int32_t> two = Decode(d, &state);
  d.max_prompt = 5;  // the longest prompt: a shorter loop, the same tokens
  const std::vector<int32_t> short_loop = Decode(d, &state);
  EXPECT_EQ(short_loop, two);
  for (int r = 0; r < kBatch; ++r) {
    for (int t = 0; t < kLength; ++t) {
      const int32_t want = t < kPromptLength[r] + 2 ? all[r * kLength + t] : 0;
      EXPECT_EQ(two[r * kLength + t], want) << "row " << r << " position " << t;
    }
  }
}

TEST(TransformerDecodeTest, BadOptionsAreRefused) {
  auto refused = [](const LmDecodeOptions& d, const std::string& text) {
    GraphBuilder b;
    auto built = BuildTransformerDecoder(b, Tiny(), d);
    ASSERT_FALSE(built.ok()) << text;
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(built.status().message().find(text), std::string::npos) << built.status();
  };
  LmDecodeOptions d;
  d.temperature = -1;
  refused(d, "temperature");
  d = {};
  d.top_k = kVocab + 1;
  refused(d, "top_k");
  d = {};
  d.top_k = -1;
  refused(d, "top_k");
  d = {};
  d.max_new = kLength;
  refused(d, "max_new");
  d = {};
  d.max_new = 3;
  d.max_prompt = kLength - 2;
  refused(d, "max_prompt");
}

}  // namespace
}  // namespace models
}  // namespace meshrt
