#include "worker/cli/console_context.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>

#include "client/cli_common/render.h"

namespace quantd::cli {

using google::protobuf::util::TimeUtil;

ConsoleJobContext::ConsoleJobContext(ConsoleOptions options, std::ostream& out, std::ostream& err,
                                     const std::atomic<bool>* cancel)
    : options_(std::move(options)),
      out_(out),
      err_(err),
      cancel_(cancel),
      bar_(err, options_.tty && !options_.json) {}

void ConsoleJobContext::Emit(quantd::v1::JobEvent event) {
  event.set_job(options_.job_name);
  event.set_sequence(++sequence_);
  *event.mutable_time() = TimeUtil::GetCurrentTime();
  out_ << cli_common::ToJson(event, false) << std::endl;
}

void ConsoleJobContext::Report(quantd::v1::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.json) {
    Emit(std::move(event));
    return;
  }
  switch (event.payload_case()) {
    case quantd::v1::JobEvent::kLog: {
      bar_.EndLine();
      const auto sev = event.log().severity();
      const char* prefix = sev == quantd::v1::WARNING ? "warning: "
                           : sev == quantd::v1::ERROR ? "error: "
                                                      : "";
      out_ << prefix << event.log().message() << std::endl;
      break;
    }
    case quantd::v1::JobEvent::kBlockMetrics: {
      bar_.EndLine();
      const auto& b = event.block_metrics();
      out_ << cli_common::RenderBlockMetrics(b,
                                             b.block_count() > 0 ? b.block_count() : block_count_)
           << std::endl;
      break;
    }
    case quantd::v1::JobEvent::kState:
      bar_.EndLine();
      out_ << "state: " << quantd::v1::JobState_Name(event.state()) << std::endl;
      break;
    default:
      break;
  }
}

void ConsoleJobContext::SetProgress(const quantd::v1::Progress& p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (p.block_count() > 0) block_count_ = p.block_count();
  // Like quantctl: one event per stage / block.
  const bool changed = !any_progress_ || p.stage() != shown_.stage() || p.block() != shown_.block();
  if (options_.json) {
    if (changed) {
      quantd::v1::JobEvent ev;
      *ev.mutable_progress() = p;
      Emit(std::move(ev));
    }
  } else {
    bar_.Show(p);
  }
  any_progress_ = true;
  shown_ = p;
}

bool ConsoleJobContext::CancelRequested() const { return cancel_ != nullptr && cancel_->load(); }

void ConsoleJobContext::ReportState(quantd::v1::JobState state) {
  quantd::v1::JobEvent ev;
  ev.set_state(state);
  Report(std::move(ev));
}

void ConsoleJobContext::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  bar_.EndLine();
  err_ << std::flush;
  out_ << std::flush;
}

}  // namespace quantd::cli
