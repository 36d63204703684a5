#include "registry/reservation_end_fanout.h"

#include <utility>

namespace hub {

bool ReservationEndFanout::EndsWithoutHolder(
    storage::ReservationChangeKind kind) {
  using K = storage::ReservationChangeKind;
  switch (kind) {
    case K::kForced:
    case K::kExpired:
    case K::kHolderGone:
      return true;
    case K::kGranted:
    case K::kRenewed:
    case K::kNarrowed:
    case K::kReleased:
    case K::kWaiting:
    case K::kWaitEnded:
      return false;
  }
  return false;
}

absl::Status ReservationEndFanout::Start() {
  absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>> listening =
      feed_->Listen({}, [this](const storage::ReservationChange& change) {
        OnChange(change);
      });
  if (!listening.ok()) return listening.status();
  subscription_ = *std::move(listening);
  return absl::OkStatus();
}

void ReservationEndFanout::Stop() {
  if (subscription_ != nullptr) subscription_->Cancel();
}

// On the feed's thread: a push only queues a frame on the stream.
void ReservationEndFanout::OnChange(const storage::ReservationChange& change) {
  if (!EndsWithoutHolder(change.kind)) return;
  ReservationEndNotice notice;
  notice.event_id = ids_->Next();
  notice.change = change;
  presence_->DeliverReservationEnd(change.reservation.agent_id, notice);
}

}  // namespace hub
