#include "tools/hubctl/cli.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "google/protobuf/util/json_util.h"

namespace hub::hubctl {
namespace {

constexpr char kUsagePayload[] = "hubctl/usage";

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrCat("\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return 0;
  if (IsUsageError(status)) return kUsageExit;
  return static_cast<int>(status.code());
}

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& words,
                                 const std::vector<FlagSpec>& specs) {
  Args args;
  bool only_positional = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (only_positional || !absl::StartsWith(word, "--")) {
      args.positional_.push_back(word);
      continue;
    }
    if (word == "--") {
      only_positional = true;
      continue;
    }
    std::string name = word.substr(2);
    std::optional<std::string> value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      return UsageError(absl::StrCat("unknown flag --", name));
    }
    if (spec->value.empty()) {
      if (value.has_value()) {
        return UsageError(absl::StrCat("--", name, " takes no value"));
      }
      value = "";
    } else if (!value.has_value()) {
      if (i + 1 >= words.size()) {
        return UsageError(
            absl::StrCat("--", name, " needs a value (", spec->value, ")"));
      }
      value = words[++i];
    }
    args.flags_[name].push_back(*value);
  }
  return args;
}

std::string Args::Get(const std::string& name,
                      const std::string& fallback) const {
  auto it = flags_.find(name);
  return it == flags_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  auto it = flags_.find(name);
  return it == flags_.end() ? std::vector<std::string>() : it->second;
}

namespace {

// The value of flag `name` through `parse` (text -> value, false when
// malformed); absent: nullopt; malformed: a usage error saying it is not
// `what`.
template <typename T, typename Parse>
absl::StatusOr<std::optional<T>> ParsedFlag(const Args& args,
                                            const std::string& name,
                                            absl::string_view what,
                                            Parse parse) {
  if (!args.Has(name)) return std::optional<T>();
  const std::string text = args.Get(name);
  T value{};
  if (!parse(text, &value)) {
    return UsageError(
        absl::StrCat("--", name, ": not ", what, ": '", text, "'"));
  }
  return std::optional<T>(value);
}

}  // namespace

absl::StatusOr<std::optional<int64_t>> Args::GetInt(
    const std::string& name) const {
  return ParsedFlag<int64_t>(
      *this, name, "an integer",
      [](const std::string& t, int64_t* v) { return absl::SimpleAtoi(t, v); });
}

absl::StatusOr<std::optional<double>> Args::GetDouble(
    const std::string& name) const {
  return ParsedFlag<double>(
      *this, name, "a number",
      [](const std::string& t, double* v) { return absl::SimpleAtod(t, v); });
}

absl::StatusOr<std::optional<absl::Duration>> Args::GetDuration(
    const std::string& name) const {
  return ParsedFlag<absl::Duration>(
      *this, name, "a duration (e.g. 30s)",
      [](const std::string& t, absl::Duration* v) {
        return absl::ParseDuration(t, v);
      });
}

absl::StatusOr<std::optional<absl::Time>> Args::GetTime(
    const std::string& name) const {
  return ParsedFlag<absl::Time>(
      *this, name, "an RFC 3339 time (e.g. 2026-01-02T03:04:05Z)",
      [](const std::string& t, absl::Time* v) {
        std::string error;
        return absl::ParseTime(absl::RFC3339_full, t, v, &error);
      });
}

std::string FlagOrEnv(const Args& args, const char* flag, const char* env) {
  if (args.Has(flag)) return args.Get(flag);
  const char* value = std::getenv(env);
  return value != nullptr ? value : "";
}

std::string AgentFromArgs(const Args& args) {
  return FlagOrEnv(args, "agent", "HUB_AGENT_ID");
}

std::string ProjectFromArgs(const Args& args) {
  return FlagOrEnv(args, "project", "HUB_PROJECT_ID");
}

absl::Status JsonFlag(const Args& args, const std::string& flag,
                      google::protobuf::Message* message) {
  if (!args.Has(flag)) return absl::OkStatus();
  google::protobuf::util::Status parsed =
      google::protobuf::util::JsonStringToMessage(args.Get(flag), message);
  if (!parsed.ok()) {
    return UsageError(absl::StrCat(
        "--", flag, ": not a JSON object: ", parsed.message().as_string()));
  }
  return absl::OkStatus();
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size())
        line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  };
  print(header_);
  for (const auto& row : rows_) print(row);
}

void PrintFields(std::ostream& out,
                 const std::vector<std::pair<std::string, std::string>>& kv) {
  size_t width = 0;
  for (const auto& [key, value] : kv) width = std::max(width, key.size());
  for (const auto& [key, value] : kv) {
    out << key << ":" << std::string(width - key.size() + 1, ' ') << value
        << "\n";
  }
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  const absl::Time time =
      absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

std::string FormatDuration(const google::protobuf::Duration& d) {
  return absl::FormatDuration(absl::Seconds(d.seconds()) +
                              absl::Nanoseconds(d.nanos()));
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t ms = absl::ToInt64Milliseconds(d);
  out.set_seconds(ms / 1000);
  out.set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
  return out;
}

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  google::protobuf::Timestamp out;
  // Whole seconds rounded down, so nanos are never negative (as proto wants).
  const int64_t seconds = absl::ToUnixSeconds(t);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return out;
}

std::string EnumWord(const std::string& name, const std::string& prefix) {
  std::string word = absl::StartsWith(name, prefix)
                         ? name.substr(prefix.size())
                         : (name.empty() ? std::string("?") : name);
  word = absl::AsciiStrToLower(word);
  absl::StrReplaceAll({{"_", "-"}}, &word);
  return word;
}

void PrintError(std::ostream& err, const absl::Status& status, bool json) {
  const std::string code = absl::StatusCodeToString(status.code());
  const std::string reason = client::ReasonOf(status);
  if (!json || IsUsageError(status)) {
    // hub's messages already lead with the reason; do not print it twice.
    err << "hubctl: " << code;
    if (!reason.empty() && !absl::StartsWith(status.message(), reason)) {
      err << " " << reason;
    }
    err << ": " << status.message() << "\n";
    return;
  }
  err << "{\"code\":\"" << code << "\",\"exitCode\":" << ExitCodeOf(status)
      << ",\"reason\":\"" << JsonEscape(reason) << "\",\"message\":\""
      << JsonEscape(std::string(status.message())) << "\",\"metadata\":{";
  if (auto info = client::ErrorInfoOf(status)) {
    std::map<std::string, std::string> sorted(info->metadata().begin(),
                                              info->metadata().end());
    bool first = true;
    for (const auto& [key, value] : sorted) {
      if (!first) err << ",";
      first = false;
      err << "\"" << JsonEscape(key) << "\":\"" << JsonEscape(value) << "\"";
    }
  }
  err << "}}\n";
}

}  // namespace hub::hubctl
