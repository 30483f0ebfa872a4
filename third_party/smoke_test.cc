#include <gloo/config.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include "absl/strings/str_cat.h"
TEST(Smoke, Links) { EXPECT_EQ(absl::StrCat("a", 1), "a1"); }
