// The fast reductions and normalisations (kernels::Reduce, Softmax, Normalize,
// SoftmaxCrossEntropy) against the reference kernels on the same random inputs: odd sizes, every
// subset of reduced dims, outputs in permuted dim order, long rows (the 16-lane folds plus a
// tail), scale and bias broadcast from any subset of dims. The fast functions are called directly
// so a silent fallback cannot hide a wrong fast path; one test goes through CpuKernels() dispatch.
#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/kernel_runner.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "kernels/elementwise.h"

namespace meshrt {
namespace {

Tensor Random(const Shape& shape, uint32_t seed, float zero_fraction = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3, 3);
  std::uniform_real_distribution<float> unit(0, 1);
  Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.f32()[i] = unit(rng) < zero_fraction ? 0.0f : dist(rng);
  }
  return t;
}

Shape S(const std::string& text) { return Shape::Parse(text).value(); }

v1::Op MakeOp(const std::string& type, const std::vector<std::string>& dims = {}) {
  v1::Op op;
  op.set_name("case");
  op.set_type(type);
  for (const std::string& d : dims) op.add_dims(d);
  return op;
}

Tensor Reference(const v1::Op& op, std::vector<const Tensor*> in, const Shape& out) {
  Tensor t(DType::kFloat32, out);
  const absl::Status s = ReferenceKernels().Run(op, in, &t);
  EXPECT_TRUE(s.ok()) << s;
  return t;
}

// Every non-empty subset of the dims of [a:3, b:5, c:7], as (reduced dims, kept dims in two
// orders: the input's and reversed).
struct Subset {
  std::vector<std::string> reduced;
  std::vector<std::string> kept_orders;
};
std::vector<Subset> Subsets() {
  const std::vector<Dim> dims = {{"a", 3}, {"b", 5}, {"c", 7}};
  std::vector<Subset> out;
  for (int mask = 1; mask < 8; ++mask) {
    Subset s;
    std::vector<std::string> kept;
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i)) {
        s.reduced.push_back(dims[i].name);
      } else {
        kept.push_back(absl::StrCat(dims[i].name, ":", dims[i].size));
      }
    }
    s.kept_orders.push_back(absl::StrJoin(kept, ","));
    std::reverse(kept.begin(), kept.end());
    if (kept.size() > 1) s.kept_orders.push_back(absl::StrJoin(kept, ","));
    out.push_back(s);
  }
  return out;
}

TEST(ReduceKernelTest, ReduceMatchesReference) {
  using kernels::ReduceKind;
  const std::vector<std::pair<const char*, ReduceKind>> kinds = {
      {"reduce_sum", ReduceKind::kSum},
      {"reduce_mean", ReduceKind::kMean},
      {"reduce_max", ReduceKind::kMax},
      {"reduce_min", ReduceKind::kMin},
      {"reduce_any", ReduceKind::kAny},
      {"reduce_all", ReduceKind::kAll},
      {"reduce_logsumexp", ReduceKind::kLogSumExp},
  };
  // Zeros make any/all mixed; large values check logsumexp's stability.
  const Tensor x = Random(S("a:3,b:5,c:7"), 1, 0.3f);
  Tensor big = Random(S("a:3,b:5,c:7"), 2);
  for (int64_t i = 0; i < big.num_elements(); ++i) big.f32()[i] *= 100;
  int compared = 0;
  for (const auto& [type, kind] : kinds) {
    for (const Subset& s : Subsets()) {
      for (const std::string& out : s.kept_orders) {
        for (const Tensor* in : {&x, static_cast<const Tensor*>(&big)}) {
          // Large values only where they cannot cancel (sums of +-300 lose float digits).
          if (in == &big && kind != ReduceKind::kLogSumExp && kind != ReduceKind::kMax &&
              kind != ReduceKind::kMin) {
            continue;
          }
          SCOPED_TRACE(absl::StrCat(type, " over ", absl::StrJoin(s.reduced, ","), " -> [", out,
                                    "]", in == &big ? " large values" : ""));
          Tensor fast(DType::kFloat32, S(out));
          ASSERT_OK(kernels::Reduce(kind, *in, &fast));
          EXPECT_LE(MaxRelativeError(fast, Reference(MakeOp(type), {in}, S(out))), 1e-5);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 7 * 10 + 3 * 10);
  // A long row: the 16-lane folds and a tail of 7.
  const Tensor row = Random(S("r:2,n:1031"), 3, 0.5f);
  for (const auto& [type, kind] : kinds) {
    SCOPED_TRACE(type);
    Tensor fast(DType::kFloat32, S("r:2"));
    ASSERT_OK(kernels::Reduce(kind, row, &fast));
    EXPECT_LE(MaxRelativeError(fast, Reference(MakeOp(type), {&row}, S("r:2"))), 1e-5);
  }
}

TEST(ReduceKernelTest, SoftmaxAndNormsMatchReference) {
  const Shape xs = S("a:3,b:5,c:7");
  const Tensor x = Random(xs, 4);
  const std::vector<std::string> scale_shapes = {"c:7", "b:5,c:7", "c:7,a:3", ""};
  for (const Subset& s : Subsets()) {
    const std::string dims = absl::StrJoin(s.reduced, ",");
    for (const char* type : {"softmax", "log_softmax"}) {
      SCOPED_TRACE(absl::StrCat(type, " over ", dims));
      Tensor fast(DType::kFloat32, xs);
      ASSERT_OK(kernels::Softmax(x, s.reduced, std::string(type) == "log_softmax", &fast));
      EXPECT_LE(MaxRelativeError(fast, Reference(MakeOp(type, s.reduced), {&x}, xs)), 1e-5);
    }
    {
      SCOPED_TRACE(absl::StrCat("softmax_grad over ", dims));
      const Tensor dy = Random(xs, 8);
      Tensor y(DType::kFloat32, xs), fast(DType::kFloat32, xs);
      ASSERT_OK(kernels::Softmax(x, s.reduced, false, &y));
      ASSERT_OK(kernels::SoftmaxGrad(y, dy, s.reduced, &fast));
      EXPECT_LE(MaxRelativeError(fast, Reference(MakeOp("softmax_grad", s.reduced), {&y, &dy}, xs)),
                1e-5);
    }
    for (const char* type : {"layer_norm", "rms_norm"}) {
      const bool rms = std::string(type) == "rms_norm";
      for (const std::string& ss : scale_shapes) {
        SCOPED_TRACE(absl::StrCat(type, " over ", dims, " scale [", ss, "]"));
        const Tensor scale = Random(S(ss), 5);
        const Tensor bias = Random(S(ss), 6);
        v1::Op op = MakeOp(type, s.reduced);
        (*op.mutable_attrs())["epsilon"].set_f(0.01f);
        std::vector<const Tensor*> in = {&x, &scale};
        if (!rms) in.push_back(&bias);
        Tensor fast(DType::kFloat32, xs);
        ASSERT_OK(
            kernels::Normalize(x, &scale, rms ? nullptr : &bias, s.reduced, 0.01f, rms, &fast));
        EXPECT_LE(MaxRelativeError(fast, Reference(op, in, xs)), 1e-5);
        Tensor plain(DType::kFloat32, xs);
        ASSERT_OK(kernels::Normalize(x, nullptr, nullptr, s.reduced, 0.01f, rms, &plain));
        EXPECT_LE(MaxRelativeError(plain, Reference(op, {&x}, xs)), 1e-5);
      }
    }
  }
}

TEST(ReduceKernelTest, CrossEntropyMatchesReference) {
  const Tensor logits = Random(S("a:3,b:5,c:7"), 7);
  for (const char* targets_shape : {"a:3,b:5,c:7", "c:7,a:3,b:5"}) {
    // Non-negative weights (not only distributions): every term has the same sign, as in use.
    Tensor targets = Random(S(targets_shape), 8);
    for (int64_t i = 0; i < targets.num_elements(); ++i) {
      targets.f32()[i] = std::fabs(targets.f32()[i]) / 3;
    }
    for (const Subset& s : Subsets()) {
      for (const std::string& out : s.kept_orders) {
        SCOPED_TRACE(absl::StrCat("targets [", targets_shape, "] over ",
                                  absl::StrJoin(s.reduced, ","), " -> [", out, "]"));
        Tensor fast(DType::kFloat32, S(out));
        ASSERT_OK(kernels::SoftmaxCrossEntropy(logits, targets, &fast));
        const Tensor want =
            Reference(MakeOp("softmax_cross_entropy", s.reduced), {&logits, &targets}, S(out));
        EXPECT_LE(MaxRelativeError(fast, want), 2e-5);
      }
    }
  }
}

// A causal mask adds -1e9: those entries become exactly 0 (and -1e9-ish in log space), rows and
// the general path agree with the reference.
TEST(ReduceKernelTest, SoftmaxOfMaskedLogits) {
  Tensor x = Random(S("a:3,m:6"), 4);
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 6; ++j) x.f32()[i * 6 + j] -= 1e9f;
  }
  for (const bool log : {false, true}) {
    Tensor fast(DType::kFloat32, S("a:3,m:6"));
    ASSERT_OK(kernels::Softmax(x, {"m"}, log, &fast));
    const Tensor want =
        Reference(MakeOp(log ? "log_softmax" : "softmax", {"m"}), {&x}, S("a:3,m:6"));
    EXPECT_LE(MaxRelativeError(fast, want), 1e-5);
    if (!log) {
      EXPECT_EQ(fast.f32()[1], 0.0f);
    }
  }
}

// Whether two float32 tensors of one shape hold the same bits (NaN payloads, signed zeros).
::testing::AssertionResult SameBits(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << got.shape().ToString() << " vs " << want.shape().ToString();
  }
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (std::memcmp(&got.f32()[i], &want.f32()[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got.f32()[i] << " vs " << want.f32()[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// Logits with the values a mask meets: -1e9 and -inf added to ordinary logits, a NaN, an +inf
// logit where the mask is -inf (NaN), and large logits.
Tensor Logits(const Shape& shape, uint32_t seed) {
  Tensor t = Random(shape, seed);
  const float inf = std::numeric_limits<float>::infinity();
  t.f32()[3] = std::numeric_limits<float>::quiet_NaN();
  t.f32()[t.num_elements() - 2] = inf;
  for (int64_t i = 5; i < t.num_elements(); i += 11) t.f32()[i] *= 1e4f;
  return t;
}
Tensor Mask(const Shape& shape, uint32_t seed) {
  Tensor t = Random(shape, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.f32()[i] = i % 3 == 0 ? -1e9f : i % 7 == 1 ? -std::numeric_limits<float>::infinity() : 0.0f;
  }
  return t;
}

// AddSoftmax against its definition: Binary(add) into a tensor, then Softmax, bit for bit, with
// the addends in the dims orders the executor meets (the causal mask [memory, length] against
// logits [batch, heads, length, memory]), either one broadcast, rows over one or two dims, and
// dims that are not innermost (the general path).
TEST(ReduceKernelTest, AddSoftmaxIsBinaryAddThenSoftmaxBitForBit) {
  const Shape xs = S("b:2,h:3,l:5,m:19");
  struct Case {
    std::string a, b;
    std::vector<std::string> dims;
  };
  const std::vector<Case> cases = {
      {"b:2,h:3,l:5,m:19", "m:19,l:5", {"m"}},          // the causal mask, transposed
      {"m:19,l:5", "b:2,h:3,l:5,m:19", {"m"}},          // the mask first
      {"b:2,h:3,l:5,m:19", "b:2,h:3,l:5,m:19", {"m"}},  // same shape
      {"b:2,h:3,l:5,m:19", "m:19,l:5,h:3,b:2", {"m"}},  // all dims reversed
      {"b:2,h:3,l:5,m:19", "l:5,m:19", {"m"}},          // in order, broadcast over b, h
      {"b:2,h:3,l:5,m:19", "l:5", {"m"}},               // one value per row
      {"b:2,h:3,l:5,m:19", "", {"m"}},                  // a scalar
      {"b:2,h:3,l:5,m:19", "m:19,l:5", {"l", "m"}},     // rows over two dims
      {"b:2,h:3,l:5,m:19", "m:19,b:2", {"m", "l"}},     // two dims, the addend gathered
      {"b:2,h:3,l:5,m:19", "m:19,l:5", {"l"}},          // not innermost: the general path
      {"b:2,h:3,l:5,m:19", "m:19,l:5", {"h", "m"}},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    for (const bool log : {false, true}) {
      SCOPED_TRACE(absl::StrCat("[", c.a, "] + [", c.b, "] ", log ? "log_" : "", "softmax over ",
                                absl::StrJoin(c.dims, ",")));
      const bool a_full = S(c.a).rank() == xs.rank();
      const Tensor a = a_full ? Logits(S(c.a), seed++) : Mask(S(c.a), seed++);
      const Tensor b = a_full ? Mask(S(c.b), seed++) : Logits(S(c.b), seed++);
      Tensor sum(DType::kFloat32, xs), want(DType::kFloat32, xs);
      ASSERT_OK(kernels::Binary(kernels::BinaryOp::kAdd, a, b, &sum));
      ASSERT_OK(kernels::Softmax(sum, c.dims, log, &want));
      Tensor got = Tensor::Uninitialized(DType::kFloat32, xs);
      std::fill(got.f32(), got.f32() + got.num_elements(), 12345.0f);  // every element written
      ASSERT_OK(kernels::AddSoftmax(a, b, c.dims, log, &got));
      EXPECT_TRUE(SameBits(got, want));
      int nans = 0, zeros = 0;
      for (int64_t i = 0; i < got.num_elements(); ++i) {
        nans += std::isnan(got.f32()[i]);
        zeros += got.f32()[i] == 0.0f;
      }
      EXPECT_GT(nans, 0);  // the NaN and inf - inf reached the rows
      if (!log) {
        EXPECT_GT(zeros, 0);  // exp underflows to exactly 0 beside a large or unmasked logit
      }
    }
  }
}

// Through CpuKernels(): the executor's "_add_softmax" / "_add_log_softmax" ops, same bits as the
// runner's add then softmax; int32 addends are not the fast kernels' (no reference kernel either:
// Unimplemented, so the executor runs the two ops instead).
TEST(ReduceKernelTest, CpuKernelsRunTheFusedAddSoftmax) {
  const Shape xs = S("b:2,l:3,m:9");
  const Tensor a = Logits(xs, 40);
  const Tensor b = Mask(S("m:9,l:3"), 41);
  for (const char* type : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(type);
    Tensor sum(DType::kFloat32, xs), want(DType::kFloat32, xs), got(DType::kFloat32, xs);
    ASSERT_OK(CpuKernels().Run(MakeOp("add"), {&a, &b}, &sum));
    ASSERT_OK(CpuKernels().Run(MakeOp(type, {"m"}), {&sum}, &want));
    ASSERT_OK(CpuKernels().Run(MakeOp(absl::StrCat("_add_", type), {"m"}), {&a, &b}, &got));
    EXPECT_TRUE(SameBits(got, want));
  }
  const Tensor ints(DType::kInt32, xs);
  Tensor out(DType::kInt32, xs);
  EXPECT_TRUE(StatusIs(CpuKernels().Run(MakeOp("_add_softmax", {"m"}), {&ints, &ints}, &out),
                       absl::StatusCode::kUnimplemented));
}

TEST(ReduceKernelTest, AddSoftmaxErrorsNameTheProblem) {
  const Tensor x = Random(S("a:3,b:5"), 9);
  Tensor out(DType::kFloat32, S("a:3,b:5"));
  const Tensor q = Random(S("q:2"), 1);
  EXPECT_TRUE(StatusIs(kernels::AddSoftmax(x, q, {"b"}, false, &out),
                       absl::StatusCode::kInvalidArgument, {"addend b", "'q'"}));
  const Tensor wide = Random(S("a:3,b:4"), 2);
  EXPECT_TRUE(StatusIs(kernels::AddSoftmax(wide, x, {"b"}, false, &out),
                       absl::StatusCode::kInvalidArgument, {"addend a", "'b'"}));
  EXPECT_TRUE(StatusIs(kernels::AddSoftmax(x, x, {"z"}, true, &out),
                       absl::StatusCode::kInvalidArgument, {"'z'"}));
  const Tensor ints(DType::kInt32, S("a:3"));
  EXPECT_TRUE(StatusIs(kernels::AddSoftmax(x, ints, {"b"}, false, &out),
                       absl::StatusCode::kUnimplemented, {"addend b", "int32"}));
}

TEST(ReduceKernelTest, ErrorsNameTheProblem) {
  const Tensor x = Random(S("a:3,b:5"), 9);
  Tensor out(DType::kFloat32, S("a:3,b:5"));
  EXPECT_TRUE(StatusIs(kernels::Softmax(x, {"z"}, false, &out), absl::StatusCode::kInvalidArgument,
                       {"'z'"}));
  EXPECT_TRUE(StatusIs(kernels::Softmax(x, {}, false, &out), absl::StatusCode::kInvalidArgument));
  Tensor wrong(DType::kFloat32, S("b:5,a:3"));
  EXPECT_TRUE(
      StatusIs(kernels::Softmax(x, {"a"}, false, &wrong), absl::StatusCode::kInvalidArgument));
  const Tensor scale = Random(S("q:2"), 1);
  EXPECT_TRUE(StatusIs(kernels::Normalize(x, &scale, nullptr, {"b"}, 0, true, &out),
                       absl::StatusCode::kInvalidArgument, {"scale", "'q'"}));
  Tensor loss(DType::kFloat32, S("q:3"));
  EXPECT_TRUE(StatusIs(kernels::SoftmaxCrossEntropy(x, x, &loss),
                       absl::StatusCode::kInvalidArgument, {"'q'"}));
}

// Through CpuKernels(): dispatch of dims, epsilon and the optional inputs.
TEST(ReduceKernelTest, CpuKernelsDispatch) {
  const Shape xs = S("a:3,b:5,c:7");
  const Tensor x = Random(xs, 10);
  const Tensor g = Random(S("c:7"), 11);
  const Tensor t = Random(xs, 12);
  v1::Op ln = MakeOp("layer_norm", {"b", "c"});
  (*ln.mutable_attrs())["epsilon"].set_f(0.5f);
  v1::Op rms = MakeOp("rms_norm", {"c"});
  (*rms.mutable_attrs())["epsilon"].set_i(1);
  const std::vector<std::pair<v1::Op, std::vector<const Tensor*>>> cases = {
      {MakeOp("softmax", {"b"}), {&x}},
      {MakeOp("log_softmax", {"a", "c"}), {&x}},
      {ln, {&x, &g, &g}},
      {ln, {&x}},
      {rms, {&x, &g}},
      {MakeOp("reduce_min", {"b"}), {&x}},
      {MakeOp("reduce_logsumexp"), {&x}},
  };
  for (const auto& [op, in] : cases) {
    SCOPED_TRACE(op.type());
    const bool reduces = op.type().rfind("reduce_", 0) == 0;
    const Shape out_shape = reduces ? (op.dims().empty() ? S("") : S("a:3,c:7")) : xs;
    Tensor fast(DType::kFloat32, out_shape);
    ASSERT_OK(CpuKernels().Run(op, in, &fast));
    EXPECT_LE(MaxRelativeError(fast, Reference(op, in, out_shape)), 1e-5);
  }
  Tensor loss(DType::kFloat32, S("c:7,a:3"));
  const v1::Op xent = MakeOp("softmax_cross_entropy", {"b"});
  ASSERT_OK(CpuKernels().Run(xent, {&x, &t}, &loss));
  EXPECT_LE(MaxRelativeError(loss, Reference(xent, {&x, &t}, S("c:7,a:3"))), 1e-5);
}

}  // namespace
}  // namespace meshrt
