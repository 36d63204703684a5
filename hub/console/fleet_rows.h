// Which of the console's rows a fleet event (registry/fleet_events.h)
// changed, told to `rows`: this hub's ConsoleModel, or the ConsoleHints that
// tell the other hubs' consoles. Both take AgentsChanged, MessagesChanged,
// RoleChanged and JobsChanged; neither blocks.
#ifndef HUB_HUB_CONSOLE_FLEET_ROWS_H_
#define HUB_HUB_CONSOLE_FLEET_ROWS_H_

#include <variant>

#include "registry/fleet_events.h"

namespace hub::console {

template <typename Rows>
void ShowFleetEvent(const FleetEvent& event, Rows& rows) {
  if (const auto* agent = std::get_if<AgentChanged>(&event)) {
    rows.AgentsChanged({agent->agent_id});
  } else if (const auto* changed = std::get_if<MessagesChanged>(&event)) {
    rows.MessagesChanged(changed->message_ids);
    rows.AgentsChanged(changed->agent_ids);
    if (changed->role_wire.has_value()) rows.RoleChanged(*changed->role_wire);
  } else if (const auto* dead = std::get_if<MessageDeadLettered>(&event)) {
    rows.MessagesChanged({dead->transition.message_id});
    if (!dead->message.to_agent.empty()) {
      rows.AgentsChanged({dead->message.to_agent});
    }
    if (dead->message.role_key_wire.has_value()) {
      rows.RoleChanged(*dead->message.role_key_wire);
    }
  } else if (const auto* job = std::get_if<JobChanged>(&event)) {
    rows.JobsChanged({job->job_id});
  }
}

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_FLEET_ROWS_H_
