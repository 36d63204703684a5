#include "hub/cluster/membership_keeper.h"

#include <pthread.h>

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hub/observability/log.h"
#include "status/status.h"

namespace hub {

absl::Status SeatLostStatus(absl::string_view why) {
  return UnavailableError(
      "HUB_SEAT_LOST",
      absl::StrCat("this hub has no live seat among the hubs sharing its "
                   "database (",
                   why, "): retry on another hub, or here in a moment"));
}

MembershipKeeper::MembershipKeeper(storage::Membership* membership,
                                   PresenceRegistry* presence,
                                   MembershipOptions options)
    : membership_(membership), presence_(presence), options_(options) {}

MembershipKeeper::~MembershipKeeper() { Stop(/*leave=*/false); }

int64_t MembershipKeeper::SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status MembershipKeeper::Start(const std::string& address) {
  address_ = address;
  const int64_t sent = SteadyNanos();
  absl::StatusOr<storage::Membership::Joined> joined =
      membership_->Join(address_, absl::ToInt64Milliseconds(options_.lease));
  if (!joined.ok()) return joined.status();
  {
    absl::MutexLock lock(&mu_);
    holding_ = true;
    deadline_ns_.store(
        sent + absl::ToInt64Nanoseconds(options_.lease - options_.margin));
  }
  presence_->Adopt(joined->taken);
  log::Info("hub_joined", {{"hub_id", joined->seat.hub_id},
                           {"incarnation", joined->seat.incarnation},
                           {"address", address_}});
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hub-keeper");  // top -H, perf
    Loop();
  });
  return absl::OkStatus();
}

absl::Status MembershipKeeper::Serving() const {
  const int64_t deadline = deadline_ns_.load();
  if (deadline != 0 && SteadyNanos() < deadline) return absl::OkStatus();
  if (store_unreachable_.load()) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        "the database cannot be reached, so this hub cannot renew its seat "
        "among the hubs sharing it: retry once it is back");
  }
  return SeatLostStatus(deadline == 0
                            ? "its seat was lost"
                            : "its lease could not be renewed in time");
}

void MembershipKeeper::Check() {
  const int64_t deadline = deadline_ns_.load();
  if (deadline != 0 && SteadyNanos() >= deadline) {
    Lose("lease_not_renewed_in_time");
  }
}

void MembershipKeeper::Lose(absl::string_view why) {
  {
    absl::MutexLock lock(&mu_);
    if (!holding_) return;
    holding_ = false;
    deadline_ns_.store(0);
  }
  const HubSeat lost = membership_->seat();
  log::Warn("hub_seat_lost", {{"hub_id", lost.hub_id},
                              {"incarnation", lost.incarnation},
                              {"why", why}});
  presence_->DropHolds(SeatLostStatus(why));
}

void MembershipKeeper::Rejoin() {
  const int64_t sent = SteadyNanos();
  absl::StatusOr<storage::Membership::Joined> joined =
      membership_->Join(address_, absl::ToInt64Milliseconds(options_.lease));
  store_unreachable_.store(!joined.ok() &&
                           ReasonOf(joined.status()) == "STORE_UNAVAILABLE");
  if (!joined.ok()) {
    log::Warn("hub_rejoin_failed", {{"reason", ReasonOf(joined.status())},
                                    {"message", joined.status().message()}});
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    holding_ = true;
    deadline_ns_.store(
        sent + absl::ToInt64Nanoseconds(options_.lease - options_.margin));
  }
  rejoins_.fetch_add(1);
  presence_->Adopt(joined->taken);
  log::Info("hub_rejoined", {{"hub_id", joined->seat.hub_id},
                             {"incarnation", joined->seat.incarnation},
                             {"agents_kept", joined->taken.size()}});
}

void MembershipKeeper::RenewAndTakeOver() {
  const int64_t sent = SteadyNanos();
  absl::StatusOr<storage::RenewOutcome> renewed =
      membership_->Renew(absl::ToInt64Milliseconds(options_.lease));
  store_unreachable_.store(!renewed.ok() &&
                           ReasonOf(renewed.status()) == "STORE_UNAVAILABLE");
  if (!renewed.ok()) {
    log::Warn("hub_seat_renewal_failed",
              {{"reason", ReasonOf(renewed.status())},
               {"message", renewed.status().message()}});
    return;  // Check() drops the holds if this lasts past the deadline
  }
  if (*renewed == storage::RenewOutcome::kLost) {
    Lose("declared_dead_or_expired");
    return;
  }
  bool reread = false;
  {
    absl::MutexLock lock(&mu_);
    if (!holding_) return;  // dropped meanwhile: join again
    deadline_ns_.store(
        sent + absl::ToInt64Nanoseconds(options_.lease - options_.margin));
    reread = reread_held_;
  }
  absl::StatusOr<std::vector<storage::TakenAgent>> taken =
      membership_->TakeOverDeadHubs();
  if (!taken.ok()) {
    absl::MutexLock lock(&mu_);
    reread_held_ = true;
    return;
  }
  for (const storage::TakenAgent& agent : *taken) {
    log::Info("hub_agent_taken_over", {{"agent_id", agent.agent_id},
                                       {"from_hub_id", agent.from_hub_id}});
  }
  presence_->Adopt(*taken);
  if (reread) {
    absl::StatusOr<std::vector<storage::TakenAgent>> held =
        membership_->HeldAgents();
    if (!held.ok()) return;
    presence_->Adopt(*held);
    absl::MutexLock lock(&mu_);
    reread_held_ = false;
  }
}

void MembershipKeeper::Loop() {
  while (true) {
    bool holding = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stopping_),
                            absl::Now() + options_.renew_interval);
      if (stopping_) return;
      holding = holding_;
    }
    if (!holding) {
      Rejoin();
      continue;
    }
    RenewAndTakeOver();
    // Declared dead (or its lease ran out): join again now, not one
    // renewal interval later; until then the hub serves nothing.
    bool lost = false;
    {
      absl::MutexLock lock(&mu_);
      lost = !holding_ && !stopping_;
    }
    if (lost) Rejoin();
  }
}

void MembershipKeeper::Stop(bool leave) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  bool holding = false;
  {
    absl::MutexLock lock(&mu_);
    holding = holding_;
    holding_ = false;
  }
  deadline_ns_.store(0);
  if (leave && holding) {
    if (absl::Status s = membership_->Leave(); !s.ok()) {
      log::Warn("hub_leave_failed", {{"message", s.message()}});
    }
  }
}

}  // namespace hub
