#include "worker/gloo_reduce_scatter.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"
#include "runtime/kv_store.h"
#include "worker/gloo_store.h"

namespace meshrt {
namespace {

// `g` connected ranks (threads) over loopback. Gloo throws on failure; gtest reports it.
class Group {
 public:
  explicit Group(int g) : contexts_(g) {
    OnAll([&](int r, std::shared_ptr<gloo::Context>& context) {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto c = std::make_shared<gloo::rendezvous::Context>(r, static_cast<int>(contexts_.size()));
      c->setTimeout(std::chrono::seconds(10));
      c->connectFullMesh(store_, device);
      context = c;
    });
  }
  int size() const { return static_cast<int>(contexts_.size()); }
  // Runs fn(rank, context) on one thread per rank.
  void OnAll(const std::function<void(int, std::shared_ptr<gloo::Context>&)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&, r] { fn(r, contexts_[r]); });
    for (std::thread& t : threads) t.join();
  }

 private:
  InMemoryKeyValueStore kv_;
  GlooStore store_{&kv_, absl::Seconds(10)};
  std::vector<std::shared_ptr<gloo::Context>> contexts_;
};

// Not commutative: c = 2a + b (wrapping), so the result shows the combination order.
void TwiceAPlusB(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = static_cast<const uint32_t*>(a)[i], y = static_cast<const uint32_t*>(b)[i];
    static_cast<uint32_t*>(c)[i] = 2 * x + y;
  }
}

void SumFloat(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<float*>(c)[i] = static_cast<const float*>(a)[i] + static_cast<const float*>(b)[i];
  }
}

int32_t Input(int rank, size_t i) { return static_cast<int32_t>(7919 * i + 104729 * rank + 3); }

TEST(PipelinedReduceScatterTest, FoldsEveryMembersChunkInRankOrderForAwkwardSizes) {
  for (int g : {1, 2, 3, 4}) {
    Group group(g);
    for (size_t count : {1, 3, 17, 1000, 4099}) {
      for (size_t piece_bytes : {4, 12, 4096, 1 << 20}) {
        for (size_t window : {1, 2, 5}) {
          PipelinedReduceScatterOptions options;
          options.piece_bytes = piece_bytes;
          options.window = window;
          std::vector<std::vector<int32_t>> out(g);
          PairwiseScratch scratch[4];
          group.OnAll([&](int r, std::shared_ptr<gloo::Context>& context) {
            std::vector<int32_t> in(g * count);
            for (size_t i = 0; i < in.size(); ++i) in[i] = Input(r, i);
            out[r].assign(count, -1);
            PipelinedReduceScatter(context, in.data(), out[r].data(), count, sizeof(int32_t),
                                   &TwiceAPlusB, std::chrono::seconds(10), options, &scratch[r]);
          });
          const std::string where = absl::StrCat("g ", g, " count ", count, " piece ",
                                                 piece_bytes, " window ", window);
          for (int r = 0; r < g; ++r) {
            for (size_t i = 0; i < count; ++i) {
              uint32_t want = static_cast<uint32_t>(Input(0, r * count + i));
              for (int q = 1; q < g; ++q) {
                want = 2 * want + static_cast<uint32_t>(Input(q, r * count + i));
              }
              ASSERT_EQ(static_cast<uint32_t>(out[r][i]), want)
                  << where << " rank " << r << " element " << i;
            }
            // The scratch holds a window of pieces from each peer, not the whole input.
            EXPECT_LE(scratch[r].size, std::max<size_t>(piece_bytes / 4, 1) * 4 * window * (g - 1))
                << where;
          }
        }
      }
    }
  }
}

TEST(PipelinedReduceScatterTest, FloatSumsEqualTheSequentialFoldBitForBit) {
  const int g = 3;
  const size_t count = 100003;
  Group group(g);
  std::vector<std::vector<float>> in(g), out(g);
  for (int r = 0; r < g; ++r) {
    in[r].resize(g * count);
    // Magnitudes far apart, so another association would round differently.
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = (r == 0 ? 1e8f : 1.0f) * (0.37f + i % 11);
  }
  group.OnAll([&](int r, std::shared_ptr<gloo::Context>& context) {
    out[r].assign(count, -1);
    PipelinedReduceScatterOptions options;
    options.piece_bytes = 4096;
    PipelinedReduceScatter(context, in[r].data(), out[r].data(), count, sizeof(float), &SumFloat,
                           std::chrono::seconds(10), options);
  });
  for (int r = 0; r < g; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const float want = (in[0][r * count + i] + in[1][r * count + i]) + in[2][r * count + i];
      ASSERT_EQ(std::memcmp(&out[r][i], &want, sizeof(float)), 0) << "rank " << r << " " << i;
    }
  }
}

TEST(PipelinedReduceScatterTest, BackToBackCallsDoNotMix) {
  Group group(3);
  group.OnAll([&](int r, std::shared_ptr<gloo::Context>& context) {
    PairwiseScratch scratch;
    for (int it = 0; it < 20; ++it) {
      const size_t count = 101 + it;
      std::vector<int32_t> in(3 * count, it + r), out(count, -1);
      PipelinedReduceScatterOptions options;
      options.piece_bytes = 40;
      options.window = 2;
      PipelinedReduceScatter(context, in.data(), out.data(), count, sizeof(int32_t), &TwiceAPlusB,
                             std::chrono::seconds(10), options, &scratch);
      // 2 * (2 * it + (it + 1)) + (it + 2)
      for (int32_t x : out) ASSERT_EQ(x, 7 * it + 4) << "rank " << r << " iteration " << it;
    }
  });
}

}  // namespace
}  // namespace meshrt
