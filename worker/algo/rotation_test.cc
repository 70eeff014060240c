#include "worker/algo/rotation.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "worker/algo/hadamard.h"
#include "worker/models/random_checkpoint.h"
#include "worker/models/registry.h"

namespace quantd::algo {
namespace {

at::Tensor Eye(int64_t n) { return at::eye(n, at::kDouble); }

TEST(HadamardTest, RotationsAreOrthogonalAndHadamardWhereConstructed) {
  struct Case {
    int64_t n;
    bool hadamard;
  };
  // 64: Sylvester; 12 = Paley I (q = 11); 80 = 4 x Paley I (q = 19);
  // 36 = Paley II (q = 17); 172 = 4 x 43 has no construction here.
  for (const Case& c : {Case{64, true}, Case{12, true}, Case{80, true}, Case{36, true},
                        Case{172, false}, Case{1, true}}) {
    for (bool signs : {false, true}) {
      auto r = Rotation::Create(c.n, signs, 11);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->hadamard(), c.hadamard) << c.n << " " << r->description();
      at::Tensor m = r->Matrix();
      EXPECT_LT((m.matmul(m.t()) - Eye(c.n)).abs().max().item<double>(), 1e-12) << c.n;
      if (c.hadamard) {
        // Every entry is +-1/sqrt(n).
        EXPECT_LT((m.abs() - 1.0 / std::sqrt(static_cast<double>(c.n))).abs().max().item<double>(),
                  1e-12)
            << c.n;
      }
      at::Tensor x = at::randn({3, 5, c.n}, at::kDouble);
      EXPECT_TRUE(at::allclose(r->Apply(x), x.matmul(m), 1e-10, 1e-12));
      EXPECT_TRUE(at::allclose(r->ApplyTransposed(x), x.matmul(m.t()), 1e-10, 1e-12));
    }
  }
  EXPECT_EQ(Rotation::Create(0, true, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(HadamardTest, SeedsGiveReproducibleDistinctRotations) {
  auto a = Rotation::Create(64, true, 5), b = Rotation::Create(64, true, 5),
       c = Rotation::Create(64, true, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(at::equal(a->Matrix(), b->Matrix()));
  EXPECT_FALSE(at::equal(a->Matrix(), c->Matrix()));
  // The first signs of seed 5 are fixed by the portable generator.
  at::Tensor m = a->Matrix() * 8.0;
  at::Tensor h = Rotation::Create(64, false, 0)->Matrix() * 8.0;
  EXPECT_TRUE(at::equal(m.abs(), h.abs()));
}

TEST(HadamardTest, PaleyOrders) {
  for (int64_t b : {4, 8, 12, 20, 24, 28, 36, 44, 60}) {
    at::Tensor h = PaleyHadamard(b);
    ASSERT_TRUE(h.defined()) << b;
    EXPECT_LT((h.matmul(h.t()) - Eye(b)).abs().max().item<double>(), 1e-12);
  }
  EXPECT_FALSE(PaleyHadamard(172).defined());
  EXPECT_FALSE(PaleyHadamard(10).defined());
}

// The whole model through its transformed pieces.
StatusOr<at::Tensor> TransformedForward(const models::CausalLM& model, RotationTransform& rot,
                                        const at::Tensor& ids, bool check_pieces) {
  QD_ASSIGN_OR_RETURN(auto emb, model.LoadEmbedding());
  QD_RETURN_IF_ERROR(rot.TransformEmbedding(*emb));
  QD_ASSIGN_OR_RETURN(at::Tensor h, emb->Forward(ids));
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    QD_ASSIGN_OR_RETURN(auto block, model.LoadBlock(i));
    QD_RETURN_IF_ERROR(rot.TransformBlock(*block));
    if (check_pieces) {
      for (models::Norm* n : block->norms())
        EXPECT_TRUE(at::equal(n->weight(), at::ones_like(n->weight())));
    }
    // As in the pipeline: forward passes before and after InstallOnline.
    QD_ASSIGN_OR_RETURN(at::Tensor before, block->Forward(h));
    QD_RETURN_IF_ERROR(rot.InstallOnline(*block));
    QD_ASSIGN_OR_RETURN(h, block->Forward(h));
    EXPECT_TRUE(at::equal(before, h)) << "block " << i;
  }
  QD_ASSIGN_OR_RETURN(auto head, model.LoadHead());
  QD_RETURN_IF_ERROR(rot.TransformHead(*head));
  if (check_pieces) {
    bool named = false;
    for (auto& [name, t] : head->NamedTensors()) named = named || name == "lm_head.weight";
    EXPECT_TRUE(named);
    EXPECT_FALSE(at::equal(head->lm_head().weight(), emb->token_embedding().weight()));
  }
  return head->Forward(h);
}

TEST(RotationTest, KeepsFloatLogitsOnStories260K) {
  auto model = models::OpenCausalLM("models/stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->config().tie_word_embeddings);
  at::manual_seed(2);
  at::Tensor ids = at::randint(0, (*model)->config().vocab_size, {3, 64}, at::kLong);
  auto ref = (*model)->Forward(ids);
  ASSERT_TRUE(ref.ok());
  for (bool r4 : {false, true}) {
    RotationOptions o;
    o.seed = 3;
    o.online_down_proj = r4;
    RotationTransform rot(o);
    auto out = TransformedForward(**model, rot, ids, /*check_pieces=*/true);
    ASSERT_TRUE(out.ok()) << out.status();
    const double diff = (*out - *ref).abs().max().item<double>();
    std::printf("rotation (r4 %d): max |logit diff| %.3g (logit scale %.3g)\n", r4, diff,
                ref->abs().max().item<double>());
    EXPECT_LT(diff, 1e-4);
  }
}

TEST(RotationTest, InstallOnlineOnAnAlreadyTransformedBlockAddsOneHadamard) {
  auto model = models::OpenCausalLM("models/stories260K");
  ASSERT_TRUE(model.ok());
  RotationOptions o;
  o.online_down_proj = true;
  RotationTransform rot(o);
  auto a = (*model)->LoadBlock(1);
  ASSERT_TRUE(rot.TransformBlock(**a).ok());
  at::Tensor x = at::randn({2, 16, 64});
  auto expected = (*a)->Forward(x);
  // A second copy loaded with a's transformed tensors (as evaluation loads
  // from scratch): without InstallOnline it differs, with it it matches.
  auto b = (*model)->LoadBlock(1);
  auto named_a = (*a)->NamedTensors();
  auto named_b = (*b)->NamedTensors();
  for (size_t i = 0; i < named_b.size(); ++i) *named_b[i].second = *named_a[i].second;
  auto without = (*b)->Forward(x);
  EXPECT_GT((*without - *expected).abs().max().item<float>(), 1e-3);
  ASSERT_TRUE(rot.InstallOnline(**b).ok());
  auto with = (*b)->Forward(x);
  EXPECT_TRUE(at::allclose(*with, *expected, 1e-5, 1e-6));
}

// Writes `c` (float32) as a random checkpoint named `name`, rotates the
// model with online down_proj Hadamards (seed `seed`) and checks that the
// float logits on random ids of `tokens` stay to 1e-4.
void ExpectRotationKeepsFloatLogits(const std::string& name, models::RandomCheckpointOptions c,
                                    uint64_t seed, int64_t tokens) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  c.dtype = io::SafetensorsDtype::kF32;
  ASSERT_TRUE(models::WriteRandomLlamaCheckpoint(dir, c).ok());
  auto model = models::OpenCausalLM(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_EQ((*model)->config().qk_norm, c.architecture == "qwen3");
  at::manual_seed(static_cast<int64_t>(seed));
  at::Tensor ids = at::randint(0, c.vocab_size, {2, tokens}, at::kLong);
  auto ref = (*model)->Forward(ids);
  ASSERT_TRUE(ref.ok()) << ref.status();
  RotationOptions o;
  o.seed = seed + 1;
  o.online_down_proj = true;
  RotationTransform rot(o);
  auto out = TransformedForward(**model, rot, ids, /*check_pieces=*/false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_LT((*out - *ref).abs().max().item<double>(), 1e-4) << name;
}

// Non-power-of-two shapes through the whole model: hidden 80 = 4 x Paley 20,
// head_dim 20 = Paley 20, intermediate 112 = 4 x Paley 28, with an untied
// lm_head read from the checkpoint.
TEST(RotationTest, KeepsFloatLogitsWithPaleyShapesAndUntiedHead) {
  models::RandomCheckpointOptions c;
  c.hidden_size = 80;
  c.intermediate_size = 112;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 256;
  ExpectRotationKeepsFloatLogits("rotation_paley_model", c, 4, 48);
  for (int64_t n : {80, 20, 112}) EXPECT_TRUE(Rotation::Create(n, true, 1)->hadamard()) << n;
}

// Qwen3: the per-head q/k norms sit on q_proj's and k_proj's outputs, which
// the rotation leaves alone; head_dim 32 x 4 heads != hidden 64.
TEST(RotationTest, KeepsFloatLogitsOnQwen3) {
  models::RandomCheckpointOptions c;
  c.architecture = "qwen3";
  c.hidden_size = 64;
  c.head_dim = 32;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 256;
  ExpectRotationKeepsFloatLogits("rotation_qwen3_model", c, 6, 32);
}

}  // namespace
}  // namespace quantd::algo
