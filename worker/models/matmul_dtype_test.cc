#include "worker/models/matmul_dtype.h"

#include <gtest/gtest.h>

#include "worker/models/linear.h"

namespace quantd::models {
namespace {

Linear MakeLinear(at::Tensor w, at::Tensor b = at::Tensor()) {
  LinearLayerInfo info;
  info.name = "l";
  info.in_features = w.size(1);
  info.out_features = w.size(0);
  return Linear(info, std::move(w), std::move(b));
}

TEST(MatmulDtypeTest, UnsetTheProductsRunInTheirInputsDtype) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({3, 5, 16});
  Linear l = MakeLinear(at::randn({8, 16}), at::randn({8}));
  EXPECT_FALSE(MatmulDtype().has_value());
  EXPECT_TRUE(at::equal(l.Forward(x), at::linear(x, l.weight(), l.bias())));
  const at::Tensor y = at::randn({16, 4});
  EXPECT_TRUE(at::equal(Matmul(x, y), at::matmul(x, y)));
}

TEST(MatmulDtypeTest, ScopedBfloat16ProductsReturnFloat32) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({3, 5, 16});
  Linear l = MakeLinear(at::randn({8, 16}), at::randn({8}));
  const at::Tensor f32 = l.Forward(x);
  {
    MatmulDtypeScope scope(at::kBFloat16);
    ASSERT_EQ(MatmulDtype(), at::kBFloat16);
    const at::Tensor out = l.Forward(x);
    EXPECT_EQ(out.scalar_type(), at::kFloat);
    const at::Tensor want =
        at::linear(x.to(at::kBFloat16), l.weight().to(at::kBFloat16), l.bias().to(at::kBFloat16))
            .to(at::kFloat);
    EXPECT_TRUE(at::equal(out, want));
    // bfloat16 keeps 8 significant bits: the products differ from float32's,
    // by about 2^-8 of the output's scale.
    EXPECT_FALSE(at::equal(out, f32));
    const double rel = ((out - f32).abs().max() / f32.abs().max()).item<double>();
    EXPECT_LT(rel, 0.05);
    const at::Tensor y = at::randn({16, 4});
    EXPECT_TRUE(at::equal(Matmul(x, y),
                          at::matmul(x.to(at::kBFloat16), y.to(at::kBFloat16)).to(at::kFloat)));
    // A nested scope without a dtype keeps the outer one.
    {
      MatmulDtypeScope inner(std::nullopt);
      EXPECT_EQ(MatmulDtype(), at::kBFloat16);
    }
    EXPECT_EQ(MatmulDtype(), at::kBFloat16);
  }
  EXPECT_FALSE(MatmulDtype().has_value());
  EXPECT_TRUE(at::equal(l.Forward(x), f32));
}

// The converted weight is reused while the weight is unchanged, and made
// again when an algorithm changes it in place or assigns a new one.
TEST(MatmulDtypeTest, TheConvertedWeightFollowsTheWeight) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({4, 16});
  Linear l = MakeLinear(at::randn({8, 16}));
  MatmulDtypeScope scope(at::kBFloat16);
  const auto bf16_of = [&] {
    return at::linear(x.to(at::kBFloat16), l.weight().to(at::kBFloat16)).to(at::kFloat);
  };
  EXPECT_TRUE(at::equal(l.Forward(x), bf16_of()));
  l.weight().mul_(3.0);  // in place: a new version
  EXPECT_TRUE(at::equal(l.Forward(x), bf16_of()));
  l.weight() = at::randn({8, 16});  // a new tensor
  EXPECT_TRUE(at::equal(l.Forward(x), bf16_of()));
}

}  // namespace
}  // namespace quantd::models
