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

// A waiter (a reserve with `wait` in its project's queue): the change's
// record is the waiter (its id, agent, mode, patterns; expiry = deadline;
// the ids it waits behind).
json WaiterJson(const storage::ReservationRecord& w) {
  return {{"id", w.reservation_id},
          {"project_id", w.project_id},
          {"agent", w.agent_id},
          {"mode", w.exclusive ? "exclusive" : "shared"},
          {"patterns", w.patterns},
          {"since_ms", w.created_at_ms},
          {"deadline_ms", w.expires_at_ms},
          {"waits_for", w.waits_for}};
}

// Whether `granted` is the grant of waiter `w`: a granted wait logs no
// wait_ended, its reservation (a new id) is the waiter's retry, of the same
// agent, project, mode and normalized patterns.
bool GrantOf(const storage::ReservationRecord& granted,
             const storage::ReservationRecord& w) {
  return granted.project_id == w.project_id && granted.agent_id == w.agent_id &&
         granted.exclusive == w.exclusive && granted.patterns == w.patterns;
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
            // Queued through any hub, also before this one started.
            waiters_.clear();
            for (const storage::ReservationWaiter& w : snapshot.waiters) {
              waiters_[w.waiter_id] = storage::WaiterAsRecord(w);
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
  using K = storage::ReservationChangeKind;
  const storage::ReservationRecord& r = change.reservation;
  absl::MutexLock lock(&resv_mu_);
  // A waiter is no reservation: it has rows of its own ("reservation_wait").
  if (change.kind == K::kWaiting || change.kind == K::kWaitEnded) {
    json w = WaiterJson(r);
    w["change"] = std::string(storage::ReservationChangeWord(change.kind));
    w["removed"] = change.kind == K::kWaitEnded;
    if (change.kind == K::kWaiting) {
      waiters_[r.reservation_id] = r;
    } else {
      waiters_.erase(r.reservation_id);
    }
    feed_.Post("reservation_wait", {r.project_id},
               w.dump(-1, ' ', false, json::error_handler_t::replace));
    return;
  }
  if (change.kind == K::kGranted) {
    // The first (oldest) waiter this grant is the retry of leaves the queue.
    const storage::ReservationRecord* oldest = nullptr;
    for (const auto& [id, w] : waiters_) {
      if (GrantOf(r, w) &&
          (oldest == nullptr || w.created_at_ms < oldest->created_at_ms)) {
        oldest = &w;
      }
    }
    if (oldest != nullptr) {
      json w = WaiterJson(*oldest);
      w["change"] = "granted";
      w["removed"] = true;
      w["reservation_id"] = r.reservation_id;
      waiters_.erase(oldest->reservation_id);
      feed_.Post("reservation_wait", {r.project_id},
                 w.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }
  json j = ReservationJson(r);
  j["change"] = std::string(storage::ReservationChangeWord(change.kind));
  j["removed"] = Ends(change.kind);
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
                {"waiters", json::array()},
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
  json waiters = json::array();
  int64_t seq = 0;
  const int64_t now_ms = Now();
  {
    absl::MutexLock lock(&resv_mu_);
    seq = feed_.head();
    for (const auto& [id, r] : reservations_) {
      if (scope.Allows(r.project_id)) rows.push_back(ReservationJson(r));
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      // Past its deadline: its hub died before it logged the wait's end
      // (the store's sweep deletes the row without a change).
      if (it->second.expires_at_ms <= now_ms) {
        it = waiters_.erase(it);
        continue;
      }
      if (scope.Allows(it->second.project_id)) {
        waiters.push_back(WaiterJson(it->second));
      }
      ++it;
    }
  }
  const int64_t refused = sources_.reservations != nullptr
                              ? sources_.reservations->counters().conflicts
                              : 0;
  return json{{"seq", seq},
              {"reservations", std::move(rows)},
              {"waiters", std::move(waiters)},
              {"conflicts_refused", refused}};
}

}  // namespace hub::console
