// A role as hub records it, its candidates, the lead scopes closed for
// good, and the states of a role (TRIFLUX-HUB.md §5.1).
#ifndef HUB_RECORDS_ROLE_H_
#define HUB_RECORDS_ROLE_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "records/stored_word.h"

namespace hub {

// TRIFLUX-HUB.md §5.1. `kActive` requires a live holder, a reachable transport
// and a charter ACK for the current epoch; liveness alone is never enough.
// How a state moves is registry/role_transitions.h's table.
enum class RoleState {
  kElectable,
  kElectedProbing,
  kActive,
  kUnreachable,
  kQuarantined,
};

// Every value and the word it is stored as.
inline constexpr StoredWord<RoleState> kRoleStateWords[] = {
    {RoleState::kElectable, "electable"},
    {RoleState::kElectedProbing, "elected-probing"},
    {RoleState::kActive, "active"},
    {RoleState::kUnreachable, "unreachable"},
    {RoleState::kQuarantined, "quarantined"},
};

inline absl::string_view RoleStateName(RoleState state) {
  return WordIn(kRoleStateWords, state);
}
// The value stored as `name` (exact), or nullopt.
inline std::optional<RoleState> ParseRoleState(absl::string_view name) {
  return ValueIn<RoleState>(kRoleStateWords, name);
}
// Streams the stored word (logs, test failure messages).
std::ostream& operator<<(std::ostream& out, RoleState value);

struct RoleRecord {
  std::string role_key_wire;
  std::string project_id;
  std::string role_kind;  // cto | lead
  std::string scope_id;   // "" for cto
  RoleState state = RoleState::kElectable;
  std::optional<std::string> holder_agent_id;
  std::optional<std::string> previous_holder_agent_id;
  int64_t epoch = 0;
  int64_t activation_seq = 0;
  std::optional<std::string> activation_id;
  std::optional<int64_t> activation_deadline_ms;
  std::optional<int64_t> holder_lease_expires_ms;
  std::optional<std::string> charter_version;
  std::optional<int64_t> charter_acked_epoch;
  int64_t retry_count = 0;
  std::optional<int64_t> next_probe_ms;
  std::optional<std::string> blocked_reason;
  int64_t last_transition_ms = 0;
  std::string last_reason;
  int64_t version = 0;  // +1 on every update
};

struct CandidateRecord {
  std::string role_key_wire;
  std::string agent_id;
  std::string source;  // grant | standup | operator
  int64_t priority = 0;
  std::string transport_locators_json = "[]";
  int64_t consecutive_probe_failures = 0;
  std::optional<int64_t> excluded_until_ms;
  std::optional<int64_t> last_probe_ms;
  std::optional<std::string> last_probe_code;
  int64_t updated_at_ms = 0;
};

// A lead scope closed for good (hub_closed_scopes; docs/design/roles.md,
// "Closing a lead scope").
struct ClosedScopeRecord {
  std::string project_id;
  std::string scope_id;
  std::string role_key_wire;  // the lead role's wire
  int64_t closed_at_ms = 0;
  std::string closed_by;  // the principal that closed it
  std::string reason;     // why, as the closer said ("" allowed)
  // Pending messages the close dead-lettered; nullopt for a scope closed
  // before hub_schema_version 4, which did not record it.
  std::optional<int64_t> dead_lettered_count;
};

}  // namespace hub

#endif  // HUB_RECORDS_ROLE_H_
