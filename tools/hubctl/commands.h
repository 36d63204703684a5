// hubctl's commands: each names its words ("roles list"), its positional
// arguments and flags (for --help and parsing), and runs against a
// HubClient, printing a table (default) or proto JSON (--json).
#ifndef HUB_TOOLS_HUBCTL_COMMANDS_H_
#define HUB_TOOLS_HUBCTL_COMMANDS_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clients/cpp/hub_client.h"
#include "tools/hubctl/cli.h"

namespace hub::hubctl {

// What a command runs with.
struct Env {
  const client::HubClient* client;
  bool json = false;
  std::ostream* out;
  std::ostream* err;
};

struct Command {
  std::string name;       // e.g. "roles list"
  std::string arguments;  // positional synopsis, e.g. "AGENT_ID"
  std::string summary;    // one line
  std::string details;    // more help text (may be empty)
  std::vector<FlagSpec> flags;
  size_t min_args = 0;
  size_t max_args = 0;
  std::function<absl::Status(Env&, const Args&)> run;
};

std::vector<Command> HubCommands();      // status, rolekey
std::vector<Command> AgentCommands();    // agents
std::vector<Command> RoleCommands();     // roles, candidates
std::vector<Command> MessageCommands();  // publish, pending, ack, dead-letters
std::vector<Command> DbCommands();       // db copy, db verify (offline)
std::vector<Command> ReservationCommands();  // reservations ...
std::vector<Command> JobCommands();          // jobs ...

// Role key arguments shared by role commands: a wire as the positional
// argument at `index`, or --project/--kind[/--scope].
extern const std::vector<FlagSpec> kRoleKeyFlags;
absl::Status RoleKeyFromArgs(const Args& args, size_t index,
                             hub::v1::RoleKey* key, std::string* wire);

}  // namespace hub::hubctl

#endif  // HUB_TOOLS_HUBCTL_COMMANDS_H_
