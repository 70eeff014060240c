#include "worker/pipeline/block_prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace quantd::pipeline {
namespace {

struct Recorder {
  std::mutex mu;
  std::vector<int> loaded;
};

TEST(BlockPrefetcherTest, LoadsTheNextBlockInTheBackgroundInOrder) {
  Recorder rec;
  const auto main_id = std::this_thread::get_id();
  std::atomic<int> background_loads{0};
  BlockPrefetcher<int> p(
      [&](int i) -> StatusOr<int> {
        if (std::this_thread::get_id() != main_id) ++background_loads;
        std::lock_guard<std::mutex> l(rec.mu);
        rec.loaded.push_back(i);
        return i * 10;
      },
      /*enabled=*/true);
  for (int i = 2; i < 6; ++i) {
    auto v = p.Get(i, 6);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, i * 10);
    EXPECT_EQ(p.Prefetching(i + 1), i + 1 < 6);
  }
  std::lock_guard<std::mutex> l(rec.mu);
  EXPECT_EQ(rec.loaded, (std::vector<int>{2, 3, 4, 5}));  // each block once
  EXPECT_EQ(background_loads.load(), 3);                   // 3, 4, 5 ahead of time
}

TEST(BlockPrefetcherTest, DisabledLoadsOnDemandAndErrorsStopThePrefetch) {
  std::vector<int> loaded;
  BlockPrefetcher<int> off([&](int i) -> StatusOr<int> { loaded.push_back(i); return i; }, false);
  ASSERT_TRUE(off.Get(0, 3).ok());
  EXPECT_FALSE(off.Prefetching(1));
  EXPECT_EQ(loaded, std::vector<int>{0});

  BlockPrefetcher<int> failing(
      [](int i) -> StatusOr<int> {
        if (i == 1) return DataLossError("block 1 is truncated");
        return i;
      },
      true);
  ASSERT_TRUE(failing.Get(0, 3).ok());
  auto bad = failing.Get(1, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "block 1 is truncated");
  EXPECT_FALSE(failing.Prefetching(2));
  // Out of order (a resumed loop): loaded now, the prefetched one dropped.
  auto v = failing.Get(2, 3);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 2);
}

}  // namespace
}  // namespace quantd::pipeline
