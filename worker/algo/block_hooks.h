// Linear hooks that an algorithm installs for its own passes over a block
// and then switches off.
//
// models::Linear can only clear all of its hooks at once, which would also
// remove hooks someone else installed (the rotation's online Hadamard before
// down_proj, which must stay). So the hooks added here stay in the Linear but
// turn into pass-throughs once their ScopedHooks is destroyed or disarmed.
#ifndef QUANTD_WORKER_ALGO_BLOCK_HOOKS_H_
#define QUANTD_WORKER_ALGO_BLOCK_HOOKS_H_

#include <ATen/ATen.h>

#include <atomic>
#include <functional>
#include <memory>

#include "worker/models/linear.h"

namespace quantd::algo {

class ScopedHooks {
 public:
  ScopedHooks() : armed_(std::make_shared<std::atomic<bool>>(true)) {}
  ~ScopedHooks() { Disarm(); }
  ScopedHooks(const ScopedHooks&) = delete;
  ScopedHooks& operator=(const ScopedHooks&) = delete;

  // fn sees every sub-batch entering (leaving) `linear`, after (before) the
  // hooks installed earlier.
  void ObserveInput(models::Linear& linear, std::function<void(const at::Tensor&)> fn) {
    linear.AddInputHook(Wrap(std::move(fn)));
  }
  void ObserveOutput(models::Linear& linear, std::function<void(const at::Tensor&)> fn) {
    linear.AddOutputHook(Wrap(std::move(fn)));
  }
  // fn's result replaces the sub-batch entering `linear`.
  void ReplaceInput(models::Linear& linear, std::function<at::Tensor(const at::Tensor&)> fn) {
    auto armed = armed_;
    linear.AddInputHook([armed, fn = std::move(fn)](const models::Linear&, const at::Tensor& t) {
      return armed->load() ? fn(t) : t;
    });
  }

  // Every hook added so far becomes a pass-through; later ones are live.
  void Disarm() {
    armed_->store(false);
    armed_ = std::make_shared<std::atomic<bool>>(true);
  }

 private:
  models::LinearHook Wrap(std::function<void(const at::Tensor&)> fn) {
    auto armed = armed_;
    return [armed, fn = std::move(fn)](const models::Linear&, const at::Tensor& t) {
      if (armed->load()) fn(t);
      return t;
    };
  }

  std::shared_ptr<std::atomic<bool>> armed_;
};

}  // namespace quantd::algo

#endif  // QUANTD_WORKER_ALGO_BLOCK_HOOKS_H_
