#include "registry/presence.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "nlohmann/json.hpp"
#include "registry/agent_validation.h"
#include "registry/transport_locator.h"
#include "status/status.h"

namespace hub {

namespace {

// NOT_FOUND for an agent id nobody registered, naming it (errors.proto).
absl::Status AgentNotFound(const std::string& agent_id) {
  return WithMetadata(
      NotFoundError("AGENT_NOT_FOUND",
                    absl::StrCat("agent ", agent_id, " is not registered")),
      "agent_id", agent_id);
}

constexpr int kShards = 16;
constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
// The fewest rows one store read of a filtered list asks for.
constexpr int kMinListChunk = 64;

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

}  // namespace

bool NamesRoleCandidacy(const std::string& capabilities_json) {
  // Most agents name none: skip the parse on the registration path.
  if (!absl::StrContains(capabilities_json, ":candidate")) return false;
  nlohmann::json value =
      nlohmann::json::parse(capabilities_json, nullptr, false);
  if (!value.is_array()) return false;
  for (const auto& v : value) {
    if (!v.is_string()) continue;
    const std::string& c = v.get_ref<const std::string&>();
    if (absl::StartsWith(c, "role:") && absl::EndsWith(c, ":candidate")) {
      return true;
    }
  }
  return false;
}

absl::string_view AgentGoneReasonName(AgentGoneReason reason) {
  switch (reason) {
    case AgentGoneReason::kStreamGrace:
      return "stream_grace_expired";
    case AgentGoneReason::kOffline:
      return "holder_offline";
    case AgentGoneReason::kDeregistered:
      return "deregistered";
    case AgentGoneReason::kSuperseded:
      return "superseded";
  }
  return "unknown";
}

// The live presence of one agent. The store holds the durable truth for
// generation and status; leases are authoritative here and checkpointed.
struct PresenceRegistry::Entry {
  int64_t generation = 0;
  // nullopt until the entry holds an agent's presence.
  std::optional<AgentStatus> status;
  int64_t last_seen_ms = 0;
  int64_t lease_expires_ms = 0;
  int64_t ttl_ms = 0;
  // The lease as last written to the store; a checkpoint is due when the
  // live lease moved past it.
  int64_t persisted_lease_ms = 0;
  int64_t persisted_last_seen_ms = 0;
  std::shared_ptr<PresenceStream> stream;
  uint64_t stream_id = 0;
  // The last stream this hub took away to end it (deregistered, its hold
  // lost, the seat lost, shutting down), and why: its reactor may read one
  // more frame before the fence reaches it, and that frame is answered with
  // the same reason (CheckStream), not as a stream a newer one replaced.
  uint64_t ended_stream_id = 0;
  absl::Status ended_why;
  // Set while the detach grace runs (the stream ended, no re-attach yet).
  std::optional<int64_t> detached_at_ms;
  // Its capabilities name a role candidacy (NamesRoleCandidacy): an attach
  // is then an arrival the activator hears of.
  bool may_be_candidate = false;
  // This hub holds the agent's presence: what is above is live here, and
  // this hub renews, checkpoints and ends it. Always so on a store one hub
  // holds; on a shared store (several hubs, docs/design/multi-hub.md) only
  // for the agents registered, attached, heartbeated through or taken over
  // by this hub, while its seat keeps them. Another hub's agents are read
  // from the store.
  bool held = true;

  // Takes the attached stream (if any) away, for the caller to fence with
  // `why` once it let go of the shard's lock.
  std::shared_ptr<PresenceStream> TakeStream(const absl::Status& why) {
    if (stream_id != 0) {
      ended_stream_id = stream_id;
      ended_why = why;
    }
    stream_id = 0;
    return std::move(stream);
  }
};

struct PresenceRegistry::PendingProbe {
  std::string agent_id;
  uint64_t stream_id = 0;
  bool done = false;
  StreamProbeResult result = StreamProbeResult::kTimeout;
};

struct PresenceRegistry::Shard {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Entry> entries ABSL_GUARDED_BY(mu);
  // Agents whose stream ended and whose detach grace may be running: all
  // that Tick() visits every 100 ms, so its cost follows the streams that
  // just ended, not the attached ones (their leases are renewed once per
  // checkpoint pass) nor every agent ever registered. Added on detach,
  // dropped by Tick() once the grace ran out or was cancelled.
  absl::flat_hash_set<std::string> detaching ABSL_GUARDED_BY(mu);
};

PresenceRegistry::PresenceRegistry(storage::AgentStore* store,
                                   const storage::Membership* membership,
                                   const Clock* clock, PresenceConfig config,
                                   std::string hub_instance_id,
                                   std::string store_fingerprint)
    : store_(store),
      clock_(clock),
      config_(config),
      hub_instance_id_(std::move(hub_instance_id)),
      store_fingerprint_(std::move(store_fingerprint)),
      shared_(membership != nullptr),
      probe_ids_(clock) {
  for (int i = 0; i < kShards; ++i)
    shards_.push_back(std::make_unique<Shard>());
}

PresenceRegistry::~PresenceRegistry() = default;

PresenceRegistry::Shard& PresenceRegistry::ShardFor(
    absl::string_view agent_id) {
  return *shards_[absl::Hash<absl::string_view>()(agent_id) % kShards];
}

void PresenceRegistry::SetGoneListener(AgentGoneListener listener) {
  absl::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

void PresenceRegistry::SetArrivalListener(AgentArrivalListener listener) {
  absl::MutexLock lock(&listener_mu_);
  arrival_listener_ = std::move(listener);
}

void PresenceRegistry::SetEvents(const FleetEvents* events) {
  absl::MutexLock lock(&listener_mu_);
  events_ = events;
}

void PresenceRegistry::NotifyChanged(const std::string& agent_id) {
  const FleetEvents* events;
  {
    absl::MutexLock lock(&listener_mu_);
    events = events_;
  }
  PublishTo(events, AgentChanged{agent_id});
}

void PresenceRegistry::NotifyArrival(const std::string& agent_id) {
  AgentArrivalListener listener;
  {
    absl::MutexLock lock(&listener_mu_);
    listener = arrival_listener_;
  }
  if (listener) listener(agent_id);
}

void PresenceRegistry::Notify(const std::string& agent_id, int64_t generation,
                              AgentGoneReason reason) {
  AgentGoneListener listener;
  {
    absl::MutexLock lock(&listener_mu_);
    listener = listener_;
  }
  if (listener) listener(agent_id, generation, reason);
}

absl::Status PresenceRegistry::CheckFence(const HubFence& fence) const {
  auto with_identity = [this](absl::Status s) {
    s = WithMetadata(std::move(s), "hub_instance_id", hub_instance_id_);
    return WithMetadata(std::move(s), "store_fingerprint", store_fingerprint_);
  };
  if (fence.hub_instance_id.has_value() &&
      *fence.hub_instance_id != hub_instance_id_) {
    return with_identity(FailedPreconditionError(
        "STALE_HUB_INSTANCE",
        absl::StrCat("hub instance ", ErrorText(*fence.hub_instance_id),
                     " is gone; this hub is ", hub_instance_id_,
                     ": register again")));
  }
  if (fence.store_fingerprint.has_value() &&
      *fence.store_fingerprint != store_fingerprint_) {
    return with_identity(FailedPreconditionError(
        "STORE_FINGERPRINT_MISMATCH",
        absl::StrCat("store ", ErrorText(*fence.store_fingerprint),
                     " is not this hub's store ", store_fingerprint_)));
  }
  return absl::OkStatus();
}

absl::Status PresenceRegistry::StaleOwner(const std::string& agent_id,
                                          int64_t current_generation) const {
  absl::Status s = FailedPreconditionError(
      "STALE_PRESENCE_OWNER",
      absl::StrCat("agent ", agent_id,
                   " was registered again; this presence generation is "
                   "superseded by ",
                   current_generation));
  s = WithMetadata(std::move(s), "agent_id", agent_id);
  s = WithMetadata(std::move(s), "presence_generation",
                   absl::StrCat(current_generation));
  s = WithMetadata(std::move(s), "hub_instance_id", hub_instance_id_);
  return WithMetadata(std::move(s), "store_fingerprint", store_fingerprint_);
}

AgentView PresenceRegistry::ViewOf(AgentRecord record,
                                   const Entry& entry) const {
  AgentView view;
  record.presence_generation = entry.generation;
  record.status = entry.status.value_or(AgentStatus::kOffline);
  record.last_seen_ms = entry.last_seen_ms;
  record.lease_expires_ms = entry.lease_expires_ms;
  view.record = std::move(record);
  view.ttl = absl::Milliseconds(entry.ttl_ms);
  view.stream_attached = entry.stream != nullptr;
  return view;
}

absl::StatusOr<AgentView> PresenceRegistry::Overlay(AgentRecord record) {
  Shard& shard = ShardFor(record.agent_id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(record.agent_id);
  if (it == shard.entries.end() || !it->second.held ||
      it->second.generation != record.presence_generation) {
    // Not (or differently) known in memory, or held by another hub: the
    // stored row is the truth.
    AgentView view;
    view.ttl = absl::Milliseconds(
        record.lease_ttl_ms.value_or(Millis(config_.default_ttl)));
    view.record = std::move(record);
    return view;
  }
  return ViewOf(std::move(record), it->second);
}

absl::Status PresenceRegistry::Recover() {
  absl::StatusOr<std::vector<AgentRecord>> agents = store_->ListAgents();
  if (!agents.ok()) return agents.status();
  const int64_t now = UnixMillis(clock_->Now());
  for (AgentRecord& a : *agents) {
    const int64_t ttl = a.lease_ttl_ms.value_or(Millis(config_.default_ttl));
    Entry entry;
    entry.generation = a.presence_generation;
    entry.status = a.status;
    entry.last_seen_ms = a.last_seen_ms;
    entry.ttl_ms = ttl;
    entry.lease_expires_ms = a.lease_expires_ms;
    entry.persisted_lease_ms = a.lease_expires_ms;
    entry.persisted_last_seen_ms = a.last_seen_ms;
    entry.may_be_candidate = NamesRoleCandidacy(a.capabilities_json);
    // On a shared store the agents are other hubs' (or, when their hub
    // died, taken over by the membership): nothing to extend here.
    entry.held = !shared_;
    if (a.status != AgentStatus::kOffline && !shared_) {
      // A restart must not declare anyone dead: give every present agent a
      // full TTL from now to reconnect (etcd does the same for leases).
      entry.lease_expires_ms = std::max(a.lease_expires_ms, now + ttl);
    }
    IndexTopics(a.agent_id, a.presence_generation,
                TopicsFromJson(a.topics_json));
    Shard& shard = ShardFor(a.agent_id);
    absl::MutexLock lock(&shard.mu);
    shard.entries[a.agent_id] = std::move(entry);
  }
  if (shared_) return absl::OkStatus();
  absl::MutexLock lock(&tick_mu_);
  Checkpoint(now);
  return absl::OkStatus();
}

absl::StatusOr<AgentView> PresenceRegistry::Register(
    const RegisterInput& input) {
  absl::Notification done;
  absl::StatusOr<AgentView> result;
  RegisterAsync(input, [&](absl::StatusOr<AgentView> view) {
    result = std::move(view);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

void PresenceRegistry::RegisterAsync(const RegisterInput& input,
                                     storage::Callback<AgentView> done) {
  if (absl::Status s = CheckFence(input.fence); !s.ok()) {
    std::move(done)(s);
    return;
  }
  const int64_t now = UnixMillis(clock_->Now());
  absl::StatusOr<storage::AgentRegistration> registration =
      BuildRegistration(input, config_, now);
  if (!registration.ok()) {
    std::move(done)(registration.status());
    return;
  }
  const int64_t ttl_ms = registration->lease_ttl_ms;
  store_->RegisterAgentAsync(
      *registration,
      [this, agent_id = input.agent_id, now, ttl_ms,
       done = std::move(done)](absl::StatusOr<AgentRecord> record) mutable {
        std::move(done)(Registered(agent_id, now, ttl_ms, std::move(record)));
      });
}

absl::StatusOr<AgentView> PresenceRegistry::Registered(
    const std::string& agent_id, int64_t now, int64_t ttl_ms,
    absl::StatusOr<AgentRecord> record) {
  if (!record.ok()) return record.status();
  if (record->status != AgentStatus::kOnline ||
      record->lease_expires_ms != now + ttl_ms) {
    return AbortedError("REGISTER_PRESENCE_NOT_UPDATED",
                        absl::StrCat("registration of ", agent_id,
                                     " did not leave the agent online"));
  }

  std::shared_ptr<PresenceStream> superseded;
  int64_t superseded_generation = 0;
  AgentView view;
  const bool may_be_candidate = NamesRoleCandidacy(record->capabilities_json);
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[agent_id];
    // Two registrations may finish their writes in one order and reach
    // here in the other: the higher generation wins.
    if (record->presence_generation > entry.generation ||
        !entry.status.has_value()) {
      superseded = std::move(entry.stream);
      superseded_generation = entry.generation;
      entry = Entry();
      entry.generation = record->presence_generation;
      entry.status = AgentStatus::kOnline;
      entry.last_seen_ms = now;
      entry.lease_expires_ms = record->lease_expires_ms;
      entry.ttl_ms = ttl_ms;
      entry.persisted_lease_ms = record->lease_expires_ms;
      entry.persisted_last_seen_ms = now;
      entry.may_be_candidate = may_be_candidate;
    }
    view = ViewOf(*record, entry);
  }
  IndexTopics(agent_id, record->presence_generation,
              TopicsFromJson(record->topics_json));
  if (superseded != nullptr) {
    superseded->Fence(StaleOwner(agent_id, record->presence_generation));
  }
  if (superseded_generation > 0) {
    Notify(agent_id, superseded_generation, AgentGoneReason::kSuperseded);
  }
  if (may_be_candidate) NotifyArrival(agent_id);
  NotifyChanged(agent_id);
  return view;
}

absl::StatusOr<AgentView> PresenceRegistry::Heartbeat(
    const HeartbeatInput& input) {
  if (absl::Status s = CheckFence(input.fence); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(input.agent_id); !s.ok()) return s;
  if (input.ttl.has_value()) {
    if (absl::Status s = ValidateTtl(*input.ttl, config_); !s.ok()) return s;
  }
  const int64_t now = UnixMillis(clock_->Now());
  Shard& shard = ShardFor(input.agent_id);
  if (shared_ && !Held(input.agent_id)) {
    // Heartbeats through this hub: it holds the agent's presence now.
    return Hold(input.agent_id, input.generation,
                input.ttl.has_value()
                    ? std::optional<int64_t>(Millis(*input.ttl))
                    : std::nullopt,
                now);
  }
  int64_t generation = 0;
  int64_t ttl_ms = 0;
  {
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(input.agent_id);
    if (it == shard.entries.end()) {
      return AgentNotFound(input.agent_id);
    }
    Entry& entry = it->second;
    if (input.generation.has_value() && *input.generation != entry.generation) {
      return StaleOwner(input.agent_id, entry.generation);
    }
    if (entry.status == AgentStatus::kOffline) {
      return FailedPreconditionError(
          "AGENT_OFFLINE", absl::StrCat("agent ", input.agent_id,
                                        " is offline: register again"));
    }
    ttl_ms = input.ttl.has_value() ? Millis(*input.ttl) : entry.ttl_ms;
    generation = entry.generation;
    if (entry.status == AgentStatus::kOnline) {
      // The hot path: memory only; Tick() checkpoints the lease.
      entry.last_seen_ms = now;
      entry.lease_expires_ms = now + ttl_ms;
      entry.ttl_ms = ttl_ms;
      AgentRecord record;
      record.agent_id = input.agent_id;
      return ViewOf(std::move(record), entry);
    }
  }
  // A stale agent comes back: that status change is durable, fenced by the
  // generation this heartbeat was checked against.
  absl::StatusOr<storage::PresenceWrite> write =
      store_->RefreshLeaseForGeneration(input.agent_id, generation, now,
                                        ttl_ms);
  if (!write.ok()) return write.status();
  if (write->outcome != storage::PresenceOutcome::kApplied) {
    return StaleOwner(input.agent_id, write->agent.has_value()
                                          ? write->agent->presence_generation
                                          : generation);
  }
  AgentView view;
  {
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[input.agent_id];
    if (entry.generation == generation) {
      entry.status = AgentStatus::kOnline;
      entry.last_seen_ms = now;
      entry.lease_expires_ms = now + ttl_ms;
      entry.ttl_ms = ttl_ms;
      entry.persisted_lease_ms = entry.lease_expires_ms;
      entry.persisted_last_seen_ms = now;
    }
    view = ViewOf(*write->agent, entry);
  }
  NotifyChanged(input.agent_id);
  return view;
}

absl::StatusOr<DeregisterOutcome> PresenceRegistry::Deregister(
    const std::string& agent_id, std::optional<int64_t> generation,
    const HubFence& fence) {
  if (absl::Status s = CheckFence(fence); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) return s;
  absl::StatusOr<storage::PresenceWrite> write =
      store_->SetAgentStatusForGeneration(agent_id, generation,
                                          AgentStatus::kOffline);
  if (!write.ok()) return write.status();
  if (write->outcome == storage::PresenceOutcome::kNotFound) {
    return AgentNotFound(agent_id);
  }
  if (write->outcome == storage::PresenceOutcome::kStaleGeneration) {
    return StaleOwner(agent_id, write->agent->presence_generation);
  }
  const absl::Status deregistered = FailedPreconditionError(
      "AGENT_DEREGISTERED", absl::StrCat("agent ", agent_id, " deregistered"));
  std::shared_ptr<PresenceStream> stream;
  AgentView view;
  bool was_present = false;
  const int64_t gen = write->agent->presence_generation;
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[agent_id];
    if (entry.generation <= gen) {
      was_present =
          entry.status.has_value() && entry.status != AgentStatus::kOffline;
      entry.generation = gen;
      entry.status = AgentStatus::kOffline;
      entry.detached_at_ms.reset();
      stream = entry.TakeStream(deregistered);
      if (entry.ttl_ms == 0) entry.ttl_ms = Millis(config_.default_ttl);
      entry.last_seen_ms = write->agent->last_seen_ms;
      entry.lease_expires_ms = write->agent->lease_expires_ms;
    }
    view = ViewOf(*write->agent, entry);
  }
  if (stream != nullptr) stream->Fence(deregistered);
  if (was_present) Notify(agent_id, gen, AgentGoneReason::kDeregistered);
  NotifyChanged(agent_id);
  return DeregisterOutcome{std::move(view), was_present};
}

absl::StatusOr<AgentView> PresenceRegistry::Get(const std::string& agent_id) {
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) return s;
  absl::StatusOr<AgentRecord> record = store_->GetAgent(agent_id);
  if (!record.ok()) return record.status();
  return Overlay(std::move(*record));
}

void PresenceRegistry::IndexTopics(const std::string& agent_id,
                                   int64_t generation,
                                   std::vector<std::string> topics) {
  absl::MutexLock lock(&topics_mu_);
  Subscription& sub = subscriptions_[agent_id];
  if (generation < sub.generation) return;  // a later one got here first
  for (const std::string& old : sub.topics) {
    auto it = subscribers_.find(old);
    if (it == subscribers_.end()) continue;
    it->second.erase(agent_id);
    if (it->second.empty()) subscribers_.erase(it);
  }
  for (const std::string& topic : topics) subscribers_[topic].insert(agent_id);
  sub.generation = generation;
  sub.topics = std::move(topics);
}

absl::StatusOr<std::vector<std::string>> PresenceRegistry::TopicSubscribers(
    const std::string& topic) {
  if (shared_) {
    // Other hubs register subscribers too: the store has them all.
    std::vector<std::string> out;
    storage::AgentPageQuery query;
    query.topic = topic;
    query.limit = kMaxPageSize;
    while (true) {
      absl::StatusOr<std::vector<AgentRecord>> page =
          store_->ListAgentsPage(query);
      if (!page.ok()) return page.status();
      for (AgentRecord& a : *page) {
        if (a.status == AgentStatus::kOnline ||
            a.status == AgentStatus::kStale) {
          out.push_back(std::move(a.agent_id));
        }
      }
      if (static_cast<int64_t>(page->size()) < query.limit) return out;
      query.after_agent_id = page->back().agent_id;
    }
  }
  std::vector<std::string> candidates;
  {
    absl::MutexLock lock(&topics_mu_);
    auto it = subscribers_.find(topic);
    if (it == subscribers_.end()) return std::vector<std::string>();
    candidates.assign(it->second.begin(), it->second.end());
  }
  std::vector<std::string> out;
  for (std::string& agent_id : candidates) {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end()) continue;
    if (it->second.status == AgentStatus::kOnline ||
        it->second.status == AgentStatus::kStale) {
      out.push_back(std::move(agent_id));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<AgentPage> PresenceRegistry::List(
    const AgentFilter& filter, int page_size, const std::string& page_token) {
  if (page_size < 0) {
    return InvalidArgumentError("REQUEST_INVALID",
                                "page_size must not be negative");
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  absl::StatusOr<std::string> after = DecodeAgentPageToken(page_token);
  if (!after.ok()) return after.status();

  // Every filter but the live status is decided by the store (the topic
  // is checked again here: TopicsJsonContains is the reference). Pages are
  // read in keyset chunks from the last row seen, until the page is full
  // and one more match proves a next page, or the rows run out: a page
  // reads what it returns plus what the status filter rejects, never the
  // table.
  storage::AgentPageQuery query;
  query.after_agent_id = *after;
  query.clis = filter.clis;
  query.project_id = filter.project_id;
  query.projects = filter.scope.StoreProjects();
  query.topic = filter.topic;
  query.limit = filter.statuses.empty()
                    ? page_size + 1
                    : std::max(page_size + 1, kMinListChunk);
  AgentPage page;
  while (true) {
    absl::StatusOr<std::vector<AgentRecord>> records =
        store_->ListAgentsPage(query);
    if (!records.ok()) return records.status();
    for (AgentRecord& record : *records) {
      query.after_agent_id = record.agent_id;
      if (filter.topic.has_value() &&
          !TopicsJsonContains(record.topics_json, *filter.topic)) {
        continue;
      }
      absl::StatusOr<AgentView> view = Overlay(std::move(record));
      if (!view.ok()) return view.status();
      if (!filter.statuses.empty() &&
          std::find(filter.statuses.begin(), filter.statuses.end(),
                    view->record.status) == filter.statuses.end()) {
        continue;
      }
      if (static_cast<int>(page.agents.size()) == page_size) {
        page.next_page_token =
            EncodeAgentPageToken(page.agents.back().record.agent_id);
        return page;
      }
      page.agents.push_back(std::move(*view));
    }
    if (static_cast<int64_t>(records->size()) < query.limit) return page;
  }
}

absl::StatusOr<uint64_t> PresenceRegistry::Attach(
    const std::string& agent_id, int64_t generation, const HubFence& fence,
    std::shared_ptr<PresenceStream> stream) {
  if (absl::Status s = CheckFence(fence); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) return s;
  const int64_t now = UnixMillis(clock_->Now());
  if (shared_ && !Held(agent_id, generation)) {
    // Attached here: this hub holds the agent's presence from now on (the
    // store decides, fenced by the generation; the hub that held it
    // before finds out when its next write for the agent changes nothing).
    absl::StatusOr<AgentView> held =
        Hold(agent_id, generation, std::nullopt, now);
    if (!held.ok()) return held.status();
  }
  const uint64_t stream_id = next_stream_id_.fetch_add(1);
  std::shared_ptr<PresenceStream> replaced;
  bool revive = false;
  bool may_be_candidate = false;
  int64_t ttl_ms = 0;
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end()) {
      return AgentNotFound(agent_id);
    }
    Entry& entry = it->second;
    if (generation != entry.generation)
      return StaleOwner(agent_id, entry.generation);
    if (entry.status == AgentStatus::kOffline) {
      return FailedPreconditionError(
          "AGENT_OFFLINE",
          absl::StrCat("agent ", agent_id, " is offline: register again"));
    }
    replaced = std::move(entry.stream);
    entry.stream = std::move(stream);
    entry.stream_id = stream_id;
    shard.detaching.erase(agent_id);
    entry.detached_at_ms.reset();
    entry.last_seen_ms = now;
    entry.lease_expires_ms = now + entry.ttl_ms;
    revive = entry.status == AgentStatus::kStale;
    ttl_ms = entry.ttl_ms;
    may_be_candidate = entry.may_be_candidate;
  }
  if (replaced != nullptr) {
    replaced->Fence(FailedPreconditionError(
        "PRESENCE_STREAM_REPLACED",
        absl::StrCat("a newer presence stream of agent ", agent_id,
                     " replaced this one")));
  }
  if (revive) {
    absl::StatusOr<storage::PresenceWrite> write =
        store_->RefreshLeaseForGeneration(agent_id, generation, now, ttl_ms);
    if (!write.ok()) return write.status();
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[agent_id];
    if (write->outcome == storage::PresenceOutcome::kApplied &&
        entry.generation == generation) {
      entry.status = AgentStatus::kOnline;
      entry.persisted_lease_ms = now + ttl_ms;
      entry.persisted_last_seen_ms = now;
    }
  }
  if (may_be_candidate) NotifyArrival(agent_id);
  NotifyChanged(agent_id);
  return stream_id;
}

void PresenceRegistry::Detach(const std::string& agent_id, uint64_t stream_id) {
  // Whatever the stream was asked and did not answer, it never will.
  EndProbes(stream_id);
  Shard& shard = ShardFor(agent_id);
  bool earliest = false;
  {
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end() || it->second.stream_id != stream_id) return;
    it->second.stream.reset();
    it->second.stream_id = 0;
    it->second.detached_at_ms = UnixMillis(clock_->Now());
    shard.detaching.insert(agent_id);
    earliest = LowerEarliestDetach(*it->second.detached_at_ms);
  }
  if (earliest) {
    absl::MutexLock lock(&listener_mu_);
    if (grace_wakeup_) grace_wakeup_();
  }
  NotifyChanged(agent_id);
}

bool PresenceRegistry::LowerEarliestDetach(int64_t detached_at_ms) {
  int64_t seen = earliest_detach_ms_.load();
  while (detached_at_ms < seen) {
    if (earliest_detach_ms_.compare_exchange_weak(seen, detached_at_ms)) {
      return true;
    }
  }
  return false;
}

void PresenceRegistry::SetGraceWakeup(std::function<void()> wakeup) {
  absl::MutexLock lock(&listener_mu_);
  grace_wakeup_ = std::move(wakeup);
}

std::optional<absl::Duration> PresenceRegistry::TimeToNextGraceEnd() const {
  const int64_t earliest = earliest_detach_ms_.load();
  if (earliest == kNoDetach) return std::nullopt;
  const int64_t due = earliest + Millis(config_.detach_grace);
  return absl::Milliseconds(
      std::max<int64_t>(0, due - UnixMillis(clock_->Now())));
}

absl::Status PresenceRegistry::CheckStream(const std::string& agent_id,
                                           int64_t generation,
                                           uint64_t stream_id) {
  Shard& shard = ShardFor(agent_id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(agent_id);
  if (it == shard.entries.end()) {
    return AgentNotFound(agent_id);
  }
  if (stream_id != 0 && stream_id != it->second.stream_id &&
      stream_id == it->second.ended_stream_id) {
    return it->second.ended_why;  // this hub ended it; the fence is on its way
  }
  if (it->second.generation != generation) {
    return StaleOwner(agent_id, it->second.generation);
  }
  if (it->second.stream_id != stream_id) {
    return FailedPreconditionError("PRESENCE_STREAM_REPLACED",
                                   "a newer presence stream replaced this one");
  }
  return absl::OkStatus();
}

std::optional<int64_t> PresenceRegistry::LiveLease(const std::string& agent_id,
                                                   int64_t now_ms) {
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    const bool known = it != shard.entries.end();
    if (known && (!shared_ || it->second.held)) {
      const Entry& entry = it->second;
      if (entry.status == AgentStatus::kOnline &&
          entry.lease_expires_ms > now_ms) {
        return entry.lease_expires_ms;
      }
      // Held here and over in memory. With a stream here (which renews it)
      // or one hub on the store, memory is the truth. Held without a
      // stream, the hold may be one another hub ended by claiming the agent
      // (an attach there) without this hub's knowing (it learns at its next
      // fenced write for the agent, which may never come): the stored
      // lease, checkpointed by whichever hub holds the agent, says. Were
      // this hub the holder, the stored lease would be its own, no later
      // than memory's.
      if (!shared_ || entry.stream != nullptr) return std::nullopt;
    }
  }
  if (!shared_) return std::nullopt;
  // Another hub's agent: its lease as that hub last checkpointed it.
  absl::StatusOr<AgentRecord> row = store_->GetAgent(agent_id);
  if (!row.ok() || row->status != AgentStatus::kOnline ||
      row->lease_expires_ms <= now_ms) {
    return std::nullopt;
  }
  return row->lease_expires_ms;
}

bool PresenceRegistry::StreamAttached(const std::string& agent_id) {
  return LiveStream(agent_id) != nullptr;
}

std::vector<std::string> PresenceRegistry::AttachedAgents() {
  std::vector<std::string> out;
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (const auto& [agent_id, entry] : shard->entries) {
      if (entry.stream != nullptr && entry.status != AgentStatus::kOffline) {
        out.push_back(agent_id);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<PresenceStream> PresenceRegistry::LiveStream(
    const std::string& agent_id) {
  if (may_act_ && !may_act_()) return nullptr;
  Shard& shard = ShardFor(agent_id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(agent_id);
  if (it == shard.entries.end() || it->second.status == AgentStatus::kOffline)
    return nullptr;
  return it->second.stream;
}

bool PresenceRegistry::DeliverActivation(const std::string& agent_id,
                                         const ActivationEnvelope& envelope) {
  std::shared_ptr<PresenceStream> stream = LiveStream(agent_id);
  return stream != nullptr && stream->DeliverActivation(envelope);
}

bool PresenceRegistry::DeliverMessage(const std::string& agent_id,
                                      const MessageDelivery& delivery) {
  std::shared_ptr<PresenceStream> stream = LiveStream(agent_id);
  return stream != nullptr && stream->DeliverMessage(delivery);
}

bool PresenceRegistry::DeliverRoleChange(const std::string& agent_id,
                                         const RoleChangeNotice& notice) {
  std::shared_ptr<PresenceStream> stream = LiveStream(agent_id);
  return stream != nullptr && stream->DeliverRoleChange(notice);
}

bool PresenceRegistry::DeliverReservationEnd(
    const std::string& agent_id, const ReservationEndNotice& notice) {
  std::shared_ptr<PresenceStream> stream = LiveStream(agent_id);
  return stream != nullptr && stream->DeliverReservationEnd(notice);
}

StreamProbeResult PresenceRegistry::ProbeStream(const std::string& agent_id,
                                                RoleProbeEnvelope probe,
                                                absl::Duration timeout) {
  std::shared_ptr<PresenceStream> stream;
  auto pending = std::make_shared<PendingProbe>();
  pending->agent_id = agent_id;
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end() ||
        it->second.status == AgentStatus::kOffline ||
        it->second.stream == nullptr) {
      return StreamProbeResult::kNotAttached;
    }
    stream = it->second.stream;
    pending->stream_id = it->second.stream_id;
  }
  probe.probe_id = probe_ids_.Next();
  probe.deadline_ms = UnixMillis(clock_->Now() + timeout);
  {
    absl::MutexLock lock(&probe_mu_);
    probes_[probe.probe_id] = pending;
  }
  // Registered first: the agent may answer before DeliverProbe returns.
  const bool sent = stream->DeliverProbe(probe);
  absl::MutexLock lock(&probe_mu_);
  if (sent)
    probe_mu_.AwaitWithTimeout(absl::Condition(&pending->done), timeout);
  probes_.erase(probe.probe_id);
  if (!sent) return StreamProbeResult::kNotAttached;
  return pending->done ? pending->result : StreamProbeResult::kTimeout;
}

absl::Status PresenceRegistry::AnswerProbe(const std::string& agent_id,
                                           uint64_t stream_id,
                                           const std::string& probe_id,
                                           bool ready) {
  absl::MutexLock lock(&probe_mu_);
  auto it = probes_.find(probe_id);
  if (it == probes_.end() || it->second->agent_id != agent_id ||
      it->second->stream_id != stream_id || it->second->done) {
    return WithMetadata(
        InvalidArgumentError("REQUEST_INVALID",
                             "no probe with this probe_id awaits an answer "
                             "from this stream (unknown, answered or late)"),
        "field", "probe_id");
  }
  it->second->done = true;
  it->second->result =
      ready ? StreamProbeResult::kReady : StreamProbeResult::kNotReady;
  return absl::OkStatus();
}

void PresenceRegistry::EndProbes(uint64_t stream_id) {
  absl::MutexLock lock(&probe_mu_);
  for (auto& [id, pending] : probes_) {
    if ((stream_id == 0 || pending->stream_id == stream_id) && !pending->done) {
      pending->done = true;
      pending->result = StreamProbeResult::kNotAttached;
    }
  }
}

bool PresenceRegistry::Held(const std::string& agent_id,
                            std::optional<int64_t> generation) {
  Shard& shard = ShardFor(agent_id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(agent_id);
  return it != shard.entries.end() && it->second.held &&
         (!generation.has_value() || it->second.generation == *generation);
}

absl::StatusOr<AgentView> PresenceRegistry::Hold(
    const std::string& agent_id, std::optional<int64_t> generation,
    std::optional<int64_t> ttl_ms, int64_t now) {
  absl::StatusOr<AgentRecord> stored = store_->GetAgent(agent_id);
  if (!stored.ok()) return stored.status();
  const int64_t gen = generation.value_or(stored->presence_generation);
  if (gen != stored->presence_generation) {
    return StaleOwner(agent_id, stored->presence_generation);
  }
  auto offline = [&agent_id] {
    return FailedPreconditionError(
        "AGENT_OFFLINE",
        absl::StrCat("agent ", agent_id, " is offline: register again"));
  };
  if (stored->status == AgentStatus::kOffline) return offline();
  const int64_t ttl = ttl_ms.value_or(
      stored->lease_ttl_ms.value_or(Millis(config_.default_ttl)));
  absl::StatusOr<storage::PresenceWrite> claim =
      store_->ClaimPresence(agent_id, gen, now, ttl);
  if (!claim.ok()) return claim.status();
  if (claim->outcome == storage::PresenceOutcome::kNotFound) {
    return AgentNotFound(agent_id);
  }
  if (claim->outcome != storage::PresenceOutcome::kApplied) {
    if (claim->agent.has_value() &&
        claim->agent->status == AgentStatus::kOffline &&
        claim->agent->presence_generation == gen) {
      return offline();
    }
    return StaleOwner(agent_id, claim->agent.has_value()
                                    ? claim->agent->presence_generation
                                    : gen);
  }
  const AgentRecord& row = *claim->agent;
  AgentView view;
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[agent_id];
    if (entry.generation > row.presence_generation) {
      return StaleOwner(agent_id, entry.generation);
    }
    if (entry.generation < row.presence_generation || !entry.held) {
      // What memory had was another hub's (or an older generation's).
      entry.stream.reset();
      entry.stream_id = 0;
      entry.detached_at_ms.reset();
      shard.detaching.erase(agent_id);
    }
    entry.generation = row.presence_generation;
    entry.status = AgentStatus::kOnline;
    entry.last_seen_ms = now;
    entry.lease_expires_ms = row.lease_expires_ms;
    entry.ttl_ms = ttl;
    entry.persisted_lease_ms = row.lease_expires_ms;
    entry.persisted_last_seen_ms = now;
    entry.may_be_candidate = NamesRoleCandidacy(row.capabilities_json);
    entry.held = true;
    view = ViewOf(row, entry);
  }
  IndexTopics(agent_id, row.presence_generation,
              TopicsFromJson(row.topics_json));
  return view;
}

bool PresenceRegistry::Release(const std::string& agent_id, int64_t generation,
                               int64_t now) {
  storage::LeaseCheckpoint last{agent_id, generation, 0, 0, 0};
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end() || it->second.generation != generation) {
      return false;
    }
    last.last_seen_ms = it->second.last_seen_ms;
    last.lease_expires_ms = it->second.lease_expires_ms;
    last.lease_ttl_ms = it->second.ttl_ms;
  }
  // The lease as this hub kept it goes with the hold, so that what other
  // hubs (and this one, no longer holding it) read is the live one.
  absl::StatusOr<bool> released = store_->ReleasePresence(last);
  Shard& shard = ShardFor(agent_id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.entries.find(agent_id);
  if (it == shard.entries.end() || it->second.generation != generation) {
    return false;
  }
  if (!released.ok()) {
    // Unknown: the grace is over, so try again at the next tick.
    if (it->second.stream == nullptr && it->second.held) {
      it->second.detached_at_ms = now - Millis(config_.detach_grace);
      shard.detaching.insert(agent_id);
      LowerEarliestDetach(*it->second.detached_at_ms);
    }
    return false;
  }
  // Either way this hub holds it no longer: released, or another hub (an
  // attach elsewhere, a takeover) holds it and the agent is not gone.
  it->second.held = false;
  return *released;
}

void PresenceRegistry::LoseHold(const std::string& agent_id, int64_t generation,
                                const absl::Status& why) {
  std::shared_ptr<PresenceStream> stream;
  {
    Shard& shard = ShardFor(agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(agent_id);
    if (it == shard.entries.end() || it->second.generation != generation ||
        !it->second.held) {
      return;
    }
    it->second.held = false;
    it->second.detached_at_ms.reset();
    shard.detaching.erase(agent_id);
    stream = it->second.TakeStream(why);
  }
  if (stream != nullptr) stream->Fence(why);
}

void PresenceRegistry::Adopt(const std::vector<storage::TakenAgent>& agents) {
  if (agents.empty()) return;
  const int64_t now = UnixMillis(clock_->Now());
  bool earliest = false;
  for (const storage::TakenAgent& taken : agents) {
    absl::StatusOr<AgentRecord> row = store_->GetAgent(taken.agent_id);
    if (!row.ok() || row->presence_generation != taken.presence_generation ||
        row->status == AgentStatus::kOffline) {
      continue;  // moved on since: nothing of this hub's to end
    }
    Shard& shard = ShardFor(taken.agent_id);
    absl::MutexLock lock(&shard.mu);
    Entry& entry = shard.entries[taken.agent_id];
    if (entry.held && entry.generation == row->presence_generation) continue;
    entry = Entry();
    entry.generation = row->presence_generation;
    entry.status = row->status;
    entry.last_seen_ms = row->last_seen_ms;
    entry.lease_expires_ms = row->lease_expires_ms;
    entry.ttl_ms = row->lease_ttl_ms.value_or(Millis(config_.default_ttl));
    entry.persisted_lease_ms = row->lease_expires_ms;
    entry.persisted_last_seen_ms = row->last_seen_ms;
    entry.may_be_candidate = NamesRoleCandidacy(row->capabilities_json);
    entry.held = true;
    // Its stream died with its hub: the detach grace starts now, as if the
    // stream had ended here. Re-attaching anywhere within it keeps the
    // agent present; otherwise it is gone when the grace ends.
    entry.detached_at_ms = now;
    shard.detaching.insert(taken.agent_id);
    earliest = LowerEarliestDetach(now) || earliest;
  }
  if (earliest) {
    absl::MutexLock lock(&listener_mu_);
    if (grace_wakeup_) grace_wakeup_();
  }
}

void PresenceRegistry::DropHolds(const absl::Status& why) {
  std::vector<std::shared_ptr<PresenceStream>> streams;
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (auto& [agent_id, entry] : shard->entries) {
      entry.held = false;
      entry.detached_at_ms.reset();
      if (entry.stream != nullptr) streams.push_back(entry.TakeStream(why));
    }
    shard->detaching.clear();
  }
  for (auto& stream : streams) stream->Fence(why);
  EndProbes(0);
}

void PresenceRegistry::Tick() {
  absl::MutexLock tick_lock(&tick_mu_);
  const int64_t now = UnixMillis(clock_->Now());
  const int64_t grace = Millis(config_.detach_grace);
  std::vector<std::pair<std::string, int64_t>> gone;
  // Recomputed from the graces still running below; a Detach() during the
  // pass lowers it again, before or after its shard is visited.
  earliest_detach_ms_.store(kNoDetach);
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (auto id = shard->detaching.begin(); id != shard->detaching.end();) {
      auto found = shard->entries.find(*id);
      if (found == shard->entries.end() ||
          !found->second.detached_at_ms.has_value()) {
        shard->detaching.erase(id++);  // re-attached, re-registered, gone
        continue;
      }
      Entry& entry = found->second;
      if (now >= *entry.detached_at_ms + grace) {
        entry.detached_at_ms.reset();
        if (entry.status != AgentStatus::kOffline)
          gone.emplace_back(found->first, entry.generation);
        shard->detaching.erase(id++);
        continue;
      }
      LowerEarliestDetach(*entry.detached_at_ms);
      ++id;
    }
  }
  for (const auto& [agent_id, generation] : gone) {
    if (shared_ && !Release(agent_id, generation, now)) continue;
    Notify(agent_id, generation, AgentGoneReason::kStreamGrace);
    NotifyChanged(agent_id);
  }
  if (now - last_checkpoint_ms_ >= Millis(config_.checkpoint_interval)) {
    Checkpoint(now);
  }
  if (now - last_sweep_ms_ >= Millis(config_.sweep_interval)) {
    Sweep(now);
  }
}

void PresenceRegistry::Checkpoint(int64_t now) {
  last_checkpoint_ms_ = now;
  std::vector<storage::LeaseCheckpoint> batch;
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (auto& [agent_id, entry] : shard->entries) {
      if (entry.status == AgentStatus::kOffline || !entry.held) continue;
      if (entry.stream != nullptr) {
        // An attached, healthy stream is the liveness signal: its lease is
        // renewed here, once per pass (it may lag by checkpoint_interval,
        // far less than any TTL).
        entry.last_seen_ms = now;
        entry.lease_expires_ms = now + entry.ttl_ms;
      }
      // Write only when the stored lease would soon be wrong: it lags the
      // live one by more than half a TTL, or it is already in the past
      // while the live one is not. An attached agent thus costs one row
      // write per half TTL, not one per renewal.
      const bool lagging =
          entry.lease_expires_ms - entry.persisted_lease_ms > entry.ttl_ms / 2;
      const bool expired_on_disk =
          entry.persisted_lease_ms <= now + 1000 &&
          entry.lease_expires_ms > entry.persisted_lease_ms;
      if (!lagging && !expired_on_disk) continue;
      batch.push_back({agent_id, entry.generation, entry.last_seen_ms,
                       entry.lease_expires_ms, entry.ttl_ms});
    }
  }
  if (batch.empty()) return;
  // Not written (the database is away, or this hub's seat was not live
  // when the statement ran): retried at the next checkpoint. A seat that is
  // over ends every stream through its loss (DropHolds, HUB_SEAT_LOST), not
  // here: a client told PRESENCE_STREAM_REPLACED would think itself
  // superseded and give up for good.
  absl::StatusOr<std::vector<bool>> applied = store_->CheckpointLeases(batch);
  if (!applied.ok()) return;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!(*applied)[i]) {
      // Refused while this hub's seat was live: the row names another hub
      // (an attach through it took the agent), a newer generation, or an
      // agent gone offline. This hub holds it no more.
      if (shared_) {
        LoseHold(batch[i].agent_id, batch[i].presence_generation,
                 FailedPreconditionError(
                     "PRESENCE_STREAM_REPLACED",
                     absl::StrCat("agent ", batch[i].agent_id,
                                  " is held by another hub now")));
      }
      continue;
    }
    Shard& shard = ShardFor(batch[i].agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(batch[i].agent_id);
    if (it == shard.entries.end() ||
        it->second.generation != batch[i].presence_generation) {
      continue;
    }
    it->second.persisted_lease_ms =
        std::max(it->second.persisted_lease_ms, batch[i].lease_expires_ms);
    it->second.persisted_last_seen_ms = batch[i].last_seen_ms;
  }
}

void PresenceRegistry::Sweep(int64_t now) {
  last_sweep_ms_ = now;
  // Leases are authoritative in memory; the sweep runs in SQL on the
  // checkpointed copy, so bring it up to date first. A heartbeat that lands
  // between the two is repaired below.
  Checkpoint(now);
  absl::StatusOr<std::vector<storage::PresenceTransition>> transitions =
      store_->SweepAgentPresence(now, Millis(config_.offline_after));
  if (!transitions.ok()) return;
  std::vector<std::pair<std::string, int64_t>> offline;
  std::vector<std::pair<std::string, int64_t>> revive;
  for (const storage::PresenceTransition& t : *transitions) {
    Shard& shard = ShardFor(t.agent_id);
    absl::MutexLock lock(&shard.mu);
    auto it = shard.entries.find(t.agent_id);
    if (it == shard.entries.end() ||
        it->second.generation != t.presence_generation) {
      continue;
    }
    Entry& entry = it->second;
    if (entry.held && entry.lease_expires_ms > now &&
        entry.status != AgentStatus::kOffline) {
      // Renewed after the checkpoint: the stored row is wrong, not memory.
      revive.emplace_back(t.agent_id, entry.generation);
      continue;
    }
    entry.status = t.to_status;
    if (t.to_status == AgentStatus::kOffline) {
      offline.emplace_back(t.agent_id, entry.generation);
    }
  }
  for (const auto& [agent_id, generation] : revive) {
    int64_t lease = 0, ttl = 0;
    {
      Shard& shard = ShardFor(agent_id);
      absl::MutexLock lock(&shard.mu);
      const Entry& entry = shard.entries[agent_id];
      lease = entry.lease_expires_ms;
      ttl = entry.ttl_ms;
    }
    (void)store_->RefreshLeaseForGeneration(agent_id, generation, lease - ttl,
                                            ttl);
  }
  for (const auto& [agent_id, generation] : offline) {
    Notify(agent_id, generation, AgentGoneReason::kOffline);
  }
  for (const storage::PresenceTransition& t : *transitions) {
    NotifyChanged(t.agent_id);
  }
}

void PresenceRegistry::Shutdown() {
  const absl::Status why = UnavailableError(
      "HUB_SHUTTING_DOWN", "the hub is shutting down; reconnect");
  std::vector<std::shared_ptr<PresenceStream>> streams;
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (auto& [agent_id, entry] : shard->entries) {
      if (entry.stream != nullptr) streams.push_back(entry.TakeStream(why));
    }
  }
  for (auto& stream : streams) stream->Fence(why);
  EndProbes(0);
  absl::MutexLock lock(&tick_mu_);
  Checkpoint(UnixMillis(clock_->Now()));
}

PresenceCounts PresenceRegistry::Counts() {
  PresenceCounts counts;
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    for (const auto& [agent_id, entry] : shard->entries) {
      if (entry.status == AgentStatus::kOnline) ++counts.online;
      if (entry.status == AgentStatus::kStale) ++counts.stale;
      if (entry.status == AgentStatus::kOffline) ++counts.offline;
      if (entry.stream != nullptr) ++counts.open_streams;
    }
  }
  return counts;
}

}  // namespace hub
