#include "registry/claude_uds_adapter.h"

#include <cerrno>
#include <cstdint>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "registry/subprocess.h"

namespace hub {
namespace {

constexpr char kProbeSchema[] = "tfx-live.transport-probe.v1";

// Whole seconds for --timeout, rounded up, at least 1.
std::string Seconds(absl::Duration timeout) {
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  return absl::StrCat(ms <= 1000 ? 1 : (ms + 999) / 1000);
}

// The last output line that is a JSON object (the command may log before
// it), or nullopt.
std::optional<nlohmann::json> LastJsonObject(const std::string& output) {
  std::vector<absl::string_view> lines = absl::StrSplit(output, '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    absl::string_view line = absl::StripAsciiWhitespace(*it);
    if (line.empty() || line.front() != '{') continue;
    nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    if (value.is_object()) return value;
  }
  return std::nullopt;
}

// A failure code the command reported, if it is one of the normalized ones.
std::optional<std::string> ReportedFailure(
    const std::optional<nlohmann::json>& payload) {
  if (!payload.has_value()) return std::nullopt;
  for (const char* field : {"reason_code", "reason"}) {
    auto it = payload->find(field);
    if (it == payload->end() || !it->is_string()) continue;
    const std::string code = it->get<std::string>();
    for (absl::string_view known :
         {kProbeTargetNotFound, kProbeAdapterUnavailable, kProbeTimeout,
          kProbePermissionDenied, kProbeProtocolMismatch,
          kProbeTransportError}) {
      if (code == known) return code;
    }
    return std::string(kProbeProtocolMismatch);  // a code we do not know
  }
  return std::nullopt;
}

// Failures common to probe and wake: the command could not run or finish.
std::optional<TransportResult> RunFailure(const CommandResult& r,
                                          absl::string_view what) {
  if (r.spawn_errno == ENOENT) {
    return TransportResult{std::string(kProbeAdapterUnavailable),
                           "the claude-uds command is not installed"};
  }
  if (r.spawn_errno == EACCES || r.spawn_errno == EPERM) {
    return TransportResult{std::string(kProbePermissionDenied),
                           "the claude-uds command is not executable"};
  }
  if (r.spawn_errno != 0) {
    return TransportResult{
        std::string(kProbeTransportError),
        absl::StrCat("cannot start the claude-uds command (errno ",
                     r.spawn_errno, ")")};
  }
  if (r.timed_out) {
    return TransportResult{std::string(kProbeTimeout),
                           absl::StrCat(what, " timed out")};
  }
  if (r.term_signal != 0) {
    return TransportResult{
        std::string(kProbeTransportError),
        absl::StrCat(what, " was killed by signal ", r.term_signal)};
  }
  return std::nullopt;
}

// A non-zero exit: the command's own code if it gave one, else 1 is
// "target not found" (tfx-live's convention) and anything else an error.
TransportResult ExitFailure(const CommandResult& r,
                            const std::optional<nlohmann::json>& payload,
                            absl::string_view what) {
  if (std::optional<std::string> code = ReportedFailure(payload)) {
    return {*code, absl::StrCat(what, " failed (exit ", r.exit_code, ")")};
  }
  if (r.exit_code == 1) {
    return {std::string(kProbeTargetNotFound),
            absl::StrCat(what, ": target not found")};
  }
  return {std::string(kProbeTransportError),
          absl::StrCat(what, " failed (exit ", r.exit_code, ")")};
}

}  // namespace

ClaudeUdsAdapter::ClaudeUdsAdapter(ClaudeUdsAdapterOptions options)
    : options_(std::move(options)) {}

std::optional<std::vector<std::string>> ClaudeUdsAdapter::TargetArgs(
    const TransportLocator& locator, TransportResult* failure) const {
  if (options_.command.empty()) {
    *failure = {std::string(kProbeAdapterUnavailable),
                "no claude-uds command is configured"};
    return std::nullopt;
  }
  const auto* uds = std::get_if<ClaudeUdsLocator>(&locator.locator);
  if (uds == nullptr || locator.kind != kKindClaudeUds) {
    *failure = {std::string(kProbeProtocolMismatch),
                "not a claude-uds locator"};
    return std::nullopt;
  }
  std::vector<std::string> args;
  if (uds->session_id.has_value() && !uds->session_id->empty()) {
    args = {"--session-id", *uds->session_id};
  } else if (uds->short_id.has_value() && !uds->short_id->empty()) {
    args = {"--short", *uds->short_id};
  } else {
    *failure = {std::string(kProbeTargetNotFound),
                "the locator names no session"};
    return std::nullopt;
  }
  args.push_back("--bridge");
  args.push_back(options_.bridge.value_or(uds->bridge_id));
  return args;
}

std::optional<std::vector<std::string>> ClaudeUdsAdapter::ProbeArgv(
    const TransportLocator& locator, absl::Duration timeout,
    TransportResult* failure) const {
  std::optional<std::vector<std::string>> target = TargetArgs(locator, failure);
  if (!target.has_value()) return std::nullopt;
  std::vector<std::string> argv = options_.command;
  argv.push_back("probe");
  argv.insert(argv.end(), target->begin(), target->end());
  argv.insert(argv.end(), {"--timeout", Seconds(timeout)});
  return argv;
}

std::optional<std::vector<std::string>> ClaudeUdsAdapter::WakeArgv(
    const TransportLocator& locator, absl::string_view activation_json,
    absl::Duration timeout, TransportResult* failure) const {
  std::optional<std::vector<std::string>> target = TargetArgs(locator, failure);
  if (!target.has_value()) return std::nullopt;
  std::vector<std::string> argv = options_.command;
  argv.insert(argv.end(), {"ask", "--cli", "claude", "--transport", "uds"});
  argv.insert(argv.end(), target->begin(), target->end());
  argv.insert(argv.end(), {"--prompt", std::string(activation_json),
                           "--timeout", Seconds(timeout)});
  return argv;
}

TransportResult ClaudeUdsAdapter::Probe(const TransportLocator& locator,
                                        absl::Duration timeout) {
  TransportResult failure;
  std::optional<std::vector<std::string>> argv =
      ProbeArgv(locator, timeout, &failure);
  if (!argv.has_value()) return failure;
  const CommandResult r = RunCommand(*argv, timeout);
  if (std::optional<TransportResult> f = RunFailure(r, "claude-uds probe")) {
    return *f;
  }
  const std::optional<nlohmann::json> payload = LastJsonObject(r.output);
  if (r.exit_code != 0) return ExitFailure(r, payload, "claude-uds probe");
  if (!payload.has_value()) {
    return {std::string(kProbeProtocolMismatch),
            "claude-uds probe printed no JSON result"};
  }
  auto schema = payload->find("schema_version");
  if (schema != payload->end() &&
      !(schema->is_string() && schema->get<std::string>() == kProbeSchema)) {
    return {std::string(kProbeProtocolMismatch),
            "claude-uds probe answered with another schema"};
  }
  auto ok = payload->find("ok");
  if (ok != payload->end() && ok->is_boolean() && ok->get<bool>()) {
    return {std::string(kProbeOk), ""};
  }
  if (std::optional<std::string> code = ReportedFailure(payload)) {
    return {*code, "claude-uds probe reported a failure"};
  }
  return {std::string(kProbeTargetNotFound),
          "claude-uds probe: target not reachable"};
}

TransportResult ClaudeUdsAdapter::Wake(const TransportLocator& locator,
                                       absl::string_view activation_json,
                                       absl::Duration timeout) {
  TransportResult failure;
  std::optional<std::vector<std::string>> argv =
      WakeArgv(locator, activation_json, timeout, &failure);
  if (!argv.has_value()) return failure;
  const CommandResult r = RunCommand(*argv, timeout);
  if (std::optional<TransportResult> f = RunFailure(r, "claude-uds wake")) {
    return *f;
  }
  const std::optional<nlohmann::json> payload = LastJsonObject(r.output);
  if (r.exit_code != 0) return ExitFailure(r, payload, "claude-uds wake");
  if (payload.has_value()) {
    auto ok = payload->find("ok");
    if (ok != payload->end() && ok->is_boolean() && !ok->get<bool>()) {
      return {
          ReportedFailure(payload).value_or(std::string(kProbeTransportError)),
          "claude-uds wake reported a failure"};
    }
  }
  return {std::string(kProbeOk), ""};
}

}  // namespace hub
