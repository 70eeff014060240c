#include "worker/export/serving_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace quantd::exporter {
namespace {

// docs/export.md holds the generated table between these markers; on a
// mismatch, paste what `bazel run //worker/export:serving_table` prints.
TEST(ServingTableTest, DocsHoldTheGeneratedTable) {
  std::ifstream in("docs/export.md");
  ASSERT_TRUE(in) << "docs/export.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- serving-table: begin -->\n", end = "<!-- serving-table: end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), ServingTableMarkdown());
}

TEST(ServingTableTest, RowsSayWhoLoadsWhat) {
  const std::string t = ServingTableMarkdown();
  EXPECT_NE(t.find("| w_fp8_a_fp8 | yes | yes | yes | yes | - | yes |"), std::string::npos) << t;
  EXPECT_NE(t.find("| w_int4_per_group_sym | no | yes | no | yes | yes | yes |"), std::string::npos) << t;
  EXPECT_NE(t.find("| w_mxfp4_a_mxfp4 | no | yes | - | - | - | - |"), std::string::npos) << t;
}

}  // namespace
}  // namespace quantd::exporter
