#include "tools/chaos/attached_agent.h"

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

AttachedAgent::AttachedAgent(Ledger* ledger,
                             const std::vector<std::string>& addresses,
                             std::string agent_id, int home)
    : ledger_(ledger), agent_id_(std::move(agent_id)), hub_(home) {
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

std::unique_ptr<client::PresenceSession> AttachedAgent::NewSession(int hub) {
  client::PresenceSessionOptions options;
  options.registration.set_agent_id(agent_id_);
  options.registration.set_cli(v1::AGENT_CLI_CLAUDE);
  // The shortest TTL a hub takes, a heartbeat every second, and a paused hub
  // (which answers nothing) noticed within a second or two.
  options.registration.mutable_heartbeat_ttl()->set_seconds(10);
  options.heartbeat_fraction = 0.1;
  options.reply_timeout = absl::Seconds(1);
  options.deregister_on_stop = false;
  client::PresenceCallbacks callbacks;
  callbacks.on_message = [this](const v1::MessageDelivery& delivery) {
    ledger_->Delivered(delivery.message().message_id(), agent_id_);
    return true;
  };
  auto session = std::make_unique<client::PresenceSession>(
      clients_[hub].get(), std::move(options), std::move(callbacks));
  (void)session->Start();
  return session;
}

void AttachedAgent::Supervise() {
  std::unique_ptr<client::PresenceSession> session = NewSession(hub_);
  absl::Time attached_at = absl::Now();  // or when this session started
  int64_t recorded_generation = 0;
  while (!stop_) {
    absl::SleepFor(absl::Milliseconds(20));
    const client::SessionState state = session->state();
    if (state == client::SessionState::kAttached) {
      attached_at = absl::Now();
      // The registration the session made is acknowledged once attached.
      const int64_t generation = session->generation();
      if (generation != recorded_generation) {
        ledger_->Registered(agent_id_, generation);
        recorded_generation = generation;
      }
      continue;
    }
    const bool terminal = state == client::SessionState::kSuperseded ||
                          state == client::SessionState::kFailed;
    if (!terminal && absl::Now() - attached_at < kMoveAfter) continue;
    session->Stop();
    if (clients_.size() > 1) {
      hub_ = (hub_ + 1) % static_cast<int>(clients_.size());
      ++moves_;
    }
    session = NewSession(hub_);
    attached_at = absl::Now();
  }
  session->Stop();
}

}  // namespace hub::chaos
