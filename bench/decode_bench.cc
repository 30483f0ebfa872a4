// Decoding speed of the encoder-decoder Transformer (models/transformer_encdec.h), in one process
// on the fast kernels (the reference interpreter with CpuKernels, as `meshrt translate
// --reference` runs), one table:
//   cached     the decoding program: the encoder once, then a while_loop over the output
//              positions with a key/value cache per self-attention layer;
//   recompute  what meshrt did before: for every new token, the whole forward pass (encoder and
//              decoder) on the prefix decoded so far, its argmax at that position taken by the
//              client;
//   beam 4     the decoding program with beam search (4 beams, alpha 0.6).
// Same model and weights (random, seeded), output length 64, both greedy decodes must agree token
// for token (the bench fails otherwise). Medians of --repeats runs.
//
//   bazel run -c opt //bench:decode_bench -- [--batch 16] [--length 64] [--repeats 3]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "kernels/blas.h"
#include "kernels/cpu_kernels.h"
#include "models/transformer_encdec.h"
#include "util/flags.h"

namespace meshrt {
namespace {

using models::BuildEncDecDecoder;
using models::DecodeOptions;
using models::DecoderOutputs;
using models::EncDecOptions;

struct Built {
  Graph graph;
  DecoderOutputs d;
};

Built Build(const EncDecOptions& o, const DecodeOptions& decode) {
  GraphBuilder b;
  absl::StatusOr<DecoderOutputs> d = BuildEncDecDecoder(b, o, decode);
  bench::CheckOk(d.status());
  absl::StatusOr<Graph> g = b.Build();
  bench::CheckOk(g.status());
  return Built{*std::move(g), *std::move(d)};
}

// Source sentences: random ids in [3, vocab), each row a different length, EOS, pad.
Tensor Sources(const EncDecOptions& o) {
  std::vector<int32_t> ids(o.batch * o.length, models::kPadId);
  uint64_t x = 12345;
  for (int64_t r = 0; r < o.batch; ++r) {
    const int64_t n = o.length / 2 + r % (o.length / 2);
    for (int64_t t = 0; t + 1 < n; ++t) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      ids[r * o.length + t] = 3 + static_cast<int32_t>((x >> 33) % (o.vocab - 3));
    }
    ids[r * o.length + n - 1] = models::kEosId;
  }
  return Tensor::Int(Shape({{"batch", o.batch}, {"length", o.length}}), ids);
}

double Seconds(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

int Main(int argc, char** argv) {
  int64_t batch = 16, length = 64, repeats = 3;
  FlagSet flags("decode_bench [--batch N] [--length L] [--repeats R]",
                "Greedy decoding with the key/value cache against recomputing the prefix, and "
                "beam-4 decoding, in one process on the fast kernels.");
  flags.Int("batch", &batch, "sentences per decode");
  flags.Int("length", &length, "output (and input) length");
  flags.Int("repeats", &repeats, "runs per variant (the median is reported)");
  absl::StatusOr<std::vector<std::string>> rest = flags.Parse(argc, argv);
  bench::CheckOk(rest.status());
  if (flags.help()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  EncDecOptions o;
  o.batch = batch;
  o.length = length;
  o.d_model = 256;
  o.heads = 4;
  o.d_kv = 64;
  o.d_ff = 1024;
  o.encoder_layers = o.decoder_layers = 2;
  o.vocab = 8000;
  o.dropout = 0;
  const Tensor inputs = Sources(o);
  const KernelRunner& kernels = CpuKernels();

  // Weights: the initializers' values, once, shared by every graph (same variable names).
  Built cached = Build(o, DecodeOptions{});
  TensorMap weights;
  bench::CheckOk(InterpretStep(cached.graph, {{"inputs", inputs}}, {cached.d.decoded.name},
                               &weights, kernels)
                     .status());

  std::vector<double> cached_s, recompute_s, beam_s;
  std::vector<int32_t> cached_tokens;  // [length, batch]
  for (int64_t rep = 0; rep < repeats; ++rep) {
    const absl::Time start = absl::Now();  // no variable changes: the weights are read in place
    absl::StatusOr<TensorMap> out = InterpretStep(cached.graph, {{"inputs", inputs}},
                                                  {cached.d.decoded.name}, &weights, kernels);
    bench::CheckOk(out.status());
    cached_s.push_back(Seconds(start));
    const Tensor& t = out->at(cached.d.decoded.name);
    cached_tokens.assign(t.i32(), t.i32() + t.num_elements());
  }

  // Recompute: the teacher-forced forward pass on the prefix, once per output position.
  Built forced = Build(o, DecodeOptions{.teacher_forcing = true});
  std::vector<int32_t> prefix;
  for (int64_t rep = 0; rep < repeats; ++rep) {
    prefix.assign(o.batch * o.length, models::kPadId);  // [batch, length]
    const absl::Time start = absl::Now();
    for (int64_t pos = 0; pos < o.length; ++pos) {
      absl::StatusOr<TensorMap> out = InterpretStep(
          forced.graph,
          {{"inputs", inputs},
           {"forced_targets",
            Tensor::Int(Shape({{"batch", o.batch}, {"length", o.length}}), prefix)}},
          {forced.d.forced_logits.name}, &weights, kernels);
      bench::CheckOk(out.status());
      const float* logits = out->at(forced.d.forced_logits.name).f32();  // [batch, length, vocab]
      for (int64_t r = 0; r < o.batch; ++r) {
        const float* row = logits + (r * o.length + pos) * o.vocab;
        prefix[r * o.length + pos] =
            static_cast<int32_t>(std::max_element(row, row + o.vocab) - row);
      }
    }
    recompute_s.push_back(Seconds(start));
  }
  // The same tokens (the cached decode keeps going after EOS; compare up to each row's first).
  int64_t compared = 0, differ = 0;
  for (int64_t r = 0; r < o.batch; ++r) {
    for (int64_t pos = 0; pos < o.length; ++pos) {
      const int32_t want = prefix[r * o.length + pos];
      ++compared;
      if (cached_tokens[pos * o.batch + r] != want) ++differ;
      if (want == models::kEosId) break;
    }
  }
  if (differ > 0) {
    bench::Die(absl::StrCat("the cached decode differs from recomputation at ", differ, " of ",
                            compared, " positions"));
  }

  Built beam = Build(o, DecodeOptions{.beam = 4, .alpha = 0.6f});
  for (int64_t rep = 0; rep < repeats; ++rep) {
    const absl::Time start = absl::Now();
    bench::CheckOk(
        InterpretStep(beam.graph, {{"inputs", inputs}}, {beam.d.decoded.name}, &weights, kernels)
            .status());
    beam_s.push_back(Seconds(start));
  }

  const double c = Median(cached_s), r = Median(recompute_s), b = Median(beam_s);
  const kernels::Blas& blas = kernels::GetBlas();
  std::printf(
      "decode_bench: encoder-decoder d_model %lld, heads %lld, d_ff %lld, %lld+%lld layers, vocab "
      "%lld; %lld sentences x %lld output positions; one process, CpuKernels (OpenBLAS core %s, "
      "%d thread); median of %lld\n",
      static_cast<long long>(o.d_model), static_cast<long long>(o.heads),
      static_cast<long long>(o.d_ff), static_cast<long long>(o.encoder_layers),
      static_cast<long long>(o.decoder_layers), static_cast<long long>(o.vocab),
      static_cast<long long>(o.batch), static_cast<long long>(o.length), blas.corename().c_str(),
      blas.threads(), static_cast<long long>(repeats));
  std::printf("%-34s %10s %14s %10s\n", "variant", "seconds", "sentences/s", "vs cache");
  std::printf("%-34s %10.3f %14.1f %10s\n", "greedy, key/value cache (loop)", c, o.batch / c,
              "1.00x");
  std::printf("%-34s %10.3f %14.1f %9.2fx\n", "greedy, recompute the prefix", r, o.batch / r,
              c / r);
  std::printf("%-34s %10.3f %14.1f %9.2fx\n", "beam 4, alpha 0.6 (loop)", b, o.batch / b, c / b);
  std::printf("cache speedup over recomputation: %.1fx (goal >= 5x: %s); tokens agree at all %lld "
              "compared positions\n",
              r / c, r / c >= 5 ? "met" : "MISSED", static_cast<long long>(compared));
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
