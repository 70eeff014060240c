#include "server/common/json_log.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace quantd::server {
namespace {

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST(JsonLogTest, WritesOneParsableObjectPerLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  SetLogSink(f);
  Log(LogLevel::kInfo, "job leased",
      {{"job", "jobs/abc"}, {"tenant", "t1"}, {"worker", "w-1"}, {"attempt", 2}});
  Log(LogLevel::kDebug, "dropped below the minimum level");
  Log(LogLevel::kError, "bad \xff byte");
  SetLogSink(nullptr);
  std::string text = ReadAll(f);
  std::fclose(f);

  size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  auto first = nlohmann::json::parse(text.substr(0, nl));
  EXPECT_EQ(first["msg"], "job leased");
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["job"], "jobs/abc");
  EXPECT_EQ(first["tenant"], "t1");
  EXPECT_EQ(first["worker"], "w-1");
  EXPECT_EQ(first["attempt"], 2);
  EXPECT_EQ(first["ts"].get<std::string>().size(),
            std::string("2024-01-01T00:00:00.000000Z").size());

  auto second = nlohmann::json::parse(text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1));
  EXPECT_EQ(second["level"], "error");
  EXPECT_EQ(second["msg"], "bad \xEF\xBF\xBD byte");
  EXPECT_EQ(text.find('\n', text.find('\n', nl + 1) + 1), std::string::npos);
}

}  // namespace
}  // namespace quantd::server
