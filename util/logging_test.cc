#include "util/logging.h"

#include "absl/time/civil_time.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

absl::Time At() {
  return absl::FromCivil(absl::CivilSecond(2026, 12, 3, 7, 40, 12), absl::UTCTimeZone()) +
         absl::Milliseconds(345);
}

TEST(LoggingTest, TextLinesAreDatedInUtcAndNameTheSessionAndStep) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "W", At(), "meshrt-worker", "s-1", 12, "slow"),
            "W 2026-12-03T07:40:12.345Z session=s-1 step=12 slow");
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "I", At(), "meshrt-worker", "", -1, "up"),
            "I 2026-12-03T07:40:12.345Z up");
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "I", At(), "meshrt", "s-2", -1, "made"),
            "I 2026-12-03T07:40:12.345Z session=s-2 made");
}

TEST(LoggingTest, JsonLinesAreOneObjectWithEscapedStrings) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, "E", At(), "meshrt-coordinator", "s-1", 0,
                          "step \"3\" failed:\n\tbad\\path"),
            "{\"time\":\"2026-12-03T07:40:12.345Z\",\"level\":\"error\","
            "\"program\":\"meshrt-coordinator\",\"session\":\"s-1\",\"step\":0,"
            "\"message\":\"step \\\"3\\\" failed:\\n\\tbad\\\\path\"}");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, "I", At(), "p", "", -1, "x"),
            "{\"time\":\"2026-12-03T07:40:12.345Z\",\"level\":\"info\",\"program\":\"p\","
            "\"message\":\"x\"}");
}

TEST(LoggingTest, JsonQuotingKeepsUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuoted("d_ff \xc3\xa9 \xe2\x82\xac"), "\"d_ff \xc3\xa9 \xe2\x82\xac\"");
  EXPECT_EQ(JsonQuoted(std::string("a\x01z\x7f", 4)), "\"a\\u0001z\\u007f\"");
  // A lone continuation byte, a truncated sequence, an overlong encoding, a surrogate.
  EXPECT_EQ(JsonQuoted("\x80"), "\"\\ufffd\"");
  EXPECT_EQ(JsonQuoted("ok\xe2\x82"), "\"ok\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuoted("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuoted("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST(LoggingTest, ContextsNestAndRestore) {
  // The context is what LogLine passes to FormatLogLine; observe it through stderr.
  testing::internal::CaptureStderr();
  {
    ScopedLogContext session("s-9");
    LogInfo("a");
    {
      ScopedLogContext step("s-9", 4);
      LogWarning("b");
    }
    LogInfo("c");
  }
  LogError("d");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("Z session=s-9 a\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Z session=s-9 step=4 b\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Z session=s-9 c\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Z d\n"), std::string::npos) << out;
}

TEST(LoggingTest, FormatNamesParse) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--log_format 'xml'"), std::string::npos);
}

}  // namespace
}  // namespace meshrt
