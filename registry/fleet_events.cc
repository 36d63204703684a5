#include "registry/fleet_events.h"

#include <utility>

namespace hub {

void FleetEvents::Subscribe(Subscriber subscriber) {
  absl::MutexLock lock(&mu_);
  auto next = std::make_shared<Subscribers>(*subscribers_);
  next->push_back(std::move(subscriber));
  subscribers_ = std::move(next);
}

void FleetEvents::Publish(const FleetEvent& event) const {
  std::shared_ptr<const Subscribers> subscribers;
  {
    absl::MutexLock lock(&mu_);
    subscribers = subscribers_;
  }
  for (const Subscriber& subscriber : *subscribers) subscriber(event);
}

}  // namespace hub
