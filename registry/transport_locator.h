// Registration identity (project, session, host) and transport locators in
// the `tfx.transport-locator.v1` schema (TRIFLUX-HUB.md §3.1-3.2): how an
// agent says where it can be woken (a Claude UDS bridge, a tmux session).
// This file validates and normalizes what an agent registers; deciding
// whether a stored locator is usable for activation (§3.3) and writing rows
// belong elsewhere.
//
// Every failure is INVALID_ARGUMENT with one reason code from §3.1/§3.2. The
// checks run in a fixed order (documented on each function) so that input
// breaking several rules always yields the same code.
#ifndef HUB_REGISTRY_TRANSPORT_LOCATOR_H_
#define HUB_REGISTRY_TRANSPORT_LOCATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hub {

inline constexpr absl::string_view kTransportLocatorSchemaV1 =
    "tfx.transport-locator.v1";
inline constexpr absl::string_view kKindClaudeUds = "claude-uds";
inline constexpr absl::string_view kKindTmux = "tmux";
// Largest magnitude of a JavaScript safe integer, 2^53 - 1.
inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;

// locator of kind claude-uds. At least one of session_id / short_id is set.
struct ClaudeUdsLocator {
  std::optional<std::string> session_id;
  std::optional<std::string> short_id;  // JSON field "short"
  std::string bridge_id;
};

// locator of kind tmux.
struct TmuxLocator {
  std::string session_name;
  std::string mux_server_id;
};

// A validated, normalized locator (trimmed refs, de-duplicated capabilities).
struct TransportLocator {
  std::string schema_version;
  std::string transport_id;
  std::string kind;  // kKindClaudeUds or kKindTmux, matching `locator`
  std::string host_id;
  std::vector<std::string> capabilities;  // subset of probe/wake/activate/
                                          // interrupt, in first-seen order
  int64_t priority = 0;
  int64_t expires_at_ms = 0;
  std::variant<ClaudeUdsLocator, TmuxLocator> locator;
};

// What a locator list is validated against.
struct LocatorContext {
  std::string cli;                     // the agent's cli; "codex" is limited
  std::optional<std::string> host_id;  // the registration's explicit host_id
  int64_t now_ms = 0;
  int64_t heartbeat_ttl_ms = 0;  // the lease; locators may not outlive it
};

// True iff `text` is a "logical ref" once trimmed of ASCII whitespace:
// 1..128 characters of [A-Za-z0-9._:-]. (triflux trims with JavaScript's
// trim(), which also strips non-ASCII spaces; those fail the charset here.)
bool IsLogicalRef(absl::string_view text);
// True iff `text` is at most 128 bytes and matches ^hst_[A-Za-z0-9_-]+$.
bool IsHostId(absl::string_view text);

// Validates and normalizes a locator list.
//   `value` not an array TRANSPORT_LOCATORS_INVALID non-empty and
//   context.heartbeat_ttl_ms <= 0        HEARTBEAT_TTL_INVALID then each
//   element in array order, the first failure winning:
//     not an object, or its field set is not exactly the eight §3.2 fields
//                                                      TRANSPORT_LOCATOR_INVALID
//     schema_version != "tfx.transport-locator.v1"     ..._SCHEMA_UNSUPPORTED
//     transport_id not a logical ref                   TRANSPORT_ID_INVALID
//     kind not claude-uds / tmux TRANSPORT_KIND_UNSUPPORTED cli "codex" with a
//     kind other than tmux          CODEX_TRANSPORT_UNSUPPORTED host_id not a
//     host id, or != context.host_id     HOST_ID_INVALID capabilities not an
//     array of known, distinct strings (after trim)
//                                                      ..._CAPABILITIES_INVALID
//     priority not a safe integer TRANSPORT_PRIORITY_INVALID expires_at_ms not
//     a safe integer in (now, now + ttl]
//                                                      TRANSPORT_EXPIRY_INVALID
//     locator not an object, an unknown field, or a missing required field
//     (bridge_id; session_name, mux_server_id) TRANSPORT_LOCATOR_INVALID
//     claude-uds: neither session_id nor short CLAUDE_UDS_SESSION_REQUIRED
//       then session_id, short, bridge_id not logical refs
//                   CLAUDE_UDS_SESSION_INVALID / _SHORT_INVALID /
//                   _BRIDGE_INVALID
//     tmux: session_name, mux_server_id not logical refs
//                                    TMUX_SESSION_INVALID / TMUX_SERVER_INVALID
//   then across the list:
//     a transport_id seen twice                        TRANSPORT_ID_INVALID
//     (not a triflux rule: the id names a transport, so two would be ambiguous)
//     hosts differ from the resolved host (see ResolvedHostId)  HOST_ID_INVALID
// Integers follow JavaScript's Number.isSafeInteger: 100 and 100.0 are the
// same value and both pass; 1.5, "100", true and |x| > 2^53-1 fail. A present
// optional locator field must hold a valid value (null is not "absent").
// On success the list is sorted by priority descending, then transport_id
// ascending in byte order (triflux uses localeCompare; for the ASCII charset
// of logical refs the two differ only in how case and punctuation interleave,
// and the order is only a preference among equals).
absl::StatusOr<std::vector<TransportLocator>> NormalizeTransportLocators(
    const nlohmann::json& value, const LocatorContext& context);

// Parses `text` as JSON (TRANSPORT_LOCATORS_JSON_INVALID if it is not), then
// NormalizeTransportLocators.
absl::StatusOr<std::vector<TransportLocator>> ParseTransportLocatorsJson(
    absl::string_view text, const LocatorContext& context);

// The explicit host if given, else the host of the first (highest-priority)
// locator, else nullopt.
std::optional<std::string> ResolvedHostId(
    const std::optional<std::string>& explicit_host_id,
    const std::vector<TransportLocator>& sorted_locators);

// The JSON form of one locator, fields in §3.2 order (schema_version,
// transport_id, kind, host_id, capabilities, priority, expires_at_ms,
// locator); the locator object lists session_id, short, bridge_id (those
// set) or session_name, mux_server_id.
nlohmann::ordered_json TransportLocatorToJson(const TransportLocator& locator);

// The stored form (agents.transport_locators_json): a compact JSON array,
// "[]" when empty. Feeding it back through ParseTransportLocatorsJson (while
// unexpired) yields the same locators.
std::string TransportLocatorsToJson(
    const std::vector<TransportLocator>& locators);

// §3.1 registration identity as an RPC gives it; every field optional.
struct IdentityInput {
  std::optional<std::string> project_id;
  std::optional<std::string> session_id;
  std::optional<std::string> host_id;
  // Locators as JSON text, or as an already-parsed value (an array, or a
  // string holding JSON text). At most one of the two may be given.
  std::optional<std::string> transport_locators_json;
  std::optional<nlohmann::json> transport_locators;
  std::string cli;
  int64_t heartbeat_ttl_ms = 30'000;
  int64_t now_ms = 0;
};

// The normalized identity. `supplied` is false for a legacy registration (no
// identity field at all), whose identity columns must be left untouched.
struct RegistrationIdentity {
  bool supplied = false;
  std::optional<std::string> project_id;
  std::optional<std::string> session_id;  // trimmed
  // The resolved host: the explicit host_id, else the first locator's host.
  std::optional<std::string> host_id;
  // Sorted locators; set (possibly empty) whenever locators were given.
  std::optional<std::vector<TransportLocator>> locators;
};

// Validates a registration identity. Check order:
//   project_id not ^prj_[A-Za-z0-9_-]{22}$             PROJECT_ID_INVALID
//   session_id longer than 256 UTF-16 code units (before trim, as JavaScript
//   counts), or empty after trim                       SESSION_ID_INVALID
//   host_id empty, longer than 128 or not ^hst_[A-Za-z0-9_-]+$
//                                                      HOST_ID_INVALID
//   both locator fields given TRANSPORT_LOCATORS_INVALID locator text (or a
//   string value) not JSON          ..._JSON_INVALID then
//   NormalizeTransportLocators with the explicit host_id.
absl::StatusOr<RegistrationIdentity> NormalizeRegistrationIdentity(
    const IdentityInput& input);

}  // namespace hub

#endif  // HUB_REGISTRY_TRANSPORT_LOCATOR_H_
