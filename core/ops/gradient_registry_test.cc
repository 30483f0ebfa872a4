// RegisterGradients / RegisterZeroGradients (core/ops/ops.h): facets attach whatever the order of the
// static initializers, unknown types and facets that disagree with `differentiable` are reported,
// a second facet for one type CHECK-fails. (Its own binary: it registers deliberately broken
// facets, so CheckGradientFacets is not OK here.)
#include <string>

#include "absl/strings/match.h"
#include "core/ops/gradient.h"
#include "core/ops/ops.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

absl::Status TestRule(Backward& g) { return g.b.status(); }

OpInfo TestOp(const std::string& type, bool differentiable) {
  return OpInfo{type, OpFamily::kElementwise, 1, 1, differentiable, "test only", "none"};
}

// Before its op: "_test_late" is registered in a test body, long after static initialisation.
// "_test_never" is never registered.
const bool kPending = RegisterGradients({{"_test_late", &TestRule}, {"_test_never", &TestRule}}) &&
                      RegisterZeroGradients({"_test_late_zero"});
// After its op: attached at once.
const bool kAttached = RegisterOps({TestOp("_test_early", true), TestOp("_test_marked", true)}) &&
                       RegisterGradients({{"_test_early", &TestRule}});

TEST(GradientRegistryTest, FacetRegisteredAfterItsOpAttachesAtOnce) {
  ASSERT_TRUE(kAttached);
  EXPECT_EQ(FindOp("_test_early")->gradient, &TestRule);
  EXPECT_FALSE(FindOp("_test_early")->zero_gradient);
}

TEST(GradientRegistryTest, FacetRegisteredBeforeItsOpWaitsForIt) {
  ASSERT_TRUE(kPending);
  ASSERT_TRUE(absl::StrContains(CheckGradientFacets().message(), "'_test_late'"));
  RegisterOps({TestOp("_test_late", true), TestOp("_test_late_zero", false)});
  EXPECT_EQ(FindOp("_test_late")->gradient, &TestRule);
  EXPECT_TRUE(FindOp("_test_late_zero")->zero_gradient);
  EXPECT_EQ(FindOp("_test_late_zero")->gradient, nullptr);
  EXPECT_FALSE(absl::StrContains(CheckGradientFacets().message(), "'_test_late'"));
}

TEST(GradientRegistryTest, UnknownTypesAndDisagreementsAreReported) {
  const absl::Status s = CheckGradientFacets();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInternal, {"unknown op type '_test_never'"})) << s;
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "'_test_marked' is marked differentiable but has no "
                                "gradient rule"))
      << s;
  // The real families agree: nothing else is named.
  EXPECT_FALSE(absl::StrContains(s.message(), "'add'")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "'less'")) << s;
}

TEST(GradientRegistryDeathTest, SecondFacetForATypeFails) {
  EXPECT_DEATH(RegisterGradients({{"add", &TestRule}}), "registered twice for op type add");
  EXPECT_DEATH(RegisterZeroGradients({"less"}), "registered twice for op type less");
  EXPECT_DEATH(RegisterZeroGradients({"_test_never"}), "registered twice for op type _test_never");
}

}  // namespace
}  // namespace meshrt
