#include "registry/tmux_adapter.h"

#include <cerrno>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "registry/subprocess.h"

namespace hub {
namespace {

// Maps a finished tmux command to a normalized code.
TransportResult Classify(const CommandResult& r, absl::string_view what) {
  if (r.spawn_errno == ENOENT) {
    return {std::string(kProbeAdapterUnavailable), "tmux is not installed"};
  }
  if (r.spawn_errno == EACCES) {
    return {std::string(kProbePermissionDenied), "tmux is not executable"};
  }
  if (r.spawn_errno != 0) {
    return {std::string(kProbeTransportError),
            absl::StrCat("cannot start tmux (errno ", r.spawn_errno, ")")};
  }
  if (r.timed_out)
    return {std::string(kProbeTimeout), absl::StrCat(what, " timed out")};
  if (r.ok()) return {std::string(kProbeOk), ""};
  // tmux says "can't find session", "no server running on ...", or "error
  // connecting to ... (No such file or directory)" when the target is gone.
  if (absl::StrContains(r.output, "can't find") ||
      absl::StrContains(r.output, "no server running") ||
      absl::StrContains(r.output, "No such file or directory")) {
    return {std::string(kProbeTargetNotFound),
            absl::StrCat(what, ": no such session")};
  }
  if (absl::StrContains(r.output, "Permission denied")) {
    return {std::string(kProbePermissionDenied),
            absl::StrCat(what, ": permission denied")};
  }
  return {std::string(kProbeTransportError),
          absl::StrCat(what, " failed (exit ", r.exit_code, ")")};
}

}  // namespace

TmuxAdapter::TmuxAdapter(TmuxAdapterOptions options)
    : options_(std::move(options)) {
  if (!options_.server_args) {
    options_.server_args = [](const std::string& mux_server_id)
        -> std::optional<std::vector<std::string>> {
      if (mux_server_id == "default") return std::vector<std::string>{};
      return std::vector<std::string>{"-L", mux_server_id};
    };
  }
}

std::optional<std::vector<std::string>> TmuxAdapter::Command(
    const TransportLocator& l, TransportResult* failure) const {
  const auto* tmux = std::get_if<TmuxLocator>(&l.locator);
  if (tmux == nullptr) {
    *failure = {std::string(kProbeProtocolMismatch), "not a tmux locator"};
    return std::nullopt;
  }
  std::optional<std::vector<std::string>> server =
      options_.server_args(tmux->mux_server_id);
  if (!server.has_value()) {
    *failure = {std::string(kProbeTargetNotFound), "unknown tmux server"};
    return std::nullopt;
  }
  std::vector<std::string> argv = {options_.tmux};
  argv.insert(argv.end(), server->begin(), server->end());
  return argv;
}

TransportResult TmuxAdapter::Probe(const TransportLocator& locator,
                                   absl::Duration timeout) {
  TransportResult failure;
  std::optional<std::vector<std::string>> argv = Command(locator, &failure);
  if (!argv.has_value()) return failure;
  // "=name" matches the session name exactly, not as a prefix.
  argv->insert(
      argv->end(),
      {"has-session", "-t",
       absl::StrCat("=", std::get<TmuxLocator>(locator.locator).session_name)});
  return Classify(RunCommand(*argv, timeout), "tmux has-session");
}

TransportResult TmuxAdapter::Wake(const TransportLocator& locator,
                                  absl::string_view activation_json,
                                  absl::Duration timeout) {
  TransportResult failure;
  std::optional<std::vector<std::string>> base = Command(locator, &failure);
  if (!base.has_value()) return failure;
  const std::string target = absl::StrCat(
      "=", std::get<TmuxLocator>(locator.locator).session_name, ":");
  const absl::Time deadline = absl::Now() + timeout;
  // -l types the text literally: key names inside the JSON are not keys.
  std::vector<std::string> type = *base;
  type.insert(type.end(),
              {"send-keys", "-t", target, "-l", std::string(activation_json)});
  TransportResult typed = Classify(RunCommand(type, timeout), "tmux send-keys");
  if (!typed.ok()) return typed;
  std::vector<std::string> enter = *base;
  enter.insert(enter.end(), {"send-keys", "-t", target, "Enter"});
  return Classify(RunCommand(enter, std::max(deadline - absl::Now(),
                                             absl::Milliseconds(1))),
                  "tmux send-keys");
}

}  // namespace hub
