// A committed role change as the role registry publishes it, and the form in
// which one reaches an agent's presence stream. Plain data shared by roles
// and presence.
#ifndef HUB_REGISTRY_ROLE_EVENT_H_
#define HUB_REGISTRY_ROLE_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "storage/store.h"

namespace hub {

enum class RoleChangeKind { kSnapshot, kCreated, kUpdated, kRemoved };

struct RoleEvent {
  RoleChangeKind kind = RoleChangeKind::kUpdated;
  RoleRecord role;
  int64_t changed_at_ms = 0;
};

// A role change pushed to one agent (the role's holder after the change, its
// holder before it, or a candidate of it).
struct RoleChangeNotice {
  // The event's id (UUIDv7), unique per notice.
  std::string event_id;
  RoleEvent event;
  // The role's state in the version published before this one, when the hub
  // saw that version (absent for a created row).
  std::optional<RoleState> previous_state;
};

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_EVENT_H_
