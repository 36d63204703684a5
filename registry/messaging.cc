// Messaging: publish, deliver, acknowledge (TRIFLUX-HUB §6). The reads and
// pages are in messaging_queries.cc.
#include "registry/messaging.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "registry/agent_validation.h"
#include "registry/messaging_internal.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {

namespace {

// Runs `task`, which may block on writes, on `blocking`, or inline when
// there is none (the caller is not a store thread).
void RunMayBlock(const Messaging::BlockingExecutor& blocking,
                 std::function<void()> task) {
  if (blocking) {
    blocking(std::move(task));
  } else {
    task();
  }
}

constexpr absl::string_view kTopicPrefix = "topic:";
constexpr absl::string_view kRoleTopicPrefix = "topic:role:";
constexpr absl::string_view kCtoAddress = "topic:cto";
// An agent's ack writes at once; those that come meanwhile are merged, up
// to this many distinct ids per write (AckCoalescer). Two: one committing
// while the next waits in the writer's queue for the following group.
constexpr int kAckWritesPerAgent = 2;
constexpr size_t kMaxIdsPerAckWrite = 1000;

absl::Status Invalid(absl::string_view reason, absl::string_view field,
                     absl::string_view message) {
  return WithMetadata(InvalidArgumentError(reason, message), "field", field);
}

// An address outside the caller's projects (PublishInput::scope).
absl::Status OutOfScope(absl::string_view message) {
  return WithMetadata(ReasonError(absl::StatusCode::kPermissionDenied,
                                  "PROJECT_SCOPE_MISMATCH", message),
                      "field", "to");
}

}  // namespace

bool IsPublishableMessageType(absl::string_view type) {
  static const std::set<absl::string_view>* const kTypes =
      new std::set<absl::string_view>{"request",       "response",
                                      "event",         "handoff",
                                      "human_request", "human_response"};
  return kTypes->count(type) > 0;
}

Messaging::Messaging(storage::MessageStore* store, PresenceRegistry* presence,
                     RoleRegistry* roles, Activator* activator,
                     UuidV7Generator* ids, const Clock* clock,
                     MessagingConfig config)
    : store_(store),
      acks_(
          [this](const std::string& agent_id,
                 const std::vector<std::string>& ids,
                 std::optional<int64_t> presence_generation,
                 AckCoalescer::Written done) {
            // `ids` lives until `done` has run (AckCoalescer::Write).
            store_->AckMessagesAsync(
                agent_id, ids, UnixMillis(clock_->Now()), presence_generation,
                [this, agent_id, ids = &ids, done = std::move(done)](
                    absl::StatusOr<std::vector<bool>> acked) mutable {
                  if (acked.ok() && events_ != nullptr) {
                    events_->Publish(
                        MessagesChanged{*ids, {agent_id}, std::nullopt});
                  }
                  std::move(done)(std::move(acked));
                });
          },
          kAckWritesPerAgent, kMaxIdsPerAckWrite),
      presence_(presence),
      roles_(roles),
      activator_(activator),
      ids_(ids),
      clock_(clock),
      config_(config) {}

Messaging::~Messaging() { acks_.Quiesce(); }

absl::StatusOr<MessageRecord> Messaging::Validate(const PublishInput& input,
                                                  int64_t now_ms) {
  if (absl::Status s = ValidateAgentId(input.from_agent_id); !s.ok())
    return WithMetadata(s, "field", "from_agent_id");
  if (!input.topic.empty() && !messaging_internal::IsLabel(input.topic)) {
    return Invalid("TOPIC_INVALID", "topic",
                   "topic must be 1..128 characters of [A-Za-z0-9._:-]");
  }
  MessageRecord m;
  if (input.type.empty()) {
    m.type = input.correlation_id.empty() ? "event" : "response";
  } else if (IsPublishableMessageType(input.type)) {
    m.type = input.type;
  } else {
    return Invalid("MESSAGE_TYPE_INVALID", "type",
                   absl::StrCat("type '", input.type,
                                "' cannot be published (system is reserved)"));
  }
  if (input.priority < 0 || input.priority > 9) {
    return Invalid("PRIORITY_INVALID", "priority", "priority must be 1..9");
  }
  m.priority = input.priority == 0 ? 5 : input.priority;
  const absl::Duration ttl = absl::Milliseconds(
      absl::ToInt64Milliseconds(input.ttl.value_or(config_.default_ttl)));
  if (ttl < config_.min_ttl || ttl > config_.max_ttl) {
    return Invalid("TTL_INVALID", "ttl", "ttl must be 1 s .. 24 h");
  }
  for (const auto& [value, field] :
       {std::pair<const std::string&, absl::string_view>{input.correlation_id,
                                                         "correlation_id"},
        {input.trace_id, "trace_id"}}) {
    if (!value.empty() && !messaging_internal::IsLabel(value)) {
      return Invalid("REQUEST_INVALID", field,
                     absl::StrCat(field,
                                  " must be 1..128 characters of "
                                  "[A-Za-z0-9._:-]"));
    }
  }
  if (input.payload_json.size() > config_.max_payload_bytes) {
    return WithMetadata(
        LimitExceededError("max_payload_bytes",
                           static_cast<int64_t>(config_.max_payload_bytes),
                           absl::StrCat("payload exceeds ",
                                        config_.max_payload_bytes, " bytes")),
        "field", "payload");
  }
  if (input.payload_json.empty()) {
    m.payload_json = "{}";
  } else {
    // Valid JSON whose value is an object (accept() builds no document).
    const size_t first = input.payload_json.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || input.payload_json[first] != '{' ||
        !nlohmann::json::accept(input.payload_json)) {
      return Invalid("REQUEST_INVALID", "payload",
                     "payload must be a JSON object");
    }
    m.payload_json = input.payload_json;
  }
  m.from_agent = input.from_agent_id;
  m.to_agent = input.to;
  m.topic = input.topic;
  m.ttl_ms = absl::ToInt64Milliseconds(ttl);
  m.created_at_ms = now_ms;
  m.expires_at_ms = now_ms + m.ttl_ms;
  m.correlation_id = input.correlation_id;
  m.trace_id = input.trace_id;
  m.status = MessageStatus::kQueued;
  return m;
}

absl::StatusOr<std::vector<std::string>> Messaging::TopicSubscribers(
    const std::string& topic) {
  return presence_->TopicSubscribers(topic);
}

std::optional<RoleRecord> Messaging::LiveHolder(const std::string& wire,
                                                int64_t now_ms) {
  RoleKeyRef ref;
  ref.wire = wire;
  absl::StatusOr<RoleRecord> row = roles_->Get(ref);
  if (!row.ok() || row->state != RoleState::kActive || !row->holder_agent_id ||
      row->charter_acked_epoch != row->epoch ||
      row->holder_lease_expires_ms.value_or(0) <= now_ms) {
    return std::nullopt;
  }
  if (!presence_->LiveLease(*row->holder_agent_id, now_ms).has_value()) {
    return std::nullopt;
  }
  return *row;
}

absl::StatusOr<Messaging::Address> Messaging::Resolve(
    const PublishInput& input, const std::string& payload_json,
    int64_t now_ms) {
  Address address;
  const std::string& to = input.to;
  std::optional<std::string> role_wire;
  if (to == kCtoAddress) {
    std::string project = input.project_id;
    nlohmann::json payload =
        nlohmann::json::parse(payload_json, nullptr, false);
    std::string payload_project;
    if (payload.is_object() && payload.contains("project_id") &&
        payload["project_id"].is_string()) {
      payload_project = payload["project_id"].get<std::string>();
    }
    if (!project.empty()) {
      if (!IsProjectId(project)) {
        return Invalid("PROJECT_ID_INVALID", "project_id",
                       "project_id must match ^prj_[A-Za-z0-9_-]{22}$");
      }
      if (!payload_project.empty() && payload_project != project) {
        return Invalid("SCOPE_MISMATCH", "project_id",
                       "project_id differs from payload.project_id");
      }
    } else if (!payload_project.empty()) {
      project = payload_project;
    } else {
      absl::StatusOr<AgentView> sender = presence_->Get(input.from_agent_id);
      if (sender.ok() && sender->record.project_id.has_value())
        project = *sender->record.project_id;
    }
    if (project.empty()) {
      return Invalid("SCOPE_REQUIRED", "project_id",
                     "topic:cto needs a project (project_id, "
                     "payload.project_id or the sender's)");
    }
    RoleKeyRef ref;
    ref.key = RoleKeyInput{project, "cto", std::nullopt};
    absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ref);
    if (!key.ok()) return WithMetadata(key.status(), "field", "to");
    role_wire = key->wire;
  } else if (absl::StartsWith(to, kRoleTopicPrefix)) {
    role_wire = to.substr(kRoleTopicPrefix.size());
  } else if (absl::StartsWith(to, kTopicPrefix)) {
    const std::string name = to.substr(kTopicPrefix.size());
    if (absl::Status s = ValidateTopic(name); !s.ok())
      return WithMetadata(s, "field", "to");
    absl::StatusOr<std::vector<std::string>> subs = TopicSubscribers(name);
    if (!subs.ok()) return subs.status();
    if (!input.scope.all) {
      // A restricted sender reaches only the subscribers of its projects.
      std::map<std::string, std::optional<std::string>> cache;
      std::vector<std::string> inside;
      for (std::string& agent : *subs) {
        absl::StatusOr<std::optional<std::string>> project =
            AgentProject(agent, &cache);
        if (!project.ok()) return project.status();
        if (input.scope.Allows(*project)) inside.push_back(std::move(agent));
      }
      *subs = std::move(inside);
    }
    address.recipients = std::move(*subs);
    address.default_topic = name;
    return address;
  } else {
    if (!ValidateAgentId(to).ok()) {
      return Invalid("MESSAGE_ADDRESS_INVALID", "to",
                     "to must be an agent id, topic:<name> or "
                     "topic:role:<wire>");
    }
    if (!input.scope.all) {
      std::map<std::string, std::optional<std::string>> cache;
      absl::StatusOr<std::optional<std::string>> project =
          AgentProject(to, &cache);
      if (!project.ok()) return project.status();
      if (!input.scope.Allows(*project)) {
        return OutOfScope(absl::StrCat(
            "agent ", to,
            " is not registered in a project of the caller's token"));
      }
    }
    address.recipients = {to};
    return address;
  }
  RoleKeyRef ref;
  ref.wire = *role_wire;
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ref);
  if (!key.ok()) return WithMetadata(key.status(), "field", "to");
  if (!input.scope.Allows(key->key.project_id)) {
    return OutOfScope(absl::StrCat("the role's project ", key->key.project_id,
                                   " is outside the caller's token"));
  }
  address.role = *key;
  address.default_topic = "role";
  address.handovers_seen = Handovers(key->wire);  // before the role's row
  address.holder_role = LiveHolder(key->wire, now_ms);
  // A role message is for the role's holders other than its author: an
  // author holding the role leaves it as backlog for the next holder.
  if (address.holder_role.has_value() &&
      *address.holder_role->holder_agent_id != input.from_agent_id)
    address.recipients = {*address.holder_role->holder_agent_id};
  return address;
}

absl::StatusOr<Messaging::Prepared> Messaging::Prepare(
    const PublishInput& input) {
  const int64_t now_ms = UnixMillis(clock_->Now());
  if (input.to.empty()) {
    return Invalid("MESSAGE_ADDRESS_INVALID", "to", "to is required");
  }
  absl::StatusOr<MessageRecord> message = Validate(input, now_ms);
  if (!message.ok()) return message.status();
  absl::StatusOr<Address> address =
      Resolve(input, message->payload_json, now_ms);
  if (!address.ok()) return address.status();
  Prepared p;
  p.now_ms = now_ms;
  p.message = std::move(*message);
  MessageRecord& m = p.message;
  m.id = ids_->Next();
  if (m.correlation_id.empty()) m.correlation_id = ids_->Next();
  if (m.trace_id.empty()) m.trace_id = ids_->Next();
  if (m.topic.empty()) m.topic = address->default_topic;
  if (address->role.has_value()) {
    m.to_agent = RoleTopic(address->role->wire);
    m.role_key_wire = address->role->wire;
  }
  p.recipients = address->recipients;
  std::sort(p.recipients.begin(), p.recipients.end());
  p.recipients.erase(std::unique(p.recipients.begin(), p.recipients.end()),
                     p.recipients.end());
  // Recipients with a stream get the message pushed right after the write,
  // which records their first delivery attempt in the same transaction.
  for (const std::string& agent : p.recipients) {
    if (presence_->StreamAttached(agent)) p.deliver_to.push_back(agent);
  }
  p.address = std::move(*address);
  return p;
}

bool Messaging::NeedsEnsure(const Prepared& p) const {
  return p.address.role.has_value() && !p.address.holder_role.has_value() &&
         activator_ != nullptr;
}

absl::StatusOr<PublishResult> Messaging::Publish(const PublishInput& input) {
  absl::StatusOr<Prepared> p = Prepare(input);
  if (!p.ok()) return p.status();
  return PublishPrepared(std::move(*p));
}

absl::StatusOr<PublishResult> Messaging::PublishPrepared(Prepared p) {
  if (before_write_for_testing_) before_write_for_testing_();
  absl::StatusOr<std::vector<InboxRecord>> delivered =
      store_->InsertMessageDelivering(p.message, p.recipients, p.deliver_to,
                                      p.now_ms, config_.max_pending_per_inbox);
  return Published(std::move(p), std::move(delivered));
}

void Messaging::PublishAsync(const PublishInput& input,
                             storage::Callback<PublishResult> done,
                             const BlockingExecutor& blocking) {
  absl::StatusOr<Prepared> p = Prepare(input);
  if (!p.ok()) {
    std::move(done)(p.status());
    return;
  }
  auto prepared = std::make_shared<Prepared>(std::move(*p));
  if (NeedsEnsure(*prepared)) {
    // EnsureRole writes and waits: not on a store thread.
    auto callback =
        std::make_shared<storage::Callback<PublishResult>>(std::move(done));
    blocking([this, prepared, callback] {
      std::move (*callback)(PublishPrepared(std::move(*prepared)));
    });
    return;
  }
  store_->InsertMessageDeliveringAsync(
      prepared->message, prepared->recipients, prepared->deliver_to,
      prepared->now_ms, config_.max_pending_per_inbox,
      [this, prepared, blocking, done = std::move(done)](
          absl::StatusOr<std::vector<InboxRecord>> delivered) mutable {
        std::move(done)(
            Published(std::move(*prepared), std::move(delivered), blocking));
      });
}

absl::StatusOr<PublishResult> Messaging::Published(
    Prepared p, absl::StatusOr<std::vector<InboxRecord>> delivered,
    const BlockingExecutor& blocking) {
  if (!delivered.ok()) {
    // A full inbox (the store decides it inside the write) names the field.
    // So does a closed lead scope (also decided inside the write).
    if (ReasonOf(delivered.status()) == "LIMIT_EXCEEDED" ||
        ReasonOf(delivered.status()) == storage::kScopeClosedReason)
      return WithMetadata(delivered.status(), "field", "to");
    return delivered.status();
  }
  const MessageRecord& m = p.message;
  PublishResult result;
  result.message = m;
  result.recipient_count = static_cast<int>(p.recipients.size());
  result.role = p.address.role;
  if (m.type == "response") WakeAskers(m);
  if (!delivered->empty()) result.message.status = MessageStatus::kDelivered;
  for (InboxRecord& inbox : *delivered) {
    MessageDelivery delivery;
    delivery.message = m;
    delivery.message.status = MessageStatus::kDelivered;
    if (p.address.holder_role.has_value() && m.role_key_wire.has_value()) {
      delivery.role_epoch = p.address.holder_role->epoch;
      delivery.activation_id = p.address.holder_role->activation_id;
    }
    const std::string agent_id = inbox.agent_id;
    delivery.inbox = std::move(inbox);
    // A push that fails leaves the row pending with its attempt counted:
    // the agent gets it when it attaches again.
    presence_->DeliverMessage(agent_id, delivery);
  }
  PushToLateAttachers(p, blocking);
  if (events_ != nullptr) {
    events_->Publish(MessagesChanged{{m.id}, p.recipients, m.role_key_wire});
  }
  if (NeedsEnsure(p)) {
    EnsureRequest ensure;
    ensure.role.wire = p.address.role->wire;
    ensure.trigger = "publish_no_holder";
    ensure.cause_id = m.id;
    // The message is durable backlog whatever the ensure does.
    absl::StatusOr<EnsureReceipt> receipt = activator_->Ensure(ensure);
    if (receipt.ok()) result.activation = *receipt;
  }
  // An activation that began its hand-over after this publish read the role
  // (the ACK landed in between, or the role failed over to a new holder)
  // may have read the backlog before this write committed: the message then
  // goes to whoever holds the role now.
  if (m.role_key_wire.has_value() &&
      Handovers(*m.role_key_wire) != p.address.handovers_seen) {
    // It writes (AddRecipient): never on the writer's completion thread.
    RunMayBlock(blocking, [this, m] { HandOverIfActive(m); });
  }
  return result;
}

uint64_t Messaging::Handovers(const std::string& wire) {
  absl::MutexLock lock(&handover_mu_);
  auto it = handovers_.find(wire);
  return it == handovers_.end() ? 0 : it->second;
}

void Messaging::PushToLateAttachers(const Prepared& p,
                                    const BlockingExecutor& blocking) {
  // A recipient without a stream when this publish looked may have attached
  // since; its attach-time push (PushPending) read the pending messages
  // either after this write committed, and pushed this one, or before, and
  // missed it. Both attached now: push it (a duplicate in the first case,
  // at least once; never a message left until the next attach).
  // deliver_to is the attached subsequence of the sorted recipients: one
  // walk over both, however large the fan-out.
  std::vector<std::string> late;
  std::vector<std::string> unpushed;
  auto pushed = p.deliver_to.begin();
  for (const std::string& agent : p.recipients) {
    if (pushed != p.deliver_to.end() && *pushed == agent) {
      ++pushed;
      continue;
    }
    if (presence_->StreamAttached(agent)) {
      late.push_back(agent);
    } else {
      unpushed.push_back(agent);
    }
  }
  // Their streams, if any, are on other hubs: those push them.
  if (!unpushed.empty()) PublishTo(events_, MessagesUnpushed{unpushed});
  if (late.empty()) return;
  auto push = [this, m = p.message, role = p.address.holder_role,
               late = std::move(late)] {
    for (const std::string& agent : late) Push(m, agent, role);
  };
  // Push writes (MarkDeliveredIfUnacked): never on the writer's completion
  // thread.
  RunMayBlock(blocking, std::move(push));
}

void Messaging::HandOverIfActive(const MessageRecord& m) {
  // Whoever is live now takes it; the inbox row is added only if absent,
  // so a hand-over (or a holder) that had it already gets no second push.
  const std::optional<RoleRecord> holder =
      LiveHolder(*m.role_key_wire, UnixMillis(clock_->Now()));
  if (!holder.has_value()) return;  // the next activation hands it over
  if (*holder->holder_agent_id == m.from_agent) return;  // not to its author
  absl::StatusOr<bool> added =
      store_->AddRecipient(m.id, *holder->holder_agent_id);
  if (added.ok() && *added) {
    if (events_ != nullptr) {
      events_->Publish(
          MessagesChanged{{m.id}, {*holder->holder_agent_id}, m.role_key_wire});
    }
    Push(m, *holder->holder_agent_id, holder);
  }
}

namespace {

// The push of `message` whose delivery attempt `inbox` recorded, under the
// role `role` held when it is role-addressed.
MessageDelivery DeliveryOf(const MessageRecord& message, InboxRecord inbox,
                           const std::optional<RoleRecord>& role) {
  MessageDelivery delivery;
  delivery.message = message;
  delivery.message.status = MessageStatus::kDelivered;
  delivery.inbox = std::move(inbox);
  if (role.has_value() && message.role_key_wire.has_value()) {
    delivery.role_epoch = role->epoch;
    delivery.activation_id = role->activation_id;
  }
  return delivery;
}

}  // namespace

Messaging::PushOutcome Messaging::Push(const MessageRecord& message,
                                       const std::string& agent_id,
                                       const std::optional<RoleRecord>& role) {
  // Mark first, so the pushed copy carries its attempt; if the push then
  // fails the row merely counts one attempt more (it stays pending). The
  // mark is fenced: what the agent acknowledged since the caller read it is
  // not marked, and so not pushed.
  if (!presence_->StreamAttached(agent_id)) return PushOutcome::kNotPushed;
  absl::StatusOr<std::optional<InboxRecord>> inbox =
      store_->MarkDeliveredIfUnacked(message.id, agent_id,
                                     UnixMillis(clock_->Now()));
  if (!inbox.ok()) return PushOutcome::kNotPushed;
  if (!inbox->has_value()) return PushOutcome::kSettled;
  if (events_ != nullptr) {
    events_->Publish(MessagesChanged{{message.id}, {}, std::nullopt});
  }
  return presence_->DeliverMessage(
             agent_id, DeliveryOf(message, **std::move(inbox), role))
             ? PushOutcome::kPushed
             : PushOutcome::kNotPushed;
}

int64_t Messaging::PushRoutedMany(
    const std::vector<storage::UndeliveredMessage>& waiting) {
  std::vector<storage::MessageStore::Delivery> marks;
  for (const storage::UndeliveredMessage& w : waiting) {
    if (presence_->StreamAttached(w.agent_id)) {
      marks.push_back({w.message.id, w.agent_id});
    }
  }
  if (marks.empty()) return 0;
  const int64_t now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<std::vector<InboxRecord>> marked =
      store_->MarkDeliveredManyIfUnacked(marks, now_ms);
  if (!marked.ok()) return 0;  // all stay pending: the next poll retries
  if (events_ != nullptr && !marked->empty()) {
    MessagesChanged change;
    for (const InboxRecord& row : *marked) {
      change.message_ids.push_back(row.message_id);
    }
    events_->Publish(change);
  }
  absl::flat_hash_map<std::pair<std::string, std::string>, InboxRecord>
      by_delivery;
  for (InboxRecord& row : *marked) {
    std::pair<std::string, std::string> key(row.message_id, row.agent_id);
    by_delivery.emplace(std::move(key), std::move(row));
  }
  // One look at each role's holder for the batch.
  absl::flat_hash_map<std::string, std::optional<RoleRecord>> holders;
  int64_t pushed = 0;
  for (const storage::UndeliveredMessage& w : waiting) {
    auto row = by_delivery.find(std::make_pair(w.message.id, w.agent_id));
    if (row == by_delivery.end()) continue;
    std::optional<RoleRecord> role;
    if (w.message.role_key_wire.has_value()) {
      auto holder = holders.find(*w.message.role_key_wire);
      if (holder == holders.end()) {
        holder = holders
                     .emplace(*w.message.role_key_wire,
                              LiveHolder(*w.message.role_key_wire, now_ms))
                     .first;
      }
      role = holder->second;
    }
    if (presence_->DeliverMessage(w.agent_id,
                                  DeliveryOf(w.message, row->second, role))) {
      ++pushed;
    }
  }
  return pushed;
}

absl::Status Messaging::CheckAgent(const std::string& agent_id,
                                   std::optional<int64_t> generation) {
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok())
    return WithMetadata(s, "field", "agent_id");
  absl::StatusOr<AgentView> agent = presence_->Get(agent_id);
  if (!agent.ok()) return agent.status();
  if (generation.has_value() &&
      *generation != agent->record.presence_generation) {
    return FailedPreconditionError(
        "STALE_PRESENCE_OWNER",
        absl::StrCat("presence_generation ", *generation, " is not current (",
                     agent->record.presence_generation, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Messaging::CheckAck(
    const std::string& agent_id, const std::vector<std::string>& message_ids) {
  if (message_ids.empty()) {
    return Invalid("REQUEST_INVALID", "message_ids",
                   "message_ids must not be empty");
  }
  if (message_ids.size() > static_cast<size_t>(config_.max_ids_per_ack)) {
    return WithMetadata(
        LimitExceededError(
            "max_ids_per_ack", config_.max_ids_per_ack,
            absl::StrCat("at most ", config_.max_ids_per_ack, " message ids")),
        "field", "message_ids");
  }
  for (const std::string& id : message_ids) {
    if (id.empty() || id.size() > 64) {
      return Invalid("MESSAGE_ID_INVALID", "message_ids",
                     "each message id must be 1..64 characters");
    }
  }
  // The agent and its generation are checked by the store, in the acks'
  // own transaction.
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok())
    return WithMetadata(s, "field", "agent_id");
  std::vector<std::string> distinct;
  std::set<std::string> seen;
  for (const std::string& id : message_ids) {
    if (seen.insert(id).second) distinct.push_back(id);
  }
  return distinct;
}

namespace {

AckResult ToAckResult(const std::vector<std::string>& ids,
                      const std::vector<bool>& acked) {
  AckResult result;
  for (size_t i = 0; i < ids.size(); ++i) {
    (i < acked.size() && acked[i] ? result.acked : result.ignored)
        .push_back(ids[i]);
  }
  return result;
}

}  // namespace

absl::StatusOr<AckResult> Messaging::Ack(
    const std::string& agent_id, const std::vector<std::string>& message_ids,
    std::optional<int64_t> presence_generation) {
  absl::StatusOr<std::vector<std::string>> ids =
      CheckAck(agent_id, message_ids);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::vector<bool>> acked = store_->AckMessages(
      agent_id, *ids, UnixMillis(clock_->Now()), presence_generation);
  if (!acked.ok()) return acked.status();
  if (events_ != nullptr) {
    events_->Publish(MessagesChanged{*ids, {agent_id}, std::nullopt});
  }
  return ToAckResult(*ids, *acked);
}

void Messaging::AckAsync(const std::string& agent_id,
                         const std::vector<std::string>& message_ids,
                         std::optional<int64_t> presence_generation,
                         storage::Callback<AckResult> done) {
  absl::StatusOr<std::vector<std::string>> ids =
      CheckAck(agent_id, message_ids);
  if (!ids.ok()) {
    std::move(done)(ids.status());
    return;
  }
  acks_.Ack(agent_id, std::move(*ids), presence_generation,
            [done = std::move(done)](
                std::vector<std::string> distinct,
                absl::StatusOr<std::vector<bool>> acked) mutable {
              if (!acked.ok()) {
                std::move(done)(acked.status());
                return;
              }
              std::move(done)(ToAckResult(distinct, *acked));
            });
}

int Messaging::PushPending(const std::string& agent_id,
                           std::optional<int64_t> created_up_to_ms) {
  const int64_t now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<std::vector<MessageRecord>> pending =
      store_->ListPendingForAgent(agent_id, now_ms,
                                  messaging_internal::kMaxScan);
  if (!pending.ok()) return 0;
  int pushed = 0;
  for (const MessageRecord& m : *pending) {
    if (created_up_to_ms.has_value() && m.created_at_ms > *created_up_to_ms)
      continue;
    std::optional<RoleRecord> role;
    if (m.role_key_wire.has_value())
      role = LiveHolder(*m.role_key_wire, now_ms);
    const PushOutcome outcome = Push(m, agent_id, role);
    if (outcome == PushOutcome::kNotPushed) break;
    if (outcome == PushOutcome::kPushed) ++pushed;
  }
  return pushed;
}

BacklogHandover Messaging::HandOverBacklog(const RoleRecord& active) {
  BacklogHandover handover;
  if (!active.holder_agent_id.has_value()) return handover;
  {
    // Counted before the backlog is read: a publish that read the role
    // before this count and commits after the read below sees the change.
    absl::MutexLock lock(&handover_mu_);
    ++handovers_[active.role_key_wire];
  }
  const std::string& holder = *active.holder_agent_id;
  const int64_t now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<std::vector<MessageRecord>> backlog =
      store_->ListPendingRoleMessages(active.role_key_wire, now_ms);
  if (!backlog.ok()) return handover;
  // Durable first: once the holder is a recipient the message is in its
  // inbox (ListPending, re-attach) even if a push fails.
  std::vector<MessageRecord> handed;
  for (MessageRecord& m : *backlog) {
    if (m.from_agent == holder) continue;  // stays for a holder not its author
    if (!store_->AddRecipient(m.id, holder).ok()) break;
    handed.push_back(std::move(m));
  }
  handover.handed_over = static_cast<int64_t>(handed.size());
  if (handed.empty()) return handover;
  if (events_ != nullptr) {
    MessagesChanged change;
    for (const MessageRecord& m : handed) change.message_ids.push_back(m.id);
    change.agent_ids = {holder};
    change.role_wire = active.role_key_wire;
    events_->Publish(change);
  }
  handover.push = [this, active, handed = std::move(handed)] {
    for (const MessageRecord& m : handed) {
      if (Push(m, *active.holder_agent_id, active) == PushOutcome::kNotPushed)
        break;
    }
  };
  return handover;
}

int64_t Messaging::OnRoleActive(const RoleRecord& active) {
  BacklogHandover handover = HandOverBacklog(active);
  if (handover.push) handover.push();
  return handover.handed_over;
}

bool Messaging::HasBacklog(const std::string& wire) {
  absl::StatusOr<std::vector<MessageRecord>> backlog =
      store_->ListPendingRoleMessages(wire, UnixMillis(clock_->Now()));
  return backlog.ok() && !backlog->empty();
}

}  // namespace hub
