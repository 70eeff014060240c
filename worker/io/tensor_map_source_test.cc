#include "worker/io/tensor_map_source.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quantd::io {
namespace {

TEST(TensorMapSourceTest, LoadsFreshConvertedCopies) {
  TensorMapSource src("mem");
  src.Put("a", at::arange(6, at::kFloat).reshape({2, 3}));
  const TensorInfo* info = src.Find("a");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(info->nbytes, 24u);
  auto a = src.Load("a", at::kDouble);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->scalar_type(), at::kDouble);
  EXPECT_EQ(a->index({1, 2}).item<double>(), 5.0);
  auto b = src.Load("a");
  ASSERT_TRUE(b.ok());
  b->fill_(0);  // the stored tensor must not change
  EXPECT_EQ(src.Load("a")->sum().item<float>(), 15.0f);
  EXPECT_EQ(src.Load("x").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(src.Erase("a"));
  EXPECT_EQ(src.Find("a"), nullptr);
}

TEST(OverlaySourceTest, OverlayWinsAndNamesAreMerged) {
  auto base = std::make_shared<TensorMapSource>("base");
  base->Put("w", at::ones({2}));
  base->Put("b", at::zeros({2}));
  auto over = std::make_shared<TensorMapSource>("quantized");
  over->Put("w", at::full({2}, 7.0f));
  over->Put("extra", at::ones({1}));
  OverlaySource src(over, base);
  EXPECT_EQ(src.Names(), (std::vector<std::string>{"b", "extra", "w"}));
  EXPECT_EQ(src.Load("w")->sum().item<float>(), 14.0f);
  EXPECT_EQ(src.Load("b")->sum().item<float>(), 0.0f);
  EXPECT_EQ(src.Find("w")->file, "quantized");
  EXPECT_EQ(src.Description(), "quantized over base");
  auto missing = src.Load("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("'nope'"));
}

}  // namespace
}  // namespace quantd::io
