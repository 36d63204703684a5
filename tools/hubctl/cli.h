// The small command-line kit of hubctl: argument parsing with per-command
// flag declarations, usage errors, tables, proto JSON, enum words, and the
// exit-code rule (exit status = gRPC status code; 64 for usage errors).
#ifndef HUB_TOOLS_HUBCTL_CLI_H_
#define HUB_TOOLS_HUBCTL_CLI_H_

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"

namespace hub::hubctl {

// Exit status of a command line that hubctl refused before calling the hub
// (unknown command or flag, missing or malformed argument): sysexits'
// EX_USAGE, outside the gRPC code range 0..16.
inline constexpr int kUsageExit = 64;

// A status that means "the command line is wrong" (exit kUsageExit).
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& status);
// 0 for OK, kUsageExit for usage errors, else the gRPC code number.
int ExitCodeOf(const absl::Status& status);

// A flag a command accepts. `value` names its value in help ("" for a
// boolean switch).
struct FlagSpec {
  std::string name;
  std::string value;
  std::string help;
};

// Parsed command line: positional words and --flags (--name=value,
// --name value, or --name for switches). A flag given more than once keeps
// every value, in order: Get returns the last, GetAll all of them.
class Args {
 public:
  // Parses argv[first..]; `specs` lists the accepted flags (with the global
  // ones). Unknown flags and missing values are usage errors.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& words,
                                    const std::vector<FlagSpec>& specs);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& name) const { return flags_.count(name) > 0; }
  std::string Get(const std::string& name,
                  const std::string& fallback = "") const;
  // Every value of a repeatable flag, in the order given; empty when absent.
  std::vector<std::string> GetAll(const std::string& name) const;
  // Integer / number / duration / time (RFC 3339, "2026-01-02T03:04:05Z")
  // values; usage error when malformed.
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name) const;
  absl::StatusOr<std::optional<double>> GetDouble(
      const std::string& name) const;
  absl::StatusOr<std::optional<absl::Duration>> GetDuration(
      const std::string& name) const;
  absl::StatusOr<std::optional<absl::Time>> GetTime(
      const std::string& name) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> flags_;
};

// A flag's value, else the environment variable `env`'s, else "".
std::string FlagOrEnv(const Args& args, const char* flag, const char* env);
// The acting agent: --agent, else $HUB_AGENT_ID.
std::string AgentFromArgs(const Args& args);
// The project: --project, else $HUB_PROJECT_ID.
std::string ProjectFromArgs(const Args& args);

// Parses a JSON flag (--payload='{"a":1}') into `message` (a Struct: any
// JSON object); nothing when the flag is absent; a usage error naming the
// flag when the text is not what `message` takes.
absl::Status JsonFlag(const Args& args, const std::string& flag,
                      google::protobuf::Message* message);

// Column-aligned text output.
class Table {
 public:
  explicit Table(std::vector<std::string> header)
      : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "key: value" lines, keys aligned.
void PrintFields(std::ostream& out,
                 const std::vector<std::pair<std::string, std::string>>& kv);

// One-line proto3 JSON of `message` (lowerCamelCase names, enums by name).
std::string ToJson(const google::protobuf::Message& message);

// "2026-01-02T03:04:05.678Z", or "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& t);
std::string FormatDuration(const google::protobuf::Duration& d);
google::protobuf::Duration ToProtoDuration(absl::Duration d);
google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);

// An enum value's name as a short lower-case word:
// ("ROLE_STATE_ELECTED_PROBING", "ROLE_STATE_") -> "elected-probing".
std::string EnumWord(const std::string& name, const std::string& prefix);

// Parses a word ("elected-probing", "ELECTED_PROBING") into an enum through
// its generated _Parse function; usage error naming `flag` if unknown or
// the zero (UNSPECIFIED) value.
template <typename E>
absl::StatusOr<E> ParseEnumWord(const std::string& flag,
                                const std::string& word,
                                const std::string& prefix,
                                bool (*parse)(const std::string&, E*)) {
  std::string upper = absl::AsciiStrToUpper(word);
  absl::StrReplaceAll({{"-", "_"}}, &upper);
  E value{};
  if (!parse(prefix + upper, &value) || static_cast<int>(value) == 0) {
    return UsageError(absl::StrCat("--", flag, ": unknown value '", word, "'"));
  }
  return value;
}

// Prints a failed call: "hubctl: CODE REASON: message" (text) or a JSON
// object {"code", "reason", "message", "metadata"} (json), to `err`.
void PrintError(std::ostream& err, const absl::Status& status, bool json);

}  // namespace hub::hubctl

#endif  // HUB_TOOLS_HUBCTL_CLI_H_
