// Structured logs: one JSON object per line on stderr, with the fields that
// let an operator follow a job across frontends and workers (job, tenant,
// worker, attempt). Deliberately small: a level, a message, and fields.
#ifndef QUANTD_SERVER_COMMON_JSON_LOG_H_
#define QUANTD_SERVER_COMMON_JSON_LOG_H_

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace quantd::server {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Writes {"ts":..., "level":..., "msg":..., <fields>} to the log sink.
// `fields` must be a JSON object (or null for none).
void Log(LogLevel level, std::string_view message, const nlohmann::json& fields = nullptr);

// Lines below `level` are dropped. Default kInfo.
void SetMinLogLevel(LogLevel level);

// Redirects the log (tests); nullptr restores stderr.
void SetLogSink(std::FILE* sink);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_JSON_LOG_H_
