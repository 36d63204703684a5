// Reaching an agent outside its presence stream: one adapter per locator
// kind (tmux, claude-uds). The activator probes a locator, then wakes it with
// the activation envelope; every result is one of triflux's normalized probe
// codes (`tfx-live.transport-probe.v1`). Adapters do process I/O: call them
// without locks held and never inside a database transaction.
#ifndef HUB_REGISTRY_TRANSPORT_ADAPTER_H_
#define HUB_REGISTRY_TRANSPORT_ADAPTER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "registry/transport_locator.h"

namespace hub {

// Normalized outcome codes (TRIFLUX-HUB §5.8).
inline constexpr absl::string_view kProbeOk = "ok";
inline constexpr absl::string_view kProbeTargetNotFound = "target_not_found";
// The adapter cannot work at all (its program is missing or unconfigured):
// the activator disables this adapter kind, not the candidate.
inline constexpr absl::string_view kProbeAdapterUnavailable =
    "adapter_unavailable";
inline constexpr absl::string_view kProbeTimeout = "timeout";
inline constexpr absl::string_view kProbePermissionDenied = "permission_denied";
inline constexpr absl::string_view kProbeProtocolMismatch = "protocol_mismatch";
inline constexpr absl::string_view kProbeTransportError = "transport_error";

struct TransportResult {
  std::string code;    // one of the codes above
  std::string detail;  // human-readable, secret-free; may be empty
  bool ok() const { return code == kProbeOk; }
};

class TransportAdapter {
 public:
  virtual ~TransportAdapter() = default;
  // The locator kind this adapter serves (kKindTmux, kKindClaudeUds).
  virtual absl::string_view kind() const = 0;
  // Whether the target of `locator` exists and answers.
  virtual TransportResult Probe(const TransportLocator& locator,
                                absl::Duration timeout) = 0;
  // Delivers `activation_json` (a `tfx.role-activation.v1` envelope) to the
  // target as its next input.
  virtual TransportResult Wake(const TransportLocator& locator,
                               absl::string_view activation_json,
                               absl::Duration timeout) = 0;
};

}  // namespace hub

#endif  // HUB_REGISTRY_TRANSPORT_ADAPTER_H_
