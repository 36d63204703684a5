// The hubs sharing one database, as the membership table records them
// (docs/design/multi-hub.md).
#ifndef HUB_RECORDS_HUB_H_
#define HUB_RECORDS_HUB_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "records/stored_word.h"

namespace hub {

// A hub's seat: live while its lease runs, dead once another hub declared
// its lease over, left when it said goodbye. Stored as "live", "dead",
// "left" (hub_members.state).
enum class HubState { kLive, kDead, kLeft };

// Every value and the word it is stored as.
inline constexpr StoredWord<HubState> kHubStateWords[] = {
    {HubState::kLive, "live"},
    {HubState::kDead, "dead"},
    {HubState::kLeft, "left"},
};

inline absl::string_view HubStateName(HubState state) {
  return WordIn(kHubStateWords, state);
}
// The value stored as `word` (exact), or nullopt.
inline std::optional<HubState> ParseHubState(absl::string_view word) {
  return ValueIn<HubState>(kHubStateWords, word);
}
// Streams the stored word (logs, test failure messages).
std::ostream& operator<<(std::ostream& out, HubState value);

// This hub's seat in the membership table: its id and the incarnation its
// writes are fenced by.
struct HubSeat {
  std::string hub_id;
  int64_t incarnation = 0;
  // When the lease ends, in the database's clock (ms since the epoch).
  int64_t lease_expires_ms = 0;
};

// A row of the membership table.
struct HubMember {
  std::string hub_id;
  int64_t incarnation = 0;
  std::string address;
  HubState state = HubState::kLive;
  int64_t joined_at_ms = 0;
  int64_t renewed_at_ms = 0;
  int64_t lease_expires_ms = 0;
  int64_t now_ms = 0;  // the database's clock when the row was read
};

}  // namespace hub

#endif  // HUB_RECORDS_HUB_H_
