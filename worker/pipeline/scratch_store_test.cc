#include "worker/pipeline/scratch_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace quantd::pipeline {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(t != nullptr ? t : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

TEST(ScratchStoreTest, PutAsyncServesTheTensorsAsTheyWereWhenCalled) {
  auto store = ScratchStore::Create(TempDir("async"));
  ASSERT_TRUE(store.ok()) << store.status();
  at::Tensor w = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor b = at::arange(3, at::kDouble);  // stored as float32
  const at::Tensor w_then = w.clone();
  ASSERT_TRUE((*store)->PutAsync("block_00000", {{"l.weight", w}, {"l.bias", b}}).ok());
  w.add_(100);  // the caller moves on; the file keeps what was passed
  EXPECT_EQ((*store)->Find("l.weight"), nullptr) << "served before Flush";
  ASSERT_TRUE((*store)->Flush().ok());
  auto got = (*store)->Load("l.weight");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(at::equal(*got, w_then));
  auto bias = (*store)->Load("l.bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_TRUE(at::equal(*bias, at::arange(3, at::kFloat)));
  EXPECT_TRUE(fs::exists(fs::path((*store)->dir()) / "block_00000.safetensors"));
}

TEST(ScratchStoreTest, ASecondPutAsyncServesTheFirstAndAPutSeesBoth) {
  auto store = ScratchStore::Create(TempDir("two"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutAsync("block_00000", {{"a", at::ones({2})}}).ok());
  ASSERT_TRUE((*store)->PutAsync("block_00001", {{"b", at::full({2}, 2.0)}}).ok());
  EXPECT_NE((*store)->Find("a"), nullptr);
  ASSERT_TRUE((*store)->Put("head", {{"c", at::full({1}, 3.0)}}).ok());
  for (const char* name : {"a", "b", "c"}) EXPECT_NE((*store)->Find(name), nullptr) << name;
  EXPECT_EQ((*store)->Names().size(), 3u);
}

TEST(ScratchStoreTest, AFailedBackgroundWriteSurfacesAtFlush) {
  const std::string dir = TempDir("gone");
  auto store = ScratchStore::Create(dir);
  ASSERT_TRUE(store.ok());
  // A folder where the file should go: the write cannot replace it.
  fs::create_directories(fs::path(dir) / "block_00000.safetensors" / "x");
  ASSERT_TRUE((*store)->PutAsync("block_00000", {{"a", at::ones({2})}}).ok());
  const Status s = (*store)->Flush();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("block_00000"), std::string::npos) << s;
  EXPECT_EQ((*store)->Find("a"), nullptr);
  EXPECT_TRUE((*store)->Flush().ok()) << "reported once";
}

}  // namespace
}  // namespace quantd::pipeline
