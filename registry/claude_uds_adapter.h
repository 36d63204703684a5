// The claude-uds transport adapter: reaches a Claude Code session through an
// external command speaking triflux's `tfx-live` interface (TRIFLUX-HUB
// §5.8). hub does not talk to the session's socket itself; the command does.
//
//   probe: <command...> probe (--session-id <id> | --short <short>)
//          --bridge <bridge> --timeout <seconds>
//   wake:  <command...> ask --cli claude --transport uds
//          (--session-id <id> | --short <short>) --bridge <bridge>
//          --prompt <activation JSON> --timeout <seconds>
//
// Every argument is one argv element (never a shell); stdin is /dev/null;
// the process is killed at the timeout; at most 64 KiB of its output is read.
// The command answers with a JSON object on its last output line
// (`tfx-live.transport-probe.v1` for a probe: {"ok": true, ...} or
// {"ok": false, "reason_code": "..."}). Exit status 1 means the target was
// not found; other failures map to the normalized codes of
// transport_adapter.h.
//
// Without a configured command every call reports adapter_unavailable, which
// makes the activator disable this adapter kind only.
#ifndef HUB_REGISTRY_CLAUDE_UDS_ADAPTER_H_
#define HUB_REGISTRY_CLAUDE_UDS_ADAPTER_H_

#include <optional>
#include <string>
#include <vector>

#include "registry/transport_adapter.h"

namespace hub {

struct ClaudeUdsAdapterOptions {
  // The command and its leading arguments, e.g. {"/usr/local/bin/tfx-live"}
  // or {"node", "/opt/triflux/bin/tfx-live.mjs"}. Empty: not configured.
  std::vector<std::string> command;
  // The value passed as --bridge. nullopt: the locator's bridge_id.
  std::optional<std::string> bridge;
};

class ClaudeUdsAdapter final : public TransportAdapter {
 public:
  explicit ClaudeUdsAdapter(ClaudeUdsAdapterOptions options = {});

  absl::string_view kind() const override { return kKindClaudeUds; }
  TransportResult Probe(const TransportLocator& locator,
                        absl::Duration timeout) override;
  TransportResult Wake(const TransportLocator& locator,
                       absl::string_view activation_json,
                       absl::Duration timeout) override;

  // The argv of a probe or a wake (for tests and logs); nullopt with
  // `failure` set when the locator cannot be served.
  std::optional<std::vector<std::string>> ProbeArgv(
      const TransportLocator& locator, absl::Duration timeout,
      TransportResult* failure) const;
  std::optional<std::vector<std::string>> WakeArgv(
      const TransportLocator& locator, absl::string_view activation_json,
      absl::Duration timeout, TransportResult* failure) const;

 private:
  // --session-id/--short and --bridge, or a failure.
  std::optional<std::vector<std::string>> TargetArgs(
      const TransportLocator& locator, TransportResult* failure) const;

  ClaudeUdsAdapterOptions options_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_CLAUDE_UDS_ADAPTER_H_
