// softsign(x) = x / (1 + |x|): float32 in and out, elementwise, lowered locally. The whole op in
// one file: its math (reference and fast loop), dtype rule, cost and gradient.
#include <cmath>
#include <cstdint>

#include "core/ops/gradient.h"
#include "core/ops/op_cost.h"
#include "core/ops/ops_math.h"

namespace meshrt {
namespace {

double Softsign(double x) { return x / (1.0 + std::fabs(x)); }

// One pass, no branches: the compiler vectorises it.
void SoftsignLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::fabs(x[i]));
}

// d/dx = 1 / (1 + |x|)^2
absl::Status SoftsignGradient(Backward& g) {
  const TensorRef denominator = g.WithS("add", g.Unary("abs", g.in[0]), 1.0f);
  g.Grad(0, g.b.Mul(g.dy, g.Unary("square", g.Unary("reciprocal", denominator))));
  return g.b.status();
}

OpInfo SoftsignOp() {
  OpInfo info = math::UnaryOp<&Softsign>("softsign", true, "x / (1 + |x|)",
                                         InputDTypes::kFloating);
  info.fast = &math::FastUnary<&SoftsignLoop>;
  info.cost = &PerOutputElementCost<kDivideFlops>;
  info.gradient = &SoftsignGradient;
  return info;
}

const bool kRegistered = RegisterOps({SoftsignOp()});

}  // namespace
}  // namespace meshrt
