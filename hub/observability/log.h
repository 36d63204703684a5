// Structured logs: one line per significant event, as key=value pairs
// (logfmt), on stderr through spdlog.
//
//   ts=2026-11-30T07:50:01.123Z level=info event=agent_registered
//   agent_id=session:a generation=3
//
// Responsible for the level (--log_level), the line format and quoting.
// Not responsible for deciding what is logged (the callers: one line per
// registration, fencing rejection, role transition, failover, dead letter)
// and never given secrets: request metadata (where bearer tokens travel) is
// not a field anywhere. Thread-safe.
//
// spdlog rather than glog: Debian's glog brings gflags, a second flag
// registry beside the Abseil flags hubd parses (--v, --logtostderr, ...
// would be unknown to absl::ParseCommandLine), and its line prefix is fixed,
// while spdlog's pattern gives the logfmt prefix and its level is set at
// run time.
#ifndef HUB_HUB_OBSERVABILITY_LOG_H_
#define HUB_HUB_OBSERVABILITY_LOG_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hub::log {

enum class Level { kDebug, kInfo, kWarn, kError, kOff };

// "debug", "info", "warn", "error" or "off"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Level> ParseLevel(absl::string_view name);
// The process-wide level; default info.
void SetLevel(Level level);
bool Enabled(Level level);

struct Field {
  Field(absl::string_view key, const absl::AlphaNum& value)
      : key(key), value(value.Piece()) {}
  absl::string_view key;
  std::string value;
};

// `event=NAME k=v ...`: values that are empty or hold spaces, quotes, '=',
// backslashes or control characters are double-quoted with escapes.
std::string FormatEvent(absl::string_view event,
                        std::initializer_list<Field> fields);

// Writes one line at `level` if enabled.
void Event(Level level, absl::string_view event,
           std::initializer_list<Field> fields);

// Told of every line Event writes (after the level check), with its fields
// as written: hubd's console shows them as its events feed. Must be quick
// and must not log.
using Observer = std::function<void(
    Level level, absl::string_view event,
    const std::vector<std::pair<std::string, std::string>>& fields)>;
// Adds an observer; returns the id to remove it with. Once RemoveObserver
// returns, the observer is not running and never runs again.
int64_t AddObserver(Observer observer);
void RemoveObserver(int64_t id);
absl::string_view LevelName(Level level);

inline void Info(absl::string_view event, std::initializer_list<Field> fields) {
  Event(Level::kInfo, event, fields);
}
inline void Warn(absl::string_view event, std::initializer_list<Field> fields) {
  Event(Level::kWarn, event, fields);
}
inline void Debug(absl::string_view event,
                  std::initializer_list<Field> fields) {
  Event(Level::kDebug, event, fields);
}

}  // namespace hub::log

#endif  // HUB_HUB_OBSERVABILITY_LOG_H_
