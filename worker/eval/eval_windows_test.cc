#include "worker/eval/eval_windows.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::eval {
namespace {

std::vector<int32_t> Range(int32_t n) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = 100 + i;
  return v;
}

TEST(EvalWindowsTest, BosPlusNctxMinusOneTokensWithShortLastWindow) {
  auto w = MakeEvalWindows(Range(10), /*bos_id=*/1, {4, 0});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->windows.size(), 4u);  // 3 + 3 + 3 + 1 text tokens
  EXPECT_EQ(w->windows[0], (std::vector<int32_t>{1, 100, 101, 102}));
  EXPECT_EQ(w->windows[1], (std::vector<int32_t>{1, 103, 104, 105}));
  EXPECT_EQ(w->windows[3], (std::vector<int32_t>{1, 109}));
  EXPECT_EQ(w->scored_tokens, 10);  // every text token
  EXPECT_TRUE(w->with_bos);
  EXPECT_THAT(w->Protocol(), ::testing::HasSubstr("[BOS] + 3 text tokens (n_ctx 4)"));
}

TEST(EvalWindowsTest, MaxWindowsAndNoBos) {
  auto capped = MakeEvalWindows(Range(100), 1, {5, 3});
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->windows.size(), 3u);
  EXPECT_EQ(capped->scored_tokens, 12);

  auto nobos = MakeEvalWindows(Range(9), -1, {4, 0});
  ASSERT_TRUE(nobos.ok());
  ASSERT_EQ(nobos->windows.size(), 2u);  // the lone 9th token cannot be scored
  EXPECT_EQ(nobos->windows[0], (std::vector<int32_t>{100, 101, 102, 103}));
  EXPECT_EQ(nobos->scored_tokens, 6);
  EXPECT_FALSE(nobos->with_bos);
}

TEST(EvalWindowsTest, RejectsTinyContextsAndEmptyText) {
  EXPECT_EQ(MakeEvalWindows(Range(5), 1, {1, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeEvalWindows({}, 1, {8, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeEvalWindows(Range(1), -1, {8, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeEvalWindows(Range(5), 1, {8, -1}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::eval
