// MembershipKeeper: this hub's seat among the hubs sharing one database
// (docs/design/multi-hub.md). It joins at start, renews the seat's lease
// on the database's clock about every second, takes over the agents of
// hubs whose lease ran out, and stops this hub acting before its own lease
// can have run out: by its own monotonic clock, a margin below the TTL
// after the last renewal that was sent, it drops every presence it holds
// (streams fenced with HUB_SEAT_LOST) and refuses calls until it has a
// seat again. A hub that lost its seat joins again under a new incarnation
// and re-registers nothing on its own: agents come back by attaching.
#ifndef HUB_HUB_CLUSTER_MEMBERSHIP_KEEPER_H_
#define HUB_HUB_CLUSTER_MEMBERSHIP_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/presence.h"
#include "storage/store.h"

namespace hub {

struct MembershipOptions {
  // The seat's TTL in the database's clock: how long after a hub stops
  // renewing (killed, paused, cut off) the others take its agents over.
  absl::Duration lease = absl::Seconds(5);
  // How often the seat is renewed and dead hubs are looked for.
  absl::Duration renew_interval = absl::Seconds(1);
  // The hub stops acting this long before its lease could have run out
  // (clocks run at slightly different rates; a pause between the check
  // and an action needs room).
  absl::Duration margin = absl::Seconds(1);
};

// UNAVAILABLE / HUB_SEAT_LOST: this hub has no live seat (yet).
absl::Status SeatLostStatus(absl::string_view why);

class MembershipKeeper {
 public:
  // `membership` and `presence` must outlive the keeper.
  MembershipKeeper(storage::Membership* membership, PresenceRegistry* presence,
                   MembershipOptions options);
  ~MembershipKeeper();

  // Joins (the database must answer) and starts renewing. `address` is
  // what other hubs record for this one.
  absl::Status Start(const std::string& address);
  // OK while this hub holds a live seat by its own clock; HUB_SEAT_LOST
  // otherwise. Lock-free: called for every call.
  absl::Status Serving() const;
  // Drops this hub's presence if its own deadline passed (the ticker calls
  // it every tick, so a renewal stuck on the network cannot delay it).
  void Check();
  // Stops renewing; with `leave`, gives the seat up so that the other hubs
  // take over at once.
  void Stop(bool leave);

  HubSeat seat() const { return membership_->seat(); }
  // Times this hub lost its seat and joined again (metrics, tests).
  int64_t rejoins() const { return rejoins_.load(); }

 private:
  static int64_t SteadyNanos();
  void Loop();
  // Drops every hold once per lost seat.
  void Lose(absl::string_view why);
  void Rejoin();
  void RenewAndTakeOver();

  storage::Membership* const membership_;
  PresenceRegistry* const presence_;
  const MembershipOptions options_;
  std::string address_;

  // Until when (steady clock, ns) this hub may act; 0 without a seat.
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int64_t> rejoins_{0};
  // The last renewal (or join) failed because the database could not be
  // reached: calls refused for want of a seat then say so
  // (STORE_UNAVAILABLE), as every other call does while it is down.
  std::atomic<bool> store_unreachable_{false};

  absl::Mutex mu_;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // A takeover failed: its answer may have been lost after it committed.
  bool reread_held_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hub

#endif  // HUB_HUB_CLUSTER_MEMBERSHIP_KEEPER_H_
