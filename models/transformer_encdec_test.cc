// The encoder-decoder Transformer (models/transformer_encdec.h): training losses equal on data
// parallel, model parallel, dp x mp and length-split layouts and the single-process interpreter
// (dropout on); the loss falls on a copy task; greedy decoding on the mesh gives the interpreter's
// tokens and scores; the cached decode equals teacher forcing of its own output (recomputation
// of the whole prefix at every position); no attention weight falls on the source's padding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
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
#include "models/train.h"
#include "models/transformer_encdec.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace models {
namespace {

constexpr int kRows = 24;
constexpr int kLength = 8;
constexpr int kVocab = 16;

// A 2-D int32 .npy [rows.size(), kLength] at $TEST_TMPDIR/name.
std::string WriteRows(const std::string& name, const std::vector<std::vector<int32_t>>& rows) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir ? dir : "/tmp", "/", name);
  std::string dict = absl::StrCat("{'descr': '<i4', 'fortran_order': False, 'shape': (",
                                  rows.size(), ", ", kLength, "), }");
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<char>(dict.size() & 0xff));
  bytes.push_back(static_cast<char>(dict.size() >> 8));
  bytes += dict;
  for (const auto& row : rows) {
    for (int j = 0; j < kLength; ++j) {
      const uint32_t u = static_cast<uint32_t>(j < static_cast<int>(row.size()) ? row[j] : 0);
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((u >> (8 * k)) & 0xff));
    }
  }
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Sentence pairs of a copy-and-reverse task: a source of 2..6 ids in [2, kVocab) then EOS; the
// target is the source reversed, then EOS. Deterministic.
void WriteCopyTask(std::string* inputs, std::string* targets) {
  std::vector<std::vector<int32_t>> src, tgt;
  uint32_t state = 777;
  for (int r = 0; r < kRows; ++r) {
    state = state * 1664525u + 1013904223u;
    const int n = 2 + static_cast<int>((state >> 16) % 5);
    std::vector<int32_t> s;
    for (int i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;
      s.push_back(2 + static_cast<int32_t>((state >> 16) % (kVocab - 2)));
    }
    std::vector<int32_t> t(s.rbegin(), s.rend());
    s.push_back(kEosId);
    t.push_back(kEosId);
    src.push_back(s);
    tgt.push_back(t);
  }
  *inputs = WriteRows("encdec_inputs.npy", src);
  *targets = WriteRows("encdec_targets.npy", tgt);
}

EncDecOptions Tiny() {
  EncDecOptions o;
  o.batch = 4;
  o.length = kLength;
  o.d_model = 16;
  o.heads = 2;
  o.d_kv = 8;
  o.d_ff = 32;
  o.encoder_layers = 1;
  o.decoder_layers = 1;
  o.vocab = kVocab;
  o.seed = 3;
  WriteCopyTask(&o.inputs_path, &o.targets_path);
  return o;
}

struct MeshCase {
  std::string mesh, rules;
};

const std::vector<MeshCase>& Layouts() {
  static const auto* cases = new std::vector<MeshCase>{
      {"x:2", "batch:x"},                                                  // data parallel
      {"x:2", "heads:x,d_ff:x,vocab:x"},                                   // model parallel
      {"rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"},     // dp x mp
      {"rows:2,cols:2", "length:rows,heads:cols,d_ff:cols"},               // length split
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

TEST(EncDecTest, LossesEqualOnEveryLayoutAndTheInterpreter) {
  constexpr int kSteps = 4;
  EncDecOptions o = Tiny();
  auto t = BuildEncDecTrainGraph(o, Sgd(0.5f));
  ASSERT_TRUE(t.ok()) << t.status();
  TensorMap state;
  std::vector<float> want;
  for (int s = 0; s < kSteps; ++s) {
    auto out = InterpretStep(t->graph, {}, {t->loss}, &state);
    ASSERT_TRUE(out.ok()) << out.status();
    want.push_back(out->at(t->loss).f32()[0]);
  }
  // Near ln(16) = 2.77 at the start (label smoothing adds a little), and training moves it.
  EXPECT_GT(want[0], 2.0f);
  EXPECT_LT(want[0], 4.5f);
  EXPECT_NE(want[0], want[kSteps - 1]);
  for (const MeshCase& c : Layouts()) {
    SCOPED_TRACE(c.mesh + " " + c.rules);
    OnMesh sim(t->graph, c);
    ASSERT_TRUE(sim.ok()) << sim.status;
    for (int s = 0; s < kSteps; ++s) {
      auto out = sim->Step({}, {t->loss});
      ASSERT_TRUE(out.ok()) << out.status();
      const float got = out->at(t->loss).f32()[0];
      EXPECT_LE(std::abs(got - want[s]), 1e-5 * std::abs(want[s])) << "step " << s;
    }
  }
}

TEST(EncDecTest, LossFallsOnTheCopyTask) {
  EncDecOptions o = Tiny();
  o.dropout = 0;
  TrainOptions adam;
  adam.optimizer = "adam";
  adam.learning_rate.base = 0.01f;
  auto t = BuildEncDecTrainGraph(o, adam);
  ASSERT_TRUE(t.ok()) << t.status();
  TensorMap state;
  float first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    auto out = InterpretStep(t->graph, {}, {t->loss}, &state, CpuKernels());
    ASSERT_TRUE(out.ok()) << out.status();
    (s == 0 ? first : last) = out->at(t->loss).f32()[0];
  }
  EXPECT_LT(last, 0.6f * first) << first << " -> " << last;
}

// Source rows for decoding: the copy task's first 4 sources.
Tensor DecodeInputs() {
  std::vector<int32_t> ids = {5, 9, 3, kEosId, 0, 0, 0, 0,    //
                              2, 2, 7, 11, 4, 15, kEosId, 0,  //
                              12, kEosId, 0, 0, 0, 0, 0, 0,   //
                              3, 4, 5, 6, 7, 8, 9, kEosId};
  return Tensor::Int(Shape({{"batch", 4}, {"length", kLength}}), ids);
}

TEST(EncDecTest, GreedyDecodeOnTheMeshEqualsTheInterpreterAndTeacherForcing) {
  EncDecOptions o = Tiny();
  GraphBuilder b;
  auto d = BuildEncDecDecoder(b, o, {.scores = true, .teacher_forcing = true});
  ASSERT_TRUE(d.ok()) << d.status();
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status();
  TensorMap state;
  // forced_targets is fed (every placeholder is) but not fetched yet.
  TensorMap feeds = {{"inputs", DecodeInputs()}, {"forced_targets", DecodeInputs()}};
  auto want = InterpretStep(*graph, feeds, {d->decoded.name, d->scores.name}, &state);
  ASSERT_TRUE(want.ok()) << want.status();
  const Tensor& decoded = want->at(d->decoded.name);  // [length, batch]
  ASSERT_EQ(decoded.shape().ToString(), Shape({{"length", kLength}, {"batch", 4}}).ToString());

  // Teacher forcing on the decoded tokens: the full decoder's argmax at every position up to the
  // first EOS is the token decoded there, and the scores are the sums of its log-probabilities.
  std::vector<int32_t> forced(4 * kLength, 0);
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < kLength; ++t) forced[r * kLength + t] = decoded.i32()[t * 4 + r];
  }
  feeds["forced_targets"] = Tensor::Int(Shape({{"batch", 4}, {"length", kLength}}), forced);
  auto forced_out = InterpretStep(*graph, feeds, {d->forced_logits.name}, &state);
  ASSERT_TRUE(forced_out.ok()) << forced_out.status();
  const Tensor& logits = forced_out->at(d->forced_logits.name);  // [batch, length, vocab]
  int checked = 0;
  for (int r = 0; r < 4; ++r) {
    double score = 0;
    for (int t = 0; t < kLength; ++t) {
      const float* row = logits.f32() + (r * kLength + t) * kVocab;
      int best = 0;
      for (int v = 1; v < kVocab; ++v) {
        if (row[v] > row[best]) best = v;
      }
      double max = row[best], sum = 0;
      for (int v = 0; v < kVocab; ++v) sum += std::exp(row[v] - max);
      score += row[best] - max - std::log(sum);
      EXPECT_EQ(best, forced[r * kLength + t]) << "row " << r << " position " << t;
      ++checked;
      if (best == kEosId) {
        for (int u = t + 1; u < kLength; ++u) {
          EXPECT_EQ(forced[r * kLength + u], 0) << "row " << r << ": after EOS, pad";
        }
        break;
      }
    }
    EXPECT_NEAR(want->at(d->scores.name).f32()[r], score, 1e-4 * (1 + std::abs(score)))
        << "row " << r;
  }
  EXPECT_GE(checked, 4 * kLength / 2) << "too few positions before EOS to check";

  for (const MeshCase& c : Layouts()) {
    SCOPED_TRACE(c.mesh + " " + c.rules);
    OnMesh sim(*graph, c);
    ASSERT_TRUE(sim.ok()) << sim.status;
    auto got = sim->Step({{"inputs", DecodeInputs()}, {"forced_targets", DecodeInputs()}},
                         {d->decoded.name, d->scores.name});
    ASSERT_TRUE(got.ok()) << got.status();
    const Tensor& tokens = got->at(d->decoded.name);
    for (int64_t i = 0; i < decoded.num_elements(); ++i) {
      EXPECT_EQ(tokens.i32()[i], decoded.i32()[i]) << "element " << i;
    }
    for (int r = 0; r < 4; ++r) {
      const float w = want->at(d->scores.name).f32()[r];
      EXPECT_NEAR(got->at(d->scores.name).f32()[r], w, 1e-5 * (1 + std::abs(w)));
    }
  }
}

TEST(EncDecTest, SourcePaddingGetsNoAttention) {
  EncDecOptions o = Tiny();
  GraphBuilder b;
  auto d = BuildEncDecDecoder(b, o, {.teacher_forcing = true});
  ASSERT_TRUE(d.ok()) << d.status();
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Tensor inputs = DecodeInputs();
  TensorMap state;
  const std::string encoder = "encoder/layer_0/attention/weights";
  const std::string encdec = "forced/decoder/layer_0/encdec_attention/weights";
  auto out = InterpretStep(*graph,
                           {{"inputs", inputs},
                            {"forced_targets", inputs}},
                           {encoder, encdec}, &state);
  ASSERT_TRUE(out.ok()) << out.status();
  // Both are [batch, length, heads, memory_length]: every query's weight on a pad key is 0 and
  // its weights sum to 1.
  for (const std::string& name : {encoder, encdec}) {
    SCOPED_TRACE(name);
    const Tensor& w = out->at(name);
    ASSERT_EQ(w.num_elements(), 4 * kLength * 2 * kLength);
    int pads = 0;
    for (int r = 0; r < 4; ++r) {
      for (int q = 0; q < kLength * 2; ++q) {
        double sum = 0;
        for (int m = 0; m < kLength; ++m) {
          const float v = w.f32()[(r * kLength * 2 + q) * kLength + m];
          sum += v;
          if (inputs.i32()[r * kLength + m] == 0) {
            EXPECT_EQ(v, 0.0f) << "row " << r << " key " << m;
            ++pads;
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
    EXPECT_GT(pads, 0);
  }
}

// ---- beam search -------------------------------------------------------------------------------

// Beam search written out plainly (lists and sorting, Mesh-TensorFlow's beam_search.py as the
// header states it), scoring prefixes with the teacher-forced decoder of `graph` (causal: the
// logits at position i see only targets before i).
struct Hyp {
  std::vector<int32_t> seq;
  float score;  // log-probability (alive) or length-penalised score (finished)
};

std::vector<Hyp> ReferenceBeamSearch(const Graph& graph, const DecoderOutputs& d,
                                     const Tensor& inputs, int k, float alpha, TensorMap* state) {
  constexpr float kOut = 1e7f;
  const int batch = 4;
  std::vector<std::vector<Hyp>> alive(batch), finished(batch);
  for (int r = 0; r < batch; ++r) {
    for (int j = 0; j < k; ++j) {
      alive[r].push_back({{}, j == 0 ? 0.0f : -kOut});
      finished[r].push_back({{}, -kOut});
    }
  }
  // Ties: the smaller index first, as top_k.
  auto top = [](const std::vector<float>& v, int n) {
    std::vector<int> idx(v.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
    idx.resize(n);
    return idx;
  };
  float penalty = 1;
  for (int i = 0; i < kLength; ++i) {
    penalty = std::pow((5.0f + i + 1) / 6.0f, alpha);
    // Log-probabilities of every alive beam's next token: one forced run per beam index.
    std::vector<std::vector<std::vector<float>>> log_probs(batch,
                                                           std::vector<std::vector<float>>(k));
    for (int j = 0; j < k; ++j) {
      std::vector<int32_t> forced(batch * kLength, 0);
      for (int r = 0; r < batch; ++r) {
        for (size_t t = 0; t < alive[r][j].seq.size(); ++t) {
          forced[r * kLength + t] = alive[r][j].seq[t];
        }
      }
      auto out = InterpretStep(
          graph,
          {{"inputs", inputs},
           {"forced_targets", Tensor::Int(Shape({{"batch", batch}, {"length", kLength}}), forced)}},
          {d.forced_logits.name}, state);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return {};
      for (int r = 0; r < batch; ++r) {
        const float* row = out->at(d.forced_logits.name).f32() + (r * kLength + i) * kVocab;
        double max = row[0], sum = 0;
        for (int v = 0; v < kVocab; ++v) max = std::max<double>(max, row[v]);
        for (int v = 0; v < kVocab; ++v) sum += std::exp(row[v] - max);
        for (int v = 0; v < kVocab; ++v) {
          log_probs[r][j].push_back(static_cast<float>(row[v] - max - std::log(sum)));
        }
      }
    }
    for (int r = 0; r < batch; ++r) {
      std::vector<float> flat;
      for (int j = 0; j < k; ++j) {
        for (int v = 0; v < kVocab; ++v) {
          flat.push_back((alive[r][j].score + log_probs[r][j][v]) / penalty);
        }
      }
      std::vector<Hyp> candidates;
      std::vector<float> alive_scores, pool_scores;
      std::vector<Hyp> pool = finished[r];
      for (const Hyp& h : finished[r]) pool_scores.push_back(h.score);
      for (int c : top(flat, 2 * k)) {
        Hyp h = alive[r][c / kVocab];
        h.seq.resize(i, 0);
        h.seq.push_back(c % kVocab);
        const bool eos = c % kVocab == kEosId;
        h.score = flat[c] * penalty;
        candidates.push_back(h);
        alive_scores.push_back(h.score + (eos ? -kOut : 0));
        pool.push_back({h.seq, flat[c]});
        pool_scores.push_back(flat[c] + (eos ? 0 : -kOut));
      }
      std::vector<Hyp> next_alive, next_finished;
      for (int c : top(alive_scores, k)) next_alive.push_back({candidates[c].seq, alive_scores[c]});
      for (int c : top(pool_scores, k)) next_finished.push_back({pool[c].seq, pool_scores[c]});
      alive[r] = next_alive;
      finished[r] = next_finished;
    }
  }
  std::vector<Hyp> best;
  for (int r = 0; r < batch; ++r) {
    best.push_back(finished[r][0].score > -kOut / 2
                       ? finished[r][0]
                       : Hyp{alive[r][0].seq, alive[r][0].score / penalty});
  }
  return best;
}

// The ids (up to EOS, included) and score of row r of a beam search's "decoded" [batch, result].
Hyp BeamRow(const Tensor& decoded, int r) {
  Hyp h;
  const float* row = decoded.f32() + r * (kLength + 1);
  for (int t = 0; t < kLength; ++t) {
    h.seq.push_back(static_cast<int32_t>(row[t]));
    if (row[t] == kEosId) break;
  }
  h.score = row[kLength];
  return h;
}

TEST(EncDecTest, BeamSearchMatchesAPlainBeamSearchOnEveryLayout) {
  EncDecOptions o = Tiny();
  for (const auto& [k, alpha] : {std::pair<int, float>{2, 0.6f}, {3, 0.0f}}) {
    SCOPED_TRACE(absl::StrCat("beam ", k, " alpha ", alpha));
    GraphBuilder b;
    DecodeOptions decode;
    decode.beam = k;
    decode.alpha = alpha;
    decode.teacher_forcing = true;
    auto d = BuildEncDecDecoder(b, o, decode);
    ASSERT_TRUE(d.ok()) << d.status();
    auto graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status();
    TensorMap state;
    const TensorMap feeds = {{"inputs", DecodeInputs()}, {"forced_targets", DecodeInputs()}};
    auto got = InterpretStep(*graph, feeds, {d->decoded.name}, &state);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<Hyp> want = ReferenceBeamSearch(*graph, *d, DecodeInputs(), k, alpha, &state);
    ASSERT_EQ(want.size(), 4u);
    int longer = 0;
    for (int r = 0; r < 4; ++r) {
      const Hyp h = BeamRow(got->at(d->decoded.name), r);
      std::vector<int32_t> w = want[r].seq;
      while (!w.empty() && w.back() == 0) w.pop_back();
      std::vector<int32_t> g = h.seq;
      while (!g.empty() && g.back() == 0) g.pop_back();
      EXPECT_EQ(g, w) << "row " << r;
      EXPECT_NEAR(h.score, want[r].score, 1e-4 * (1 + std::abs(want[r].score))) << "row " << r;
      if (g.size() > 2) ++longer;
    }
    EXPECT_GT(longer, 0) << "every hypothesis ended at once: nothing was searched";
    for (const MeshCase& c : Layouts()) {
      SCOPED_TRACE(c.mesh + " " + c.rules);
      OnMesh sim(*graph, c);
      ASSERT_TRUE(sim.ok()) << sim.status;
      auto on_mesh = sim->Step(feeds, {d->decoded.name});
      ASSERT_TRUE(on_mesh.ok()) << on_mesh.status();
      for (int r = 0; r < 4; ++r) {
        const Hyp a = BeamRow(on_mesh->at(d->decoded.name), r);
        const Hyp e = BeamRow(got->at(d->decoded.name), r);
        EXPECT_EQ(a.seq, e.seq) << "row " << r;
        EXPECT_NEAR(a.score, e.score, 1e-5 * (1 + std::abs(e.score))) << "row " << r;
      }
    }
  }
}

TEST(EncDecTest, BeamSearchWithOneBeamAtAlphaZeroIsGreedy) {
  EncDecOptions o = Tiny();
  GraphBuilder gb, bb;
  auto greedy = BuildEncDecDecoder(gb, o, {});
  DecodeOptions one;
  one.beam = 1;
  one.beam_search = true;
  one.alpha = 0;
  auto beam = BuildEncDecDecoder(bb, o, one);
  ASSERT_TRUE(greedy.ok() && beam.ok());
  auto g = gb.Build();
  auto bg = bb.Build();
  ASSERT_TRUE(g.ok() && bg.ok());
  TensorMap s1, s2;
  auto a = InterpretStep(*g, {{"inputs", DecodeInputs()}}, {greedy->decoded.name}, &s1);
  auto c = InterpretStep(*bg, {{"inputs", DecodeInputs()}}, {beam->decoded.name}, &s2);
  ASSERT_TRUE(a.ok() && c.ok());
  for (int r = 0; r < 4; ++r) {
    const Hyp h = BeamRow(c->at(beam->decoded.name), r);
    for (int t = 0; t < kLength; ++t) {
      const int32_t want = a->at(greedy->decoded.name).i32()[t * 4 + r];
      const int32_t have = t < static_cast<int>(h.seq.size()) ? h.seq[t] : 0;
      EXPECT_EQ(have, want) << "row " << r << " position " << t;
    }
  }
}

}  // namespace
}  // namespace models
}  // namespace meshrt
