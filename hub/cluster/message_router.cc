#include "hub/cluster/message_router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hub/observability/log.h"
#include "status/status.h"

namespace hub {

std::string InboxChannel(const std::string& hub_instance_id) {
  return absl::StrCat("hub_inbox.", hub_instance_id);
}

std::string FlightChannel(const std::string& hub_instance_id) {
  return absl::StrCat("hub_flights.", hub_instance_id);
}

MessageRouter::MessageRouter(storage::MessageStore* store,
                             storage::Membership* membership,
                             PresenceRegistry* presence, Messaging* messaging,
                             const Clock* clock, MessageRouterOptions options)
    : store_(store),
      membership_(membership),
      presence_(presence),
      messaging_(messaging),
      clock_(clock),
      options_(std::move(options)),
      sender_(options_.signals->NewSender(
          storage::SignalSendOptions{[](const absl::Status& s) {
            log::Warn("inbox_hint_not_sent",
                      {{"reason", ReasonOf(s)}, {"message", s.message()}});
          }})) {}

MessageRouter::~MessageRouter() { Stop(); }

void MessageRouter::SetFlightListener(std::function<void()> listener) {
  flight_listener_ = std::move(listener);
}

void MessageRouter::HandOverFlight(const std::string& hub_id) {
  sender_->Send(FlightChannel(hub_id), options_.hub_instance_id);
}

void MessageRouter::Start() {
  storage::SignalListenOptions listen;
  const std::string flights = FlightChannel(options_.hub_instance_id);
  listen.channels = {InboxChannel(options_.hub_instance_id), flights};
  listen.on_signal = [this, flights](const storage::Signal& s) {
    if (s.channel != flights) {
      Kick();
    } else if (flight_listener_) {
      flight_listener_();
    }
  };
  // A hint sent while the listener was away is lost: read everything.
  listen.on_resync = [this] {
    Kick();
    if (flight_listener_) flight_listener_();
  };
  listen.on_error = [](const absl::Status& s) {
    log::Debug("inbox_listener_reconnecting",
               {{"reason", ReasonOf(s)}, {"message", s.message()}});
  };
  listener_ = options_.signals->Listen(std::move(listen));
  thread_ = std::thread([this] { Run(); });
}

void MessageRouter::Unpushed(const std::vector<std::string>& agent_ids) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  to_hint_.insert(to_hint_.end(), agent_ids.begin(), agent_ids.end());
}

void MessageRouter::Kick() {
  absl::MutexLock lock(&mu_);
  drain_due_ = true;
}

int64_t MessageRouter::routed() const {
  absl::MutexLock lock(&mu_);
  return routed_;
}

void MessageRouter::Run() {
  pthread_setname_np(pthread_self(), "hub_router");
  absl::Time next_poll = absl::Now() + options_.poll_interval;
  while (true) {
    std::vector<std::string> hint;
    bool drain = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] {
        mu_.AssertHeld();
        return stopping_ || drain_due_ || !to_hint_.empty();
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), next_poll);
      if (stopping_) return;
      hint.swap(to_hint_);
      drain = drain_due_ || absl::Now() >= next_poll;
      drain_due_ = false;
    }
    if (!hint.empty()) Hint(hint);
    if (drain) {
      Drain();
      next_poll = absl::Now() + options_.poll_interval;
    }
  }
}

void MessageRouter::Hint(const std::vector<std::string>& agent_ids) {
  std::vector<std::string> agents = agent_ids;
  std::sort(agents.begin(), agents.end());
  agents.erase(std::unique(agents.begin(), agents.end()), agents.end());
  absl::StatusOr<std::vector<std::string>> hubs =
      membership_->HubsHolding(agents);
  if (!hubs.ok()) return;  // their polls find the messages
  for (const std::string& hub : *hubs) {
    sender_->Send(InboxChannel(hub), options_.hub_instance_id);
  }
}

void MessageRouter::Drain() {
  const std::vector<std::string> attached = presence_->AttachedAgents();
  if (attached.empty()) return;
  while (true) {
    absl::StatusOr<std::vector<storage::UndeliveredMessage>> waiting =
        store_->ListUndelivered(attached, UnixMillis(clock_->Now()),
                                options_.batch);
    if (!waiting.ok()) return;  // the next poll tries again
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // One write records the attempts of the whole batch, then each is
    // pushed: routing is not one commit per message.
    const int64_t pushed = messaging_->PushRoutedMany(*waiting);
    {
      absl::MutexLock lock(&mu_);
      routed_ += pushed;
    }
    // A full batch whose rows were all pushed: more may wait. Rows that
    // stayed undelivered (the stream just ended) wait for the next poll.
    if (static_cast<int64_t>(waiting->size()) < options_.batch ||
        pushed < static_cast<int64_t>(waiting->size())) {
      return;
    }
  }
}

void MessageRouter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  if (listener_ != nullptr) listener_->Stop();
  if (thread_.joinable()) thread_.join();
  sender_->Stop();
}

}  // namespace hub
