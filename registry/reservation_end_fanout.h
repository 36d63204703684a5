// ReservationEndFanout: tells a holder, on its presence stream, that a
// reservation of its own ended without its release (forced by an operator,
// expired, or its presence generation ended).
//
// It follows every project's changes through the ReservationFeed, which
// reads the store's change log: changes made through any hub sharing the
// database reach every hub, and only the hub that holds the holder's stream
// pushes (PresenceRegistry::DeliverReservationEnd is false elsewhere). A
// holder without an attached stream is not told later. Not responsible for
// what the holder does next (re-listing, reserving again). Thread-safe.
#ifndef HUB_REGISTRY_RESERVATION_END_FANOUT_H_
#define HUB_REGISTRY_RESERVATION_END_FANOUT_H_

#include <memory>

#include "absl/status/status.h"
#include "registry/presence.h"
#include "registry/reservation_feed.h"
#include "registry/uuid.h"
#include "storage/store.h"

namespace hub {

class ReservationEndFanout {
 public:
  // Every pointer must outlive the fanout.
  ReservationEndFanout(ReservationFeed* feed, PresenceRegistry* presence,
                       UuidV7Generator* ids)
      : feed_(feed), presence_(presence), ids_(ids) {}

  // Starts following the feed's changes from its cursor now. Errors: the
  // feed's (UNAVAILABLE / HUB_SHUTTING_DOWN before its Start).
  absl::Status Start();
  // No push runs once this returns. Idempotent.
  void Stop();

  // Whether a change of `kind` ends a reservation without its holder's
  // release: forced, expired, holder gone.
  static bool EndsWithoutHolder(storage::ReservationChangeKind kind);

 private:
  void OnChange(const storage::ReservationChange& change);

  ReservationFeed* const feed_;
  PresenceRegistry* const presence_;
  UuidV7Generator* const ids_;
  std::unique_ptr<ReservationFeed::Subscription> subscription_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_RESERVATION_END_FANOUT_H_
