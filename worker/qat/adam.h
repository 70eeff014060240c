// Adam for quantization-aware training (Kingma & Ba, with PyTorch's
// defaults: betas 0.9 / 0.999, eps 1e-8, no weight decay), its moments kept
// where a checkpoint can save and restore them, and the cosine learning-rate
// schedule the trainers use.
#ifndef QUANTD_WORKER_QAT_ADAM_H_
#define QUANTD_WORKER_QAT_ADAM_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace quantd::qat {

class Adam {
 public:
  static constexpr double kBeta1 = 0.9;
  static constexpr double kBeta2 = 0.999;
  static constexpr double kEps = 1e-8;

  // `params` require grad; they are updated in place.
  explicit Adam(std::vector<at::Tensor> params);

  // Drops the gradients of the last backward.
  void ZeroGrad();
  // One update with learning rate `lr` from the parameters' gradients.
  void Step(double lr);

  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  std::vector<at::Tensor>& params() { return params_; }
  std::vector<at::Tensor>& m() { return m_; }
  std::vector<at::Tensor>& v() { return v_; }

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> m_;
  std::vector<at::Tensor> v_;
  int64_t steps_ = 0;
};

// The learning rate of step `step` (1-based) of `steps`: a cosine from
// `base` at step 1 towards 0.
double CosineLearningRate(double base, int step, int steps);

}  // namespace quantd::qat

#endif  // QUANTD_WORKER_QAT_ADAM_H_
