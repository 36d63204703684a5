// Membership: the hubs sharing one database (docs/design/multi-hub.md).
// Only PostgreSQL has it (storage/pg/pg_membership.h); a SQLite database
// belongs to one hub (its lock file).
#ifndef HUB_STORAGE_MEMBERSHIP_H_
#define HUB_STORAGE_MEMBERSHIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/hub.h"

namespace hub::storage {

// UNAVAILABLE / HUB_SEAT_LOST: a write for presence refused because this
// hub's seat is not live (declared dead, left, or its lease ran out).
absl::Status SeatLostError(absl::string_view hub_id);

// An agent whose presence a dead hub held, now held by this hub.
struct TakenAgent {
  std::string agent_id;
  int64_t presence_generation = 0;
  std::string from_hub_id;
};

enum class RenewOutcome {
  kRenewed,
  // The seat is gone: another hub declared this one dead (its lease ran
  // out in the database's clock) or it left. Join again.
  kLost,
};

// Membership of the hubs sharing a database. Every write a hub makes on
// behalf of the presence it holds is fenced in SQL by its seat (hub id,
// incarnation, state live); a seat another hub declared dead fences them
// all at once. Times are the database's clock, never a hub's. Thread-safe;
// its statements run on a connection of their own, so a slow group commit
// never delays a renewal.
class Membership {
 public:
  virtual ~Membership() = default;
  // Takes a seat under a new incarnation (a number never handed out
  // before, cluster-wide), live until now + ttl in the database's clock.
  // Writes made for presence carry it from then on. A hub that joins again
  // (it lost its seat) moves, in the same transaction, the agents its
  // previous incarnation still held to the new one and returns them: it
  // dropped their streams, so it runs their detach grace.
  struct Joined {
    HubSeat seat;
    std::vector<TakenAgent> taken;
  };
  virtual absl::StatusOr<Joined> Join(absl::string_view address,
                                      int64_t ttl_ms) = 0;
  // Extends the seat's lease to now + ttl, fenced by the incarnation and
  // state live.
  virtual absl::StatusOr<RenewOutcome> Renew(int64_t ttl_ms) = 0;
  // Declares dead every other hub whose lease ran out (or that left), each
  // fenced by the incarnation read, and takes over, in the same
  // transaction, the presence of the agents they held (not offline). Only
  // while this hub's own seat is live. Each dead hub is declared once,
  // whichever hub runs this first.
  virtual absl::StatusOr<std::vector<TakenAgent>> TakeOverDeadHubs() = 0;
  // The agents whose presence this seat holds (not offline), by agent_id:
  // what a takeover whose answer was lost took.
  virtual absl::StatusOr<std::vector<TakenAgent>> HeldAgents() = 0;
  // Gives up the seat (state left, lease ended) so that the other hubs take
  // over its agents at once instead of after the lease.
  virtual absl::Status Leave() = 0;
  // The seat writes are fenced by now (incarnation 0 before Join).
  virtual HubSeat seat() const = 0;
  // Every row of the membership table, by hub_id.
  virtual absl::StatusOr<std::vector<HubMember>> ListHubs() = 0;
  // The other hubs whose seats hold any of `agent_ids` now (where a message
  // for them is to be pushed), by hub_id.
  virtual absl::StatusOr<std::vector<std::string>> HubsHolding(
      const std::vector<std::string>& agent_ids) = 0;
  // Which of `agent_ids` (not offline) another hub's live seat (lease not
  // over in the database's clock) holds now, with that hub's id: where the
  // work of reaching them belongs (an activation's probe and push).
  // Agents this hub holds, or no live seat holds, are absent.
  struct Holding {
    std::string agent_id;
    std::string hub_id;
  };
  virtual absl::StatusOr<std::vector<Holding>> LiveHoldersElsewhere(
      const std::vector<std::string>& agent_ids) = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_MEMBERSHIP_H_
