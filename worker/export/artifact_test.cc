#include "worker/export/artifact.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every entry below `dir` (links not followed): files with their content,
// links with their target, directories as "dir".
std::map<std::string, std::string> Tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it) {
    const std::string rel = it->path().lexically_relative(dir).string();
    if (it->is_symlink()) {
      out[rel] = "link:" + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "dir";
    } else {
      out[rel] = Read(it->path());
    }
  }
  return out;
}

class StagedDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::canonical(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    root_ = base_ / "out";
    victim_ = base_ / "victim";
    fs::create_directories(root_);
    Write(victim_ / "secret.txt", "do not touch");
    Write(victim_ / "sub" / "keep.bin", "precious");
    victim_before_ = Tree(victim_);
  }

  OutputOwner Owner(const std::string& job = "jobs/a", const std::string& tenant = "acme") {
    return OutputOwner{root_.string(), job, tenant};
  }

  // A directory a quantd job of `tenant` wrote.
  void Exported(const fs::path& dir, const std::string& job, const std::string& tenant) {
    auto staged = StagedDirectory::Create(dir.string(), false, Owner(job, tenant));
    ASSERT_TRUE(staged.ok()) << staged.status();
    Write(fs::path(staged->staging_path()) / "model.safetensors", "old " + job);
    ASSERT_TRUE(staged->Commit().ok());
  }

  void ExpectVictimUntouched() { EXPECT_EQ(Tree(victim_), victim_before_); }

  fs::path base_, root_, victim_;
  std::map<std::string, std::string> victim_before_;
};

TEST_F(StagedDirectoryTest, WritesAtomicallyWithAnOwnerMarker) {
  auto staged = StagedDirectory::Create((root_ / "a" / "b" / "model").string(), false, Owner());
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_THAT(staged->staging_path(), HasSubstr("/proc/self/fd/"));
  Write(fs::path(staged->staging_path()) / "model.safetensors", "whole");
  EXPECT_FALSE(fs::exists(root_ / "a" / "b" / "model"));
  ASSERT_TRUE(staged->Commit().ok());
  EXPECT_EQ(Entries(root_ / "a" / "b"), std::vector<std::string>{"model"});
  EXPECT_EQ(Entries(root_ / "a" / "b" / "model"),
            (std::vector<std::string>{".quantd-job", "model.safetensors"}));
  EXPECT_EQ(Read(root_ / "a" / "b" / "model" / kOwnerFile), "job=jobs/a\ntenant=acme\n");
  auto art = DescribeArtifact(ExportFormat::kHfFakeQuantized, *staged, "model.safetensors");
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->path, (root_ / "a" / "b" / "model").string());
  ASSERT_EQ(art->files.size(), 1u);  // the marker is not part of the model
  EXPECT_EQ(art->files[0].path, "model.safetensors");
  EXPECT_EQ(art->bytes, 5);
}

TEST_F(StagedDirectoryTest, AnUncommittedStagingIsRemoved) {
  {
    auto staged = StagedDirectory::Create((root_ / "model").string(), false, Owner());
    ASSERT_TRUE(staged.ok());
    Write(fs::path(staged->staging_path()) / "half", "x");
  }
  EXPECT_TRUE(Entries(root_).empty());
}

TEST_F(StagedDirectoryTest, ANewAttemptRemovesOnlyItsOwnLeftoverStaging) {
  // What a killed attempt of the same job leaves: a staging directory with
  // its marker. Another writer's look-alike and a stranger's are kept.
  Write(root_ / "model.partial-4242-1700" / kOwnerFile, FormatOwnerMarker(Owner()));
  Write(root_ / "model.partial-4242-1700" / "model.safetensors", "half");
  Write(root_ / "model.partial-1-other" / kOwnerFile, FormatOwnerMarker(Owner("jobs/b")));
  Write(root_ / "model.partial-user-notes" / "notes.txt", "mine");
  fs::create_directories(root_ / "model-other.partial-1-2");

  auto staged = StagedDirectory::Create((root_ / "model").string(), false, Owner());
  ASSERT_TRUE(staged.ok()) << staged.status();
  Write(fs::path(staged->staging_path()) / "model.safetensors", "whole");
  ASSERT_TRUE(staged->Commit().ok());
  EXPECT_EQ(Entries(root_),
            (std::vector<std::string>{"model", "model-other.partial-1-2", "model.partial-1-other",
                                      "model.partial-user-notes"}));
  EXPECT_EQ(Read(root_ / "model" / "model.safetensors"), "whole");
}

TEST_F(StagedDirectoryTest, AnExistingOutputIsRefusedUnlessOverwriteOfAQuantdOutput) {
  // Not written by quantd: never replaced, overwrite or not.
  Write(root_ / "plain" / "weights.bin", "user data");
  for (bool overwrite : {false, true}) {
    auto refused = StagedDirectory::Create((root_ / "plain").string(), overwrite, Owner());
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(refused.status().reason(), "OUTPUT_EXISTS");
    if (overwrite) {
      EXPECT_THAT(refused.status().message(), HasSubstr("not written by quantd"));
    }
  }
  EXPECT_EQ(Read(root_ / "plain" / "weights.bin"), "user data");
  EXPECT_EQ(Entries(root_), std::vector<std::string>{"plain"});

  // A file or a link at the output: never replaced.
  Write(root_ / "file", "x");
  fs::create_symlink(victim_, root_ / "link");
  for (const char* name : {"file", "link"}) {
    auto refused = StagedDirectory::Create((root_ / name).string(), true, Owner());
    EXPECT_EQ(refused.status().reason(), "OUTPUT_EXISTS") << name;
  }

  // Another tenant's job wrote it: refused and kept.
  Exported(root_ / "theirs", "jobs/g", "globex");
  auto other_tenant = StagedDirectory::Create((root_ / "theirs").string(), true, Owner());
  EXPECT_EQ(other_tenant.status().reason(), "OUTPUT_EXISTS");
  EXPECT_THAT(other_tenant.status().message(), HasSubstr("another tenant"));
  EXPECT_EQ(Read(root_ / "theirs" / "model.safetensors"), "old jobs/g");

  // The same tenant's earlier job: replaced only with overwrite.
  Exported(root_ / "ours", "jobs/old", "acme");
  EXPECT_EQ(StagedDirectory::Create((root_ / "ours").string(), false, Owner()).status().reason(),
            "OUTPUT_EXISTS");
  // A link inside the old output is removed as a link.
  fs::create_symlink(victim_, root_ / "ours" / "evil");
  auto replaced = StagedDirectory::Create((root_ / "ours").string(), true, Owner());
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  Write(fs::path(replaced->staging_path()) / "model.safetensors", "new");
  ASSERT_TRUE(replaced->Commit().ok());
  EXPECT_EQ(Tree(root_ / "ours"),
            (std::map<std::string, std::string>{{".quantd-job", "job=jobs/a\ntenant=acme\n"},
                                                {"model.safetensors", "new"}}));
  ExpectVictimUntouched();
  for (const std::string& e : Entries(root_)) EXPECT_EQ(e.find(".old-"), std::string::npos) << e;
}

TEST_F(StagedDirectoryTest, AJobReplacesWhatItsOwnEarlierAttemptWrote) {
  Exported(root_ / "model", "jobs/a", "acme");
  auto again = StagedDirectory::Create((root_ / "model").string(), false, Owner());
  ASSERT_TRUE(again.ok()) << again.status();
  Write(fs::path(again->staging_path()) / "model.safetensors", "second");
  ASSERT_TRUE(again->Commit().ok());
  EXPECT_EQ(Read(root_ / "model" / "model.safetensors"), "second");
}

TEST_F(StagedDirectoryTest, OutputsStayBelowTheRootWithoutFollowingLinks) {
  fs::create_symlink(victim_, root_ / "link");
  auto linked = StagedDirectory::Create((root_ / "link" / "model").string(), false, Owner());
  EXPECT_EQ(linked.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(linked.status().message(), HasSubstr("is a symbolic link"));
  auto deeper = StagedDirectory::Create((root_ / "link" / "a" / "model").string(), false, Owner());
  EXPECT_EQ(deeper.status().code(), StatusCode::kPermissionDenied);

  auto outside =
      StagedDirectory::Create((base_ / "elsewhere" / "model").string(), false, Owner());
  EXPECT_EQ(outside.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StagedDirectory::Create(root_.string(), false, Owner()).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(StagedDirectory::Create((root_ / ".." / "victim").string(), true, Owner())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(StagedDirectory::Create("relative/x", false, Owner()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(base_ / "elsewhere"));
  ExpectVictimUntouched();
}

// Issue 17: a symlink swapped in between the check and the write.
TEST_F(StagedDirectoryTest, ASymlinkSwappedInAfterCreateRedirectsNothing) {
  auto staged = StagedDirectory::Create((root_ / "sub" / "model").string(), false, Owner());
  ASSERT_TRUE(staged.ok()) << staged.status();
  // The parent is moved away and replaced by a link to the victim.
  fs::rename(root_ / "sub", root_ / "sub-moved");
  fs::create_symlink(victim_, root_ / "sub");
  Write(fs::path(staged->staging_path()) / "model.safetensors", "weights");
  ASSERT_TRUE(staged->Commit().ok());
  ExpectVictimUntouched();
  // The output went into the directory that was checked, where it now is.
  EXPECT_EQ(Read(root_ / "sub-moved" / "model" / "model.safetensors"), "weights");
}

TEST_F(StagedDirectoryTest, ALinkPlantedAtTheOutputBeforeCommitIsRefused) {
  for (bool overwrite : {false, true}) {
    const fs::path out = root_ / (overwrite ? "replace" : "fresh");
    if (overwrite) Exported(out, "jobs/old", "acme");
    auto staged = StagedDirectory::Create(out.string(), overwrite, Owner());
    ASSERT_TRUE(staged.ok()) << staged.status();
    Write(fs::path(staged->staging_path()) / "model.safetensors", "weights");
    // The output's name now points at the victim.
    if (overwrite) fs::rename(out, root_ / "stolen");
    fs::create_symlink(victim_, out);
    Status committed = staged->Commit();
    EXPECT_EQ(committed.code(), StatusCode::kFailedPrecondition) << committed;
    EXPECT_EQ(committed.reason(), "OUTPUT_EXISTS");
    EXPECT_TRUE(fs::is_symlink(out));
    ExpectVictimUntouched();
  }
}

TEST_F(StagedDirectoryTest, ToolsWithoutARootWriteBelowTheDeepestExistingDirectory) {
  fs::create_symlink(root_, base_ / "out-link");
  auto staged = StagedDirectory::Create((base_ / "out-link" / "new" / "model").string(), false);
  ASSERT_TRUE(staged.ok()) << staged.status();
  Write(fs::path(staged->staging_path()) / "x", "y");
  ASSERT_TRUE(staged->Commit().ok());
  EXPECT_EQ(Read(root_ / "new" / "model" / "x"), "y");
  EXPECT_EQ(Read(root_ / "new" / "model" / kOwnerFile), "job=\ntenant=\n");
}

TEST_F(StagedDirectoryTest, CheckOutputWritableSaysEarlyWhatCreateWouldRefuse) {
  EXPECT_TRUE(CheckOutputWritable((root_ / "new" / "deeper" / "model").string(), false, Owner())
                  .ok());
  EXPECT_FALSE(fs::exists(root_ / "new"));  // nothing created
  fs::create_symlink(victim_, root_ / "link");
  EXPECT_EQ(CheckOutputWritable((root_ / "link" / "model").string(), false, Owner()).code(),
            StatusCode::kPermissionDenied);
  Write(root_ / "plain" / "x", "user data");
  EXPECT_EQ(CheckOutputWritable((root_ / "plain").string(), true, Owner()).reason(),
            "OUTPUT_EXISTS");
  Exported(root_ / "ours", "jobs/old", "acme");
  EXPECT_EQ(CheckOutputWritable((root_ / "ours").string(), false, Owner()).reason(),
            "OUTPUT_EXISTS");
  EXPECT_TRUE(CheckOutputWritable((root_ / "ours").string(), true, Owner()).ok());
  EXPECT_TRUE(CheckOutputWritable((root_ / "ours").string(), false, Owner("jobs/old")).ok());
  EXPECT_EQ(CheckOutputWritable((base_ / "elsewhere").string(), true, Owner()).code(),
            StatusCode::kPermissionDenied);
  ExpectVictimUntouched();
}

TEST(OwnerMarkerTest, RoundTripsAndRefusesOtherText) {
  OutputOwner owner{"", "jobs/x", "acme"};
  auto back = ParseOwnerMarker(FormatOwnerMarker(owner));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->job, "jobs/x");
  EXPECT_EQ(back->tenant, "acme");
  EXPECT_FALSE(ParseOwnerMarker("jobs/x\n").has_value());  // the old, tenant-less form
  EXPECT_FALSE(ParseOwnerMarker("").has_value());
  EXPECT_FALSE(ParseOwnerMarker("job=a\ntenant=b\nrm=-rf\n").has_value());
}

}  // namespace
}  // namespace quantd::exporter
