#include "tools/chaos/attached_agent.h"

#include <iostream>
#include <memory>
#include <utility>

#include "absl/time/clock.h"

namespace hub::chaos {
namespace {

namespace v1 = ::hub::v1;

// How long a session may be other than attached before the agent moves to
// the next hub: longer than a restart of a killed hub takes, shorter than a
// pause past the lease.
constexpr absl::Duration kMoveAfter = absl::Seconds(2);

}  // namespace

AttachedAgent::AttachedAgent(Ledger* ledger, PushLog* push_log,
                             const std::vector<std::string>& addresses,
                             std::string agent_id, int home, bool sticky,
                             std::vector<v1::RoleKey> candidate_of)
    : ledger_(ledger),
      push_log_(push_log),
      agent_id_(std::move(agent_id)),
      home_(home),
      sticky_(sticky),
      candidate_of_(std::move(candidate_of)),
      hub_(home) {
  for (const std::string& address : addresses) {
    client::HubClientOptions options;
    options.address = address;
    options.default_deadline = absl::Seconds(2);
    clients_.push_back(std::make_unique<client::HubClient>(options));
  }
}

AttachedAgent::~AttachedAgent() { Stop(); }

void AttachedAgent::Start() {
  thread_ = std::thread([this] { Supervise(); });
}

void AttachedAgent::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

int AttachedAgent::Cut(int hub, absl::Duration away) {
  const int to = sticky_ ? home_ : hub % static_cast<int>(clients_.size());
  cut_away_ms_ = absl::ToInt64Milliseconds(away);
  cut_to_ = to;
  return to;
}

std::optional<int64_t> AttachedAgent::HeldEpoch(
    const std::string& role_key_wire) const {
  absl::MutexLock lock(&mu_);
  if (session_ == nullptr) return std::nullopt;
  return session_->RoleEpoch(role_key_wire);
}

void AttachedAgent::Replace(std::unique_ptr<client::PresenceSession> next) {
  std::unique_ptr<client::PresenceSession> old;
  {
    absl::MutexLock lock(&mu_);
    old = std::move(session_);
    session_ = std::move(next);
  }
  if (old != nullptr) old->Stop();
}

std::unique_ptr<client::PresenceSession> AttachedAgent::NewSession(int hub) {
  client::PresenceSessionOptions options;
  options.registration.set_agent_id(agent_id_);
  options.registration.set_cli(v1::AGENT_CLI_CLAUDE);
  // What the activator asks of a candidate of a lead role.
  if (!candidate_of_.empty()) {
    options.registration.add_capabilities("role:lead:candidate");
  }
  // The shortest TTL a hub takes, a heartbeat every second, and a paused hub
  // (which answers nothing) noticed within a second or two.
  options.registration.mutable_heartbeat_ttl()->set_seconds(10);
  options.heartbeat_fraction = 0.1;
  options.reply_timeout = sticky_ ? absl::Seconds(60) : absl::Seconds(1);
  options.deregister_on_stop = false;
  client::PresenceCallbacks callbacks;
  // When the session's current stream attached (callbacks run on the
  // session's thread, one at a time, in the stream's order).
  auto attached_ns = std::make_shared<int64_t>(0);
  callbacks.on_state_change = [this, hub, attached_ns](
                                  client::SessionState state,
                                  const absl::Status& status) {
    if (state == client::SessionState::kAttached) {
      *attached_ns = absl::GetCurrentTimeNanos();
    } else if (*attached_ns != 0 && push_log_ != nullptr) {
      push_log_->StreamEnded(agent_id_, hub, *attached_ns,
                             absl::GetCurrentTimeNanos(),
                             client::ReasonOf(status));
      *attached_ns = 0;
    }
  };
  callbacks.on_message = [this, hub,
                          attached_ns](const v1::MessageDelivery& delivery) {
    if (push_log_ != nullptr) {
      push_log_->Pushed(agent_id_, hub, *attached_ns,
                        absl::GetCurrentTimeNanos(), delivery);
    }
    ledger_->Delivered(delivery.message().message_id(), agent_id_);
    return true;
  };
  callbacks.on_role_activation = [](const v1::RoleActivation&) { return true; };
  callbacks.on_activation_result =
      [this](const v1::RoleActivation&,
             const absl::StatusOr<v1::RoleActivationAckResult>& result) {
        // A refused ACK (the activation was fenced or withdrawn meanwhile)
        // made nobody the holder; a repeated one wrote nothing.
        if (!result.ok() || result->idempotent()) return;
        const v1::Role& role = result->role();
        ledger_->Activated(role.role_key_wire(), role.epoch(), agent_id_,
                           role.version());
        ++activations_;
      };
  auto session = std::make_unique<client::PresenceSession>(
      clients_[hub].get(), std::move(options), std::move(callbacks));
  (void)session->Start();
  return session;
}

bool AttachedAgent::BecomeCandidate(int hub) {
  for (const v1::RoleKey& role : candidate_of_) {
    v1::UpsertRoleCandidateRequest upsert;
    *upsert.mutable_role_key() = role;
    upsert.set_agent_id(agent_id_);
    upsert.mutable_candidate()->set_priority(1);
    absl::StatusOr<v1::UpsertRoleCandidateResponse> done =
        clients_[hub]->UpsertRoleCandidate(upsert);
    if (!done.ok()) {
      std::cerr << "chaos: " << agent_id_
                << " not a candidate yet: " << done.status() << std::endl;
      return false;
    }
  }
  return true;
}

void AttachedAgent::Supervise() {
  Replace(NewSession(hub_));
  absl::Time attached_at = absl::Now();  // or when this session started
  int64_t recorded_generation = 0;
  bool candidate = candidate_of_.empty();
  while (!stop_) {
    absl::SleepFor(absl::Milliseconds(20));
    if (const int to = cut_to_.exchange(-1); to >= 0) {
      Replace(nullptr);
      ++cuts_;
      absl::SleepFor(absl::Milliseconds(cut_away_ms_.load()));
      if (to != hub_) ++moves_;
      hub_ = to;
      Replace(NewSession(hub_));
      attached_at = absl::Now();
      continue;
    }
    client::SessionState state;
    int64_t generation;
    {
      absl::MutexLock lock(&mu_);
      state = session_->state();
      generation = session_->generation();
    }
    if (state == client::SessionState::kAttached) {
      attached_at = absl::Now();
      // Candidates are rows of the shared store: once is enough.
      if (!candidate) candidate = BecomeCandidate(hub_);
      // The registration the session made is acknowledged once attached.
      if (generation != recorded_generation) {
        ledger_->Registered(agent_id_, generation);
        recorded_generation = generation;
      }
      continue;
    }
    const bool terminal = state == client::SessionState::kSuperseded ||
                          state == client::SessionState::kFailed;
    if (!terminal && (sticky_ || absl::Now() - attached_at < kMoveAfter)) {
      continue;
    }
    Replace(nullptr);
    // A sticky agent superseded or failed starts again on its own hub.
    if (clients_.size() > 1 && !sticky_) {
      hub_ = (hub_ + 1) % static_cast<int>(clients_.size());
      ++moves_;
    }
    Replace(NewSession(hub_));
    attached_at = absl::Now();
  }
  Replace(nullptr);
}

}  // namespace hub::chaos
