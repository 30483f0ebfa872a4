#include <cmath>

#include "core/testing/op_conformance.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

double Softsign(double x) { return x / (1.0 + std::fabs(x)); }

TEST(SoftsignTest, Conforms) {
  op_conformance::ExpectUnaryOpConforms("softsign", &Softsign, -3.0f, 3.0f);
}

}  // namespace
}  // namespace meshrt
