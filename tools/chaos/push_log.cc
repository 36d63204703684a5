#include "tools/chaos/push_log.h"

#include "absl/strings/str_cat.h"

namespace hub::chaos {

void PushLog::Published(const std::string& message_id, int64_t started_ns) {
  absl::MutexLock lock(&mu_);
  publish_started_[message_id] = started_ns;
}

void PushLog::Paused(int slot, int64_t from_ns, int64_t to_ns) {
  absl::MutexLock lock(&mu_);
  pauses_.push_back({slot, from_ns, to_ns});
}

void PushLog::Pushed(const std::string& agent, int slot, int64_t attached_ns,
                     int64_t received_ns,
                     const hub::v1::MessageDelivery& delivery) {
  const std::string& id = delivery.message().message_id();
  absl::MutexLock lock(&mu_);
  const int times = ++times_[{agent, id}];
  if (delivery.state() == hub::v1::DELIVERY_STATE_ACKED) {
    acked_pushes_.push_back(
        absl::StrCat("message ", id, " was pushed to ", agent, " by hub ", slot,
                     " reading ACKED (attempts ", delivery.attempts(),
                     ", push ", times, " of it to this agent)"));
  }
  pushes_.push_back({agent, id, slot, attached_ns, received_ns});
}

void PushLog::StreamEnded(const std::string& agent, int slot,
                          int64_t attached_ns, int64_t ended_ns,
                          const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ended_.push_back({agent, slot, attached_ns, ended_ns, reason});
}

void PushLog::Check(std::vector<std::string>* violations) const {
  absl::MutexLock lock(&mu_);
  violations->insert(violations->end(), acked_pushes_.begin(),
                     acked_pushes_.end());
  for (const Pause& pause : pauses_) {
    for (const Ended& ended : ended_) {
      if (ended.slot != pause.slot || ended.attached_ns >= pause.from_ns ||
          ended.ended_ns < pause.to_ns || ended.reason == "HUB_SEAT_LOST") {
        continue;
      }
      violations->push_back(absl::StrCat(
          "hub ", ended.slot, ", paused at ", pause.from_ns / 1000000,
          " ms and resumed at ", pause.to_ns / 1000000, " ms, ended ",
          ended.agent, "'s stream (attached at ", ended.attached_ns / 1000000,
          " ms) at ", ended.ended_ns / 1000000, " ms without HUB_SEAT_LOST (",
          ended.reason.empty() ? "no reason" : ended.reason, ")"));
    }
  }
  for (const Pause& pause : pauses_) {
    for (const Push& push : pushes_) {
      if (push.slot != pause.slot || push.attached_ns >= pause.from_ns ||
          push.received_ns < pause.from_ns) {
        continue;
      }
      auto started = publish_started_.find(push.message_id);
      if (started == publish_started_.end() ||
          started->second < pause.from_ns) {
        continue;
      }
      violations->push_back(absl::StrCat(
          "hub ", push.slot, ", paused at ", pause.from_ns / 1000000,
          " ms and resumed at ", pause.to_ns / 1000000, " ms, pushed message ",
          push.message_id, " (published at ", started->second / 1000000,
          " ms) to ", push.agent, " at ", push.received_ns / 1000000,
          " ms on a stream attached before the pause (at ",
          push.attached_ns / 1000000, " ms)"));
    }
  }
}

std::string PushLog::Summary() const {
  absl::MutexLock lock(&mu_);
  int64_t repeated = 0;
  for (const auto& [key, times] : times_) repeated += times - 1;
  // How much the pause checks saw: streams that lived through a pause, and
  // what the resumed hub pushed on them.
  int64_t through = 0;
  int64_t pushed_after = 0;
  for (const Pause& pause : pauses_) {
    for (const Ended& ended : ended_) {
      through += ended.slot == pause.slot &&
                 ended.attached_ns < pause.from_ns &&
                 ended.ended_ns >= pause.to_ns;
    }
    for (const Push& push : pushes_) {
      pushed_after += push.slot == pause.slot &&
                      push.attached_ns < pause.from_ns &&
                      push.received_ns >= pause.to_ns;
    }
  }
  return absl::StrCat("chaos: pushed messages: ", pushes_.size(),
                      " (repeats of a message to one agent: ", repeated,
                      ", reading ACKED: ", acked_pushes_.size(), "); ",
                      pauses_.size(), " pauses: ", through,
                      " streams lived through one, ", pushed_after,
                      " messages pushed on them after the resume");
}

}  // namespace hub::chaos
