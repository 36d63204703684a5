#include "hub/observability/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace hub::log {
namespace {

spdlog::level::level_enum ToSpdlog(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

// The hub's logger: unbuffered stderr, UTC timestamps, logfmt prefix. Not
// registered in spdlog's global registry, so nothing else can reconfigure it.
spdlog::logger& Logger() {
  static spdlog::logger* logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* l = new spdlog::logger("hub", std::move(sink));
    l->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l %v",
        spdlog::pattern_time_type::utc));
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

bool NeedsQuotes(absl::string_view value) {
  if (value.empty()) return true;
  for (unsigned char c : value) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
      return true;
    }
  }
  return false;
}

void AppendValue(std::string* out, absl::string_view value) {
  if (!NeedsQuotes(value)) {
    out->append(value.data(), value.size());
    return;
  }
  out->push_back('"');
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < ' ' || c == 0x7f) {
          absl::StrAppend(out, "\\x", absl::Hex(c, absl::kZeroPad2));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

absl::StatusOr<Level> ParseLevel(absl::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  if (name == "off") return Level::kOff;
  return absl::InvalidArgumentError(absl::StrCat(
      "log level must be debug, info, warn, error or off, got '", name, "'"));
}

void SetLevel(Level level) { Logger().set_level(ToSpdlog(level)); }

bool Enabled(Level level) {
  return level != Level::kOff && Logger().should_log(ToSpdlog(level));
}

std::string FormatEvent(absl::string_view event,
                        std::initializer_list<Field> fields) {
  std::string line = "event=";
  AppendValue(&line, event);
  for (const Field& f : fields) {
    absl::StrAppend(&line, " ", f.key, "=");
    AppendValue(&line, f.value);
  }
  return line;
}

namespace {

struct Observers {
  absl::Mutex mu;
  int64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::map<int64_t, std::shared_ptr<const Observer>> by_id ABSL_GUARDED_BY(mu);
  // Held while observers run, so that RemoveObserver can wait for them.
  absl::Mutex running;
};

Observers& TheObservers() {
  static auto* observers = new Observers();
  return *observers;
}

}  // namespace

int64_t AddObserver(Observer observer) {
  Observers& o = TheObservers();
  absl::MutexLock lock(&o.mu);
  const int64_t id = o.next_id++;
  o.by_id[id] = std::make_shared<const Observer>(std::move(observer));
  return id;
}

void RemoveObserver(int64_t id) {
  Observers& o = TheObservers();
  {
    absl::MutexLock lock(&o.mu);
    o.by_id.erase(id);
  }
  // A line being observed finishes before this returns.
  absl::WriterMutexLock wait(&o.running);
}

absl::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    case Level::kOff:
    default:
      return "off";
  }
}

void Event(Level level, absl::string_view event,
           std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  Logger().log(ToSpdlog(level), "{}", FormatEvent(event, fields));
  Observers& o = TheObservers();
  absl::ReaderMutexLock running(&o.running);
  std::vector<std::shared_ptr<const Observer>> observers;
  {
    absl::MutexLock lock(&o.mu);
    if (o.by_id.empty()) return;
    for (const auto& [id, observer] : o.by_id) observers.push_back(observer);
  }
  std::vector<std::pair<std::string, std::string>> copied;
  copied.reserve(fields.size());
  for (const Field& f : fields) copied.emplace_back(f.key, f.value);
  for (const auto& observer : observers) (*observer)(level, event, copied);
}

}  // namespace hub::log
