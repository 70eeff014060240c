#include "worker/export/artifact.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StagedDirectoryTest, ANewAttemptRemovesTheStagingLeftOverByAKilledWriter) {
  const fs::path root = fs::path(::testing::TempDir()) / "staged_leftovers";
  fs::remove_all(root);
  fs::create_directories(root / "model.partial-4242-1700000000");
  std::ofstream(root / "model.partial-4242-1700000000" / "model.safetensors") << "half";
  fs::create_directories(root / "model-other.partial-1-2");  // another output's: kept

  auto staged = StagedDirectory::Create((root / "model").string(), false);
  ASSERT_TRUE(staged.ok()) << staged.status();
  std::ofstream(fs::path(staged->staging_path()) / "model.safetensors") << "whole";
  ASSERT_TRUE(staged->Commit().ok());

  EXPECT_EQ(Entries(root), (std::vector<std::string>{"model", "model-other.partial-1-2"}));
  EXPECT_EQ(Entries(root / "model"), std::vector<std::string>{"model.safetensors"});
}

TEST(StagedDirectoryTest, AnExistingOutputIsRefusedUnlessOverwrite) {
  const fs::path root = fs::path(::testing::TempDir()) / "staged_exists";
  fs::remove_all(root);
  fs::create_directories(root / "model");
  auto refused = StagedDirectory::Create((root / "model").string(), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), "OUTPUT_EXISTS");
  auto replaced = StagedDirectory::Create((root / "model").string(), true);
  ASSERT_TRUE(replaced.ok());
  EXPECT_TRUE(replaced->Commit().ok());
}

TEST(StagedDirectoryTest, AJobReplacesOnlyTheOutputItsOwnEarlierAttemptWrote) {
  const fs::path root = fs::path(::testing::TempDir()) / "owned_outputs";
  fs::remove_all(root);
  fs::create_directories(root / "mine");
  fs::create_directories(root / "theirs");
  ASSERT_TRUE(MarkOutputOwner((root / "mine").string(), "jobs/a").ok());
  ASSERT_TRUE(MarkOutputOwner((root / "theirs").string(), "jobs/b").ok());
  fs::create_directories(root / "unmarked");

  for (const char* d : {"mine", "theirs", "unmarked", "absent"})
    ASSERT_TRUE(ReclaimOwnOutput((root / d).string(), "jobs/a").ok()) << d;
  EXPECT_FALSE(fs::exists(root / "mine"));
  EXPECT_TRUE(fs::exists(root / "theirs"));
  EXPECT_TRUE(fs::exists(root / "unmarked"));
  // What is left is refused as before.
  auto refused = StagedDirectory::Create((root / "theirs").string(), false);
  EXPECT_EQ(refused.status().reason(), "OUTPUT_EXISTS");
}

}  // namespace
}  // namespace quantd::exporter
