#include "server/common/json_log.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace quantd::server {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
absl::Mutex sink_mu;
std::FILE* sink ABSL_GUARDED_BY(sink_mu) = nullptr;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void Log(LogLevel level, std::string_view message, const nlohmann::json& fields) {
  if (static_cast<int>(level) < min_level.load(std::memory_order_relaxed)) return;
  nlohmann::json line = {
      {"ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone())},
      {"level", LevelName(level)},
      {"msg", std::string(message)},
  };
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  // Replace invalid UTF-8 instead of throwing: messages may quote user input.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.push_back('\n');
  absl::MutexLock lock(&sink_mu);
  std::FILE* out = sink != nullptr ? sink : stderr;
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

void SetLogSink(std::FILE* new_sink) {
  absl::MutexLock lock(&sink_mu);
  sink = new_sink;
}

}  // namespace quantd::server
