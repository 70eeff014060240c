#include "worker/common/dashed_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace quantd {
namespace {

std::vector<std::string> Rewrite(std::vector<std::string> in) {
  std::vector<char*> argv;
  for (auto& s : in) argv.push_back(s.data());
  DashedFlagArgv d(static_cast<int>(argv.size()), argv.data());
  return std::vector<std::string>(d.argv(), d.argv() + d.argc());
}

TEST(DashedFlagArgvTest, RewritesNamesNeverValuesAndStopsAtDoubleDash) {
  EXPECT_EQ(Rewrite({"quantd", "--data-dir=/a-b", "--local-workers", "2", "-v", "--x", "--",
                     "--keep-this"}),
            (std::vector<std::string>{"quantd", "--data_dir=/a-b", "--local_workers", "2", "-v",
                                      "--x", "--", "--keep-this"}));
  EXPECT_EQ(Rewrite({"w", "--token-file", "my-token"}),
            (std::vector<std::string>{"w", "--token_file", "my-token"}));
}

}  // namespace
}  // namespace quantd
