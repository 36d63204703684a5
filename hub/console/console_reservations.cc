// ConsoleModel: the reservations view, kept live from the reservation feed
// (registry/reservation_feed.h: every hub's changes, from the store's log).
#include <string>
#include <utility>
#include <vector>

#include "hub/console/console_model.h"
#include "status/status.h"

namespace hub::console {
namespace {

using nlohmann::json;

json ReservationJson(const storage::ReservationRecord& r) {
  return {{"id", r.reservation_id},
          {"project_id", r.project_id},
          {"holder", r.agent_id},
          {"generation", r.presence_generation},
          {"mode", r.exclusive ? "exclusive" : "shared"},
          {"token", r.token},
          {"patterns", r.patterns},
          {"reason", r.reason},
          {"created_at_ms", r.created_at_ms},
          {"expires_at_ms", r.expires_at_ms}};
}

bool Ends(storage::ReservationChangeKind kind) {
  using K = storage::ReservationChangeKind;
  return kind == K::kReleased || kind == K::kForced || kind == K::kExpired ||
         kind == K::kHolderGone;
}

}  // namespace

absl::Status ConsoleModel::WatchReservations() {
  if (sources_.reservation_feed == nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>> sub =
      sources_.reservation_feed->Subscribe(
          ReservationWatchFilter{},
          [this](const storage::ReservationSnapshot& snapshot) {
            absl::MutexLock lock(&resv_mu_);
            reservations_.clear();
            for (const storage::ReservationRecord& r : snapshot.reservations) {
              reservations_[r.reservation_id] = r;
            }
          },
          [this](const storage::ReservationChange& change) {
            OnReservationChange(change);
          },
          [this](const absl::Status&) {
            // A gap (changes pruned before the feed read them): the pages
            // load the views again, and the view subscribes anew.
            {
              absl::MutexLock lock(&resv_mu_);
              resv_ended_ = true;
            }
            Resync();
          });
  if (!sub.ok()) return sub.status();
  resv_sub_ = std::move(*sub);
  return absl::OkStatus();
}

void ConsoleModel::OnReservationChange(
    const storage::ReservationChange& change) {
  // A waiter (a reserve with `wait` in its project's queue) is no
  // reservation: the view lists what is held, not yet who waits.
  if (change.kind == storage::ReservationChangeKind::kWaiting ||
      change.kind == storage::ReservationChangeKind::kWaitEnded) {
    return;
  }
  const storage::ReservationRecord& r = change.reservation;
  json j = ReservationJson(r);
  j["change"] = std::string(storage::ReservationChangeWord(change.kind));
  j["removed"] = Ends(change.kind);
  absl::MutexLock lock(&resv_mu_);
  if (Ends(change.kind)) {
    reservations_.erase(r.reservation_id);
  } else {
    reservations_[r.reservation_id] = r;
  }
  feed_.Post("reservation", {r.project_id},
             j.dump(-1, ' ', false, json::error_handler_t::replace));
}

absl::StatusOr<json> ConsoleModel::Reservations(const ProjectScope& scope) {
  if (sources_.reservation_feed == nullptr) {
    return json{{"seq", feed_.head()},
                {"reservations", json::array()},
                {"conflicts_refused", 0}};
  }
  bool again = false;
  {
    absl::MutexLock lock(&resv_mu_);
    again = resv_ended_;
    resv_ended_ = false;
  }
  if (again) {
    if (resv_sub_ != nullptr) resv_sub_->Cancel();
    if (absl::Status s = WatchReservations(); !s.ok()) return s;
  }
  json rows = json::array();
  int64_t seq = 0;
  {
    absl::MutexLock lock(&resv_mu_);
    seq = feed_.head();
    for (const auto& [id, r] : reservations_) {
      if (scope.Allows(r.project_id)) rows.push_back(ReservationJson(r));
    }
  }
  const int64_t refused = sources_.reservations != nullptr
                              ? sources_.reservations->counters().conflicts
                              : 0;
  return json{{"seq", seq},
              {"reservations", std::move(rows)},
              {"conflicts_refused", refused}};
}

}  // namespace hub::console
