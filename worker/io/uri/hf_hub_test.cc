// The Hub protocol against tests/hub/fake_hub.py serving the bundled
// stories260K directory: cache layout, only the needed files, resumed and
// corrupt transfers, tokens, a shared cache, limits, and ResolveUri's use of
// it (the offline fallback included).
#include "worker/io/uri/hf_hub.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hub/fake_hub_process.h"
#include "worker/io/uri/uri.h"

namespace quantd::io {
namespace {

namespace fs = std::filesystem;
using ::quantd::testing::FakeHub;
using ::quantd::testing::FileSha256;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "hf_SecretTokenForTheTests123";

class HfHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    repo_ = dir_ / "repo";
    fs::create_directories(repo_);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model",
                          "stories260K-f32.gguf", "NOTICE.md"}) {
      fs::copy_file(fs::path("models/stories260K") / f, repo_ / f);
    }
    options_.cache_dir = (dir_ / "hub").string();
    options_.names = {"config.json", "tokenizer.model", "tokenizer.json"};
    options_.suffixes = {".safetensors"};
    options_.retry_backoff_ms = 10;
  }

  // Starts the fake Hub serving the repo as karpathy/stories260K.
  void StartHub(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model", "karpathy/stories260K=" + repo_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    hub_ = FakeHub::Start(args, (dir_ / "fake_hub").string());
    ASSERT_NE(hub_, nullptr);
    options_.endpoint = hub_->Endpoint();
  }

  StatusOr<HubSnapshot> Fetch(const std::string& revision = "main") {
    return FetchHubSnapshot(HubRepo{"model", "karpathy", "stories260K", revision}, options_);
  }

  // ResolveUri's options for hf:// against the running fake Hub.
  UriOptions HubUriOptions() const {
    UriOptions uri;
    uri.allowed_schemes = {"hf"};
    uri.hf_cache_dir = options_.cache_dir;
    uri.hf_endpoint = hub_->Endpoint();
    return uri;
  }

  fs::path RepoCache() const { return dir_ / "hub" / "models--karpathy--stories260K"; }
  std::string Sha(const char* f) const { return FileSha256((repo_ / f).string()); }

  fs::path dir_;
  fs::path repo_;
  HubOptions options_;
  std::unique_ptr<FakeHub> hub_;
};

TEST_F(HfHubTest, FetchesOnlyTheFilesAJobReadsIntoTheHubCacheLayout) {
  StartHub();
  auto snap = Fetch();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(IsCommitId(snap->commit));
  EXPECT_EQ(snap->snapshot_dir, (RepoCache() / "snapshots" / snap->commit).string());
  EXPECT_THAT(snap->files, ::testing::UnorderedElementsAre("config.json", "model.safetensors",
                                                           "tokenizer.model"));
  EXPECT_EQ(snap->files_downloaded, 3);
  // LFS files are blobs named by their sha256, linked from the snapshot.
  const fs::path weights = fs::path(snap->snapshot_dir) / "model.safetensors";
  ASSERT_TRUE(fs::is_symlink(weights));
  EXPECT_EQ(fs::read_symlink(weights).string(), "../../blobs/" + Sha("model.safetensors"));
  EXPECT_EQ(FileSha256(weights.string()), Sha("model.safetensors"));
  EXPECT_EQ(FileSha256((fs::path(snap->snapshot_dir) / "config.json").string()),
            Sha("config.json"));
  std::ifstream ref(RepoCache() / "refs" / "main");
  std::string commit;
  std::getline(ref, commit);
  EXPECT_EQ(commit, snap->commit);
  // The GGUF and NOTICE.md were listed but never requested.
  for (const auto& r : hub_->Requests()) {
    EXPECT_THAT(r.dump(), Not(HasSubstr("gguf"))) << r.dump();
    EXPECT_THAT(r.dump(), Not(HasSubstr("NOTICE"))) << r.dump();
  }
  // Files are fetched from the resolved commit, not the branch.
  EXPECT_EQ(hub_->Gets("/karpathy/stories260K/resolve/" + snap->commit + "/").size(), 3u);

  // Again: one listing request, nothing downloaded.
  const size_t before = hub_->Requests().size();
  auto again = Fetch();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->files_downloaded, 0);
  EXPECT_EQ(again->bytes_downloaded, 0u);
  EXPECT_EQ(hub_->Requests().size(), before + 1);
  // By commit: the same snapshot.
  auto by_commit = Fetch(snap->commit);
  ASSERT_TRUE(by_commit.ok()) << by_commit.status();
  EXPECT_EQ(by_commit->snapshot_dir, snap->snapshot_dir);
}

TEST_F(HfHubTest, AnInterruptedDownloadResumesWithARangedGet) {
  StartHub({"--drop-after-bytes", "100000"});
  auto snap = Fetch();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(FileSha256(snap->snapshot_dir + "/model.safetensors"), Sha("model.safetensors"));
  const auto cdn = hub_->Gets("/cdn/" + Sha("model.safetensors"));
  ASSERT_EQ(cdn.size(), 2u);
  EXPECT_EQ(cdn[0]["body_bytes"], 100000);
  EXPECT_EQ(cdn[1]["range"], "bytes=100000-");
  EXPECT_EQ(cdn[1]["status"], 206);
  EXPECT_FALSE(fs::exists(RepoCache() / "blobs" / (Sha("model.safetensors") + ".incomplete")));
}

TEST_F(HfHubTest, APartialFileFromAnEarlierRunIsResumed) {
  const std::string sha = Sha("model.safetensors");
  fs::create_directories(RepoCache() / "blobs");
  {
    std::ifstream in(repo_ / "model.safetensors", std::ios::binary);
    std::string head(5000, '\0');
    in.read(head.data(), head.size());
    std::ofstream(RepoCache() / "blobs" / (sha + ".incomplete"), std::ios::binary) << head;
  }
  StartHub();
  auto snap = Fetch();
  ASSERT_TRUE(snap.ok()) << snap.status();
  const auto cdn = hub_->Gets("/cdn/" + sha);
  ASSERT_EQ(cdn.size(), 1u);
  EXPECT_EQ(cdn[0]["range"], "bytes=5000-");
  EXPECT_EQ(FileSha256(snap->snapshot_dir + "/model.safetensors"), sha);
}

TEST_F(HfHubTest, AServerThatIgnoresRangesIsReadFromTheStart) {
  const std::string sha = Sha("model.safetensors");
  fs::create_directories(RepoCache() / "blobs");
  std::ofstream(RepoCache() / "blobs" / (sha + ".incomplete"), std::ios::binary) << "garbage";
  StartHub({"--ignore-range"});
  auto snap = Fetch();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(FileSha256(snap->snapshot_dir + "/model.safetensors"), sha);
}

TEST_F(HfHubTest, AFileWhoseSha256DiffersFromTheListingIsRefusedAndNotKept) {
  StartHub({"--corrupt", "model.safetensors"});
  auto snap = Fetch();
  ASSERT_EQ(snap.status().code(), StatusCode::kDataLoss) << snap.status();
  EXPECT_THAT(snap.status().message(), HasSubstr("model.safetensors has sha256"));
  EXPECT_THAT(snap.status().message(), HasSubstr("not the LFS sha256 " + Sha("model.safetensors")));
  const fs::path blobs = RepoCache() / "blobs";
  EXPECT_FALSE(fs::exists(blobs / Sha("model.safetensors")));
  EXPECT_FALSE(fs::exists(blobs / (Sha("model.safetensors") + ".incomplete")));
  EXPECT_FALSE(fs::exists(RepoCache() / "refs" / "main"));  // the revision is not cached
}

TEST_F(HfHubTest, APrivateRepositoryNeedsATokenThatNeverAppearsInAMessage) {
  StartHub({"--private", "karpathy/stories260K", "--token", kToken});
  auto anonymous = Fetch();
  ASSERT_EQ(anonymous.status().code(), StatusCode::kPermissionDenied) << anonymous.status();
  EXPECT_THAT(anonymous.status().message(), HasSubstr("HF_TOKEN"));

  options_.token = "hf_WrongToken";
  auto wrong = Fetch();
  ASSERT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(wrong.status().message(), HasSubstr("no read access"));
  EXPECT_THAT(wrong.status().message(), Not(HasSubstr("hf_WrongToken")));

  options_.token = kToken;
  auto snap = Fetch();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->files_downloaded, 3);
  EXPECT_THAT(hub_->LogText(), Not(HasSubstr(kToken)));
}

TEST_F(HfHubTest, TwoFetchersSharingACacheDownloadEachBlobOnce) {
  // Slow enough that the two overlap; the blob's lock file makes the second
  // wait (flock locks belong to an open file, so two threads exclude each
  // other as two processes do).
  StartHub({"--bytes-per-second", "2000000"});
  StatusOr<HubSnapshot> a = Status(StatusCode::kUnknown, "not run");
  StatusOr<HubSnapshot> b = Status(StatusCode::kUnknown, "not run");
  std::thread t1([&] { a = Fetch(); });
  std::thread t2([&] { b = Fetch(); });
  t1.join();
  t2.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->files_downloaded + b->files_downloaded, 3);
  EXPECT_EQ(hub_->Gets("/cdn/" + Sha("model.safetensors")).size(), 1u);
  EXPECT_EQ(FileSha256(a->snapshot_dir + "/model.safetensors"), Sha("model.safetensors"));
}

TEST_F(HfHubTest, UnknownRepositoriesRevisionsAndHostileAnswersAreRefused) {
  StartHub({"--cross-scheme-redirect", "model.safetensors"});
  auto no_repo = FetchHubSnapshot(HubRepo{"model", "karpathy", "nope", "main"}, options_);
  EXPECT_EQ(no_repo.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_repo.status().message(), HasSubstr("no such repository"));
  auto no_rev = Fetch("v9");
  EXPECT_EQ(no_rev.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_rev.status().message(), HasSubstr("revision 'v9' does not exist"));
  // A redirect to ftp:// is not followed.
  auto ftp = Fetch();
  EXPECT_EQ(ftp.status().code(), StatusCode::kPermissionDenied) << ftp.status();
  EXPECT_THAT(ftp.status().message(), HasSubstr("redirected to a scheme that is not allowed"));
}

TEST_F(HfHubTest, SizeLimitsAreCheckedBeforeDownloading) {
  StartHub();
  options_.max_file_bytes = 100000;
  auto big = Fetch();
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(),
              HasSubstr("model.safetensors is 1045064 bytes; at most 100000"));
  EXPECT_TRUE(hub_->Gets("/cdn/").empty());
  options_.max_file_bytes = 64ull << 30;
  options_.max_files = 3;
  EXPECT_EQ(Fetch().status().code(), StatusCode::kResourceExhausted);
}

TEST_F(HfHubTest, ResolveUriFetchesFromTheHubAndFallsBackToTheCacheWhenItIsDown) {
  StartHub();
  UriOptions uri = HubUriOptions();
  uri.model_files = options_.names;
  uri.model_file_suffixes = options_.suffixes;
  auto r = ResolveUri({"hf://karpathy/stories260K", ""}, uri);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsCommitId(r->revision));
  EXPECT_EQ(r->files_downloaded, 3);
  EXPECT_TRUE(r->warning.empty());
  EXPECT_TRUE(fs::exists(r->local_path + "/model.safetensors"));

  // Hub down: the cached revision still resolves, with a warning.
  hub_.reset();
  auto cached = ResolveUri({"hf://karpathy/stories260K", ""}, uri);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->local_path, r->local_path);
  EXPECT_EQ(cached->revision, r->revision);
  EXPECT_THAT(cached->warning, HasSubstr("the Hub could not be reached"));
  // A revision the cache does not hold fails with the network error.
  EXPECT_EQ(ResolveUri({"hf://karpathy/stories260K@v2", ""}, uri).status().code(),
            StatusCode::kUnavailable);

  // A repository without safetensors weights.
  fs::remove(repo_ / "model.safetensors");
  StartHub();
  uri.hf_endpoint = hub_->Endpoint();
  uri.hf_cache_dir = (dir_ / "hub2").string();
  auto no_weights = ResolveUri({"hf://karpathy/stories260K", ""}, uri);
  EXPECT_EQ(no_weights.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_weights.status().message(), HasSubstr("no *.safetensors weights"));
}

// hf://datasets: the split's files from subfolders, in shard order, linked
// into the snapshot at their depth; the offline cache serves them too.
TEST_F(HfHubTest, ResolveUriFetchesADatasetSplitFromSubfolders) {
  const fs::path ds = dir_ / "dataset";
  for (const char* f : {"data/train-00001-of-00002.jsonl", "data/train-00000-of-00002.jsonl",
                        "data/test-00000-of-00001.jsonl", "README.md", "train_notes.txt.bak"}) {
    fs::create_directories((ds / f).parent_path());
    std::ofstream(ds / f) << "{\"text\": \"" << f << "\"}\n";
  }
  fs::create_directories(ds / "data");
  {
    std::ofstream big(ds / "data/train-00002-of-00002.parquet");  // an LFS file
    big << std::string(1000, 'p');
  }
  StartHub({"--dataset", "acme/chat=" + ds.string()});
  UriOptions uri = HubUriOptions();
  auto r = ResolveUri({"hf://datasets/acme/chat?split=train&field=text", ""}, uri);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsCommitId(r->revision));
  EXPECT_EQ(r->files_downloaded, 3);
  EXPECT_EQ(r->field, "text");
  EXPECT_EQ(r->dataset_name, "acme/chat:train");
  const fs::path snapshot = dir_ / "hub" / "datasets--acme--chat" / "snapshots" / r->revision;
  EXPECT_EQ(r->files,
            (std::vector<std::string>{(snapshot / "data/train-00000-of-00002.jsonl").string(),
                                      (snapshot / "data/train-00001-of-00002.jsonl").string(),
                                      (snapshot / "data/train-00002-of-00002.parquet").string()}));
  EXPECT_EQ(fs::read_symlink(snapshot / "data/train-00002-of-00002.parquet").string(),
            "../../../blobs/" + FileSha256((ds / "data/train-00002-of-00002.parquet").string()));
  std::ifstream first(r->files[0]);
  std::string line;
  std::getline(first, line);
  EXPECT_EQ(line, "{\"text\": \"data/train-00000-of-00002.jsonl\"}");
  EXPECT_FALSE(fs::exists(snapshot / "data/test-00000-of-00001.jsonl"));  // only the split

  // Offline, the cache alone serves the same split.
  uri.hf_endpoint.clear();
  auto cached = ResolveUri({"hf://datasets/acme/chat?split=train", ""}, uri);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->files, r->files);
  EXPECT_EQ(cached->revision, r->revision);
  EXPECT_EQ(cached->warning, "");

  // A split the repository lacks names its data files.
  uri.hf_endpoint = hub_->Endpoint();
  auto missing = ResolveUri({"hf://datasets/acme/chat?split=validation", ""}, uri);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("no data file holds the split 'validation'; its data files are "
                        "data/test-00000-of-00001.jsonl, data/train-00000-of-00002.jsonl"));
  // A model URI never reads the dataset repository.
  EXPECT_EQ(ResolveUri({"hf://acme/chat", ""}, uri).status().code(), StatusCode::kNotFound);
}

// Offline, a split of which an earlier job fetched one file is refused
// rather than read in part; without quantd's listing of the commit (a cache
// filled by another client) the files there are read, with a warning.
TEST_F(HfHubTest, OfflineAPartlyCachedSplitIsRefusedOrWarnedAbout) {
  const fs::path ds = dir_ / "dataset";
  fs::create_directories(ds / "data");
  for (const char* f : {"data/train-00000-of-00002.jsonl", "data/train-00001-of-00002.jsonl"}) {
    std::ofstream(ds / f) << "{\"text\": \"" << f << "\"}\n";
  }
  StartHub({"--dataset", "acme/chat=" + ds.string()});
  UriOptions uri = HubUriOptions();
  auto one = ResolveUri({"hf://datasets/acme/chat?file=data/train-00001-of-00002.jsonl", ""}, uri);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->files.size(), 1u);

  uri.hf_endpoint.clear();
  auto partial = ResolveUri({"hf://datasets/acme/chat?split=train", ""}, uri);
  EXPECT_EQ(partial.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      partial.status().message(),
      HasSubstr("offline, the cache holds 1 of the 2 data files of commit " + one->revision +
                " that this URI reads; missing data/train-00000-of-00002.jsonl"));
  // The file that is there is still served on its own.
  EXPECT_TRUE(
      ResolveUri({"hf://datasets/acme/chat?file=data/train-00001-of-00002.jsonl", ""}, uri).ok());

  fs::remove_all(dir_ / "hub" / "datasets--acme--chat" / "quantd-listings");
  auto unknown = ResolveUri({"hf://datasets/acme/chat?split=train", ""}, uri);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->files.size(), 1u);
  EXPECT_THAT(unknown->warning,
              HasSubstr("offline: read the 1 data file(s) of commit " + one->revision +
                        " that the cache holds; the cache has no listing of that commit"));
}

// A ref with slashes (the Hub's Parquet conversion) is fetched by its
// encoded name, cached under refs/ at its depth, and served offline.
TEST_F(HfHubTest, ARevisionWithSlashesIsFetchedAndCached) {
  const fs::path ds = dir_ / "dataset";
  fs::create_directories(ds / "default" / "train");
  std::ofstream(ds / "default" / "train" / "0000.jsonl") << "{\"text\": \"converted\"}\n";
  StartHub({"--dataset", "acme/chat=" + ds.string(), "--ref", "refs/convert/parquet"});
  UriOptions uri = HubUriOptions();
  auto r = ResolveUri({"hf://datasets/acme/chat@refs%2Fconvert%2Fparquet?split=train", ""}, uri);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsCommitId(r->revision));
  ASSERT_EQ(r->files.size(), 1u);
  const fs::path ref =
      dir_ / "hub" / "datasets--acme--chat" / "refs" / "refs" / "convert" / "parquet";
  std::ifstream in(ref);
  std::string commit;
  std::getline(in, commit);
  EXPECT_EQ(commit, r->revision);

  uri.hf_endpoint.clear();
  auto cached = ResolveUri({"hf://datasets/acme/chat@refs/convert/parquet?split=train", ""}, uri);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->revision, r->revision);
  EXPECT_EQ(cached->files, r->files);
  // Another ref the cache does not hold.
  EXPECT_EQ(ResolveUri({"hf://datasets/acme/chat@refs/pr/1?split=train", ""}, uri).status().code(),
            StatusCode::kNotFound);
}

// A dataset repository may list more files than a model may (c4 lists
// tens of thousands of shards); only the split's are fetched.
TEST_F(HfHubTest, ADatasetRevisionMayListManyFiles) {
  const fs::path ds = dir_ / "big";
  fs::create_directories(ds / "other");
  for (int i = 0; i < 5000; ++i) std::ofstream(ds / "other" / (std::to_string(i) + ".jsonl")) << i;
  fs::create_directories(ds / "en");
  std::ofstream(ds / "en" / "c4-validation.00000-of-00001.json") << "{\"text\": \"x\"}\n";
  StartHub({"--dataset", "allenai/c4=" + ds.string()});
  UriOptions uri = HubUriOptions();
  auto r = ResolveUri({"hf://datasets/allenai/c4?config=en&split=validation", ""}, uri);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files_downloaded, 1);
}

}  // namespace
}  // namespace quantd::io
