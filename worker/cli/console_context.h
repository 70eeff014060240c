// ConsoleJobContext: the JobContext of a local run. Where the worker sends
// the engine's events to quantd, this prints them as `quantctl watch` shows
// a served job (client/cli_common/render.h): a progress bar on stderr
// (redrawn in place on a terminal, one line per stage / block otherwise),
// log lines and per-block metric rows on stdout; or, in JSON mode, one
// proto3-JSON JobEvent per line on stdout. Cancellation comes from a flag
// the caller sets (SIGINT).
#ifndef QUANTD_WORKER_CLI_CONSOLE_CONTEXT_H_
#define QUANTD_WORKER_CLI_CONSOLE_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>

#include "client/cli_common/render.h"
#include "quantd/v1/job.pb.h"
#include "worker/runner/lease_loop.h"

namespace quantd::cli {

struct ConsoleOptions {
  std::string job_name;  // stamped on JSON events
  bool json = false;
  // Redraw the progress bar in place (cli_common::StdoutAndStderrAreTerminals).
  bool tty = false;
};

class ConsoleJobContext : public worker::JobContext {
 public:
  // `out` gets events / logs / metrics, `err` the progress bar. `cancel` is
  // polled by CancelRequested (may be null).
  ConsoleJobContext(ConsoleOptions options, std::ostream& out, std::ostream& err,
                    const std::atomic<bool>* cancel);

  void Report(quantd::v1::JobEvent event) override;
  void SetProgress(const quantd::v1::Progress& progress) override;
  bool CancelRequested() const override;

  // A state change (RUNNING at the start, the final state at the end).
  void ReportState(quantd::v1::JobState state);
  // Ends an open progress line so the summary starts on a fresh line.
  void Finish();
  const quantd::v1::Progress& last_progress() const { return shown_; }

 private:
  void Emit(quantd::v1::JobEvent event);  // JSON mode; mu_ held

  ConsoleOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  const std::atomic<bool>* cancel_;
  std::mutex mu_;
  int64_t sequence_ = 0;
  int block_count_ = 0;
  cli_common::ProgressDisplay bar_;
  bool any_progress_ = false;
  quantd::v1::Progress shown_;
};

}  // namespace quantd::cli

#endif  // QUANTD_WORKER_CLI_CONSOLE_CONTEXT_H_
