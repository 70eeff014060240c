#include "worker/common/cancellation.h"

namespace quantd {
namespace {

thread_local CancellationScope* innermost = nullptr;

}  // namespace

CancellationScope::CancellationScope(std::function<bool()> requested)
    : requested_(std::move(requested)), outer_(innermost) {
  innermost = this;
}

CancellationScope::~CancellationScope() { innermost = outer_; }

bool StopRequested() {
  for (const CancellationScope* s = innermost; s != nullptr; s = s->outer_) {
    if (s->requested_ && s->requested_()) return true;
  }
  return false;
}

}  // namespace quantd
