// An agent as hub records it, and the states of its presence.
#ifndef HUB_RECORDS_AGENT_H_
#define HUB_RECORDS_AGENT_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "records/stored_word.h"

namespace hub {

// Where an agent's presence stands (TRIFLUX-HUB.md §3): online while its
// lease runs, stale once the lease ran out within the grace, offline after.
// Stored as triflux's words, agents.status: "online", "stale", "offline".
enum class AgentStatus { kOnline, kStale, kOffline };

// Every value and the word it is stored as.
inline constexpr StoredWord<AgentStatus> kAgentStatusWords[] = {
    {AgentStatus::kOnline, "online"},
    {AgentStatus::kStale, "stale"},
    {AgentStatus::kOffline, "offline"},
};

inline absl::string_view AgentStatusName(AgentStatus status) {
  return WordIn(kAgentStatusWords, status);
}
// The value stored as `word` (exact), or nullopt.
inline std::optional<AgentStatus> ParseAgentStatus(absl::string_view word) {
  return ValueIn<AgentStatus>(kAgentStatusWords, word);
}
// Streams the stored word (logs, test failure messages).
std::ostream& operator<<(std::ostream& out, AgentStatus value);

struct AgentRecord {
  std::string agent_id;
  std::string cli;  // codex | gemini | claude | other
  std::optional<int64_t> pid;
  std::string capabilities_json = "[]";
  std::string topics_json = "[]";
  int64_t last_seen_ms = 0;
  int64_t lease_expires_ms = 0;
  // Fencing token: 1 on first registration, +1 on each re-registration;
  // rows migrated from triflux <= v6 have 0.
  int64_t presence_generation = 0;
  AgentStatus status = AgentStatus::kOffline;
  std::string metadata_json = "{}";
  std::optional<std::string> project_id;
  std::optional<std::string> session_id;
  std::optional<std::string> host_id;
  std::string transport_locators_json = "[]";
  // hub: the TTL of the latest registration or heartbeat; absent for rows
  // written by triflux.
  std::optional<int64_t> lease_ttl_ms;
};

}  // namespace hub

#endif  // HUB_RECORDS_AGENT_H_
