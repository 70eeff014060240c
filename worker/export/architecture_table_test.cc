#include "worker/export/architecture_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace quantd::exporter {
namespace {

// docs/worker.md holds the generated table between these markers; on a
// mismatch, paste what `bazel run //worker/export:architecture_table` prints.
TEST(ArchitectureTableTest, DocsHoldTheGeneratedTable) {
  std::ifstream in("docs/worker.md");
  ASSERT_TRUE(in) << "docs/worker.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- architecture-table: begin -->\n",
                    end = "<!-- architecture-table: end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), ArchitectureTableMarkdown());
}

TEST(ArchitectureTableTest, RowsFollowTheCreateJobChecks) {
  const std::string t = ArchitectureTableMarkdown();
  EXPECT_NE(t.find("| LlamaForCausalLM | yes | yes | yes | yes | yes | yes |"), std::string::npos)
      << t;
  EXPECT_NE(t.find("| Qwen3ForCausalLM | yes | yes | yes | yes | no | yes |"), std::string::npos)
      << t;
  EXPECT_NE(t.find("| Phi3ForCausalLM | yes | yes | yes | yes | no | no |"), std::string::npos)
      << t;
  EXPECT_NE(t.find("| GPT2LMHeadModel | yes | no | no | yes | no | no |"), std::string::npos) << t;
  EXPECT_NE(t.find("| LlamaForCausalLM, rope_scaling longrope | yes | yes | yes | no | no | yes |"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace quantd::exporter
