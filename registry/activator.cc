#include "registry/activator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "registry/role_transitions.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr char kAckSchema[] = "tfx.role-activation-ack.v1";
constexpr char kActivationSchema[] = "tfx.role-activation.v1";

const std::set<std::string>& KnownTriggers() {
  static const auto* triggers = new std::set<std::string>{
      "session_start",    "publish_no_holder", "lease_expired",
      "restart_recovery", "hygiene_changed",   "charter_issued",
      "manual",           "holder_offline",    "candidate_changed"};
  return *triggers;
}

RoleKeyRef WireRef(const std::string& wire) {
  RoleKeyRef ref;
  ref.wire = wire;
  return ref;
}

// A rejected ACK: §5.2's stale_ack keeps the state and answers with its
// result code (STALE_EPOCH), with the row's fence in metadata.
absl::Status StaleAck(const RoleRecord& row, absl::string_view why) {
  absl::StatusOr<RoleTransition> stale =
      ReduceRoleTransition(row.state, RoleTrigger::kStaleAck);
  const std::string code = stale.ok() && stale->result_code.has_value()
                               ? *stale->result_code
                               : std::string("STALE_EPOCH");
  absl::Status s = FailedPreconditionError(
      code, absl::StrCat("activation is not current: ", why));
  s = WithMetadata(std::move(s), "role_key_wire", row.role_key_wire);
  s = WithMetadata(std::move(s), "epoch", absl::StrCat(row.epoch));
  s = WithMetadata(std::move(s), "activation_seq",
                   absl::StrCat(row.activation_seq));
  s = WithMetadata(std::move(s), "activation_id",
                   row.activation_id.value_or(""));
  return WithMetadata(std::move(s), "state", RoleStateName(row.state));
}

// Whether the row holds an authority a change must fence (epoch + 1): a
// holder, an activation, or a state that implies one.
bool HoldsAuthority(const RoleRecord& row) {
  return row.holder_agent_id.has_value() || row.activation_id.has_value() ||
         row.state == RoleState::kActive ||
         row.state == RoleState::kElectedProbing;
}

// A fence lost while an ensure decided means someone else moved the role
// on: ROLE_RESERVATION_CONFLICT. A closed scope and a transition the kernel
// refused keep their own reasons.
absl::Status ReservationConflict(const std::string& wire,
                                 const absl::Status& s) {
  const std::string reason = ReasonOf(s);
  if (reason == storage::kScopeClosedReason ||
      reason == "INVALID_ROLE_TRANSITION") {
    return s;
  }
  if (s.code() == absl::StatusCode::kAborted ||
      s.code() == absl::StatusCode::kFailedPrecondition) {
    return ReasonError(
        absl::StatusCode::kAborted, "ROLE_RESERVATION_CONFLICT",
        absl::StrCat("role ", wire, " changed while it was being reserved"));
  }
  return s;
}

EnsureReceipt BaseReceipt(const EnsureRequest& request) {
  EnsureReceipt receipt;
  receipt.accepted = true;
  receipt.trigger = request.trigger;
  receipt.cause_id = request.cause_id;
  return receipt;
}

// The receipt for a closed lead scope: not accepted, no row (state
// unspecified, epoch 0), nothing written.
EnsureReceipt ClosedScopeReceipt(const ResolvedRoleKey& key,
                                 const EnsureRequest& request) {
  EnsureReceipt receipt;
  receipt.accepted = false;
  receipt.disposition = EnsureDisposition::kScopeClosed;
  receipt.trigger = request.trigger;
  receipt.cause_id = request.cause_id;
  receipt.role.role_key_wire = key.wire;
  receipt.role.project_id = key.key.project_id;
  receipt.role.role_kind = std::string(RoleKindName(key.key.kind));
  receipt.role.scope_id = key.key.scope_id;
  receipt.no_row = true;
  return receipt;
}

// Locators as hub stored them (validated at registration): read back
// leniently; the usability filter decides what the activator may use.
std::vector<TransportLocator> StoredLocators(const std::string& json_text) {
  std::vector<TransportLocator> out;
  nlohmann::json value = nlohmann::json::parse(json_text, nullptr, false);
  if (!value.is_array()) return out;
  for (const auto& v : value) {
    if (!v.is_object()) continue;
    TransportLocator l;
    l.schema_version = v.value("schema_version", "");
    l.transport_id = v.value("transport_id", "");
    l.kind = v.value("kind", "");
    l.host_id = v.value("host_id", "");
    if (v.contains("capabilities") && v["capabilities"].is_array()) {
      for (const auto& c : v["capabilities"]) {
        if (c.is_string()) l.capabilities.push_back(c.get<std::string>());
      }
    }
    if (v.contains("priority") && v["priority"].is_number_integer()) {
      l.priority = v["priority"].get<int64_t>();
    }
    if (v.contains("expires_at_ms") && v["expires_at_ms"].is_number_integer()) {
      l.expires_at_ms = v["expires_at_ms"].get<int64_t>();
    }
    const nlohmann::json loc = v.contains("locator") && v["locator"].is_object()
                                   ? v["locator"]
                                   : nlohmann::json::object();
    if (l.kind == kKindTmux) {
      l.locator = TmuxLocator{loc.value("session_name", ""),
                              loc.value("mux_server_id", "")};
    } else {
      ClaudeUdsLocator uds;
      if (loc.contains("session_id") && loc["session_id"].is_string()) {
        uds.session_id = loc["session_id"].get<std::string>();
      }
      if (loc.contains("short") && loc["short"].is_string()) {
        uds.short_id = loc["short"].get<std::string>();
      }
      uds.bridge_id = loc.value("bridge_id", "");
      l.locator = uds;
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<std::string> JsonStrings(const std::string& json_text) {
  std::vector<std::string> out;
  nlohmann::json value = nlohmann::json::parse(json_text, nullptr, false);
  if (!value.is_array()) return out;
  for (const auto& v : value) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

absl::string_view EnsureDispositionName(EnsureDisposition disposition) {
  switch (disposition) {
    case EnsureDisposition::kStarted:
      return "started";
    case EnsureDisposition::kJoined:
      return "joined";
    case EnsureDisposition::kAlreadyActive:
      return "already_active";
    case EnsureDisposition::kManagerDisabled:
      return "manager_disabled";
    case EnsureDisposition::kScopeClosed:
      return "scope_closed";
    case EnsureDisposition::kNoCandidate:
      return "no_candidate";
  }
  return "unknown";
}

std::string ActivationEnvelopeJson(const ActivationEnvelope& e) {
  nlohmann::ordered_json key;
  key["project_id"] = e.role_key.project_id;
  key["role_kind"] = std::string(RoleKindName(e.role_key.kind));
  if (e.role_key.kind == RoleKind::kLead) key["scope_id"] = e.role_key.scope_id;
  nlohmann::ordered_json j;
  j["schema"] = kActivationSchema;
  j["role_key"] = key;
  j["role_key_wire"] = e.role_key_wire;
  j["epoch"] = e.epoch;
  j["activation_seq"] = e.activation_seq;
  j["activation_id"] = e.activation_id;
  j["charter_version"] = e.charter_version;
  j["holder_cli"] = e.holder_cli;
  j["holder_agent_id"] = e.holder_agent_id;
  j["ack_deadline_ms"] = e.ack_deadline_ms;
  return j.dump();
}

Activator::Activator(RoleRegistry* roles, PresenceRegistry* presence,
                     StreamReach* streams, const Clock* clock,
                     ActivatorOptions options)
    : roles_(roles),
      presence_(presence),
      streams_(streams),
      clock_(clock),
      options_(std::move(options)) {
  if (!options_.executor) {
    options_.executor = [](std::function<void()> work) { work(); };
  }
}

Activator::~Activator() = default;

void Activator::AddAdapter(std::unique_ptr<TransportAdapter> adapter) {
  absl::MutexLock lock(&mu_);
  const std::string kind(adapter->kind());
  adapters_[kind] = std::move(adapter);
}

std::string Activator::CharterVersion(RoleKind kind) const {
  return kind == RoleKind::kCto ? options_.config.cto_charter_version
                                : options_.config.lead_charter_version;
}

bool Activator::ManagerEnabled(RoleKind kind) const {
  return kind == RoleKind::kCto ? options_.cto_manager_enabled
                                : options_.lead_manager_enabled;
}

void Activator::Land(const std::string& wire) {
  std::optional<std::string> recheck;
  {
    absl::MutexLock lock(&mu_);
    flying_.erase(wire);
    auto it = recheck_.find(wire);
    if (it != recheck_.end()) {
      recheck = std::move(it->second);
      recheck_.erase(it);
    }
  }
  // Off this thread: Land runs inside flights and ensures, and the recheck
  // may ensure (and so fly) again.
  if (recheck.has_value()) {
    options_.executor([this, wire, cause = *std::move(recheck)] {
      ReconsiderRole(wire, cause);
    });
  }
}

absl::StatusOr<EnsureReceipt> Activator::Ensure(const EnsureRequest& request) {
  if (KnownTriggers().count(request.trigger) == 0 || request.cause_id.empty()) {
    return InvalidArgumentError(
        "ENSURE_ROLE_REQUEST_INVALID",
        "an ensure needs a known trigger and a non-empty cause_id");
  }
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(request.role);
  if (!key.ok()) return key.status();
  bool joined = false;
  {
    absl::MutexLock lock(&mu_);
    joined = !flying_.insert(key->wire).second;
    // The flight this joins may decide without the candidate this event
    // is about: look again when it lands.
    if (joined && request.trigger == "candidate_changed") {
      recheck_.emplace(key->wire, request.cause_id);
    }
  }
  if (joined) {
    EnsureReceipt receipt;
    receipt.accepted = true;
    receipt.disposition = EnsureDisposition::kJoined;
    receipt.trigger = request.trigger;
    receipt.cause_id = request.cause_id;
    absl::StatusOr<RoleRecord> row = roles_->Get(WireRef(key->wire));
    if (row.ok()) receipt.role = *row;
    receipt.no_row = !row.ok();
    return receipt;
  }
  absl::StatusOr<EnsureReceipt> receipt = Decide(*key, request);
  // A scope closed while the decision wrote: the store refused the write.
  if (ReasonOf(receipt.status()) == storage::kScopeClosedReason) {
    receipt = ClosedScopeReceipt(*key, request);
  }
  // Another writer (another hub ensuring the same role at once, with hubs
  // sharing the database) moved the role on while this decision wrote: when
  // it is now being activated or active, this ensure joins that flight.
  if (ReasonOf(receipt.status()) == "ROLE_RESERVATION_CONFLICT") {
    absl::StatusOr<RoleRecord> now_row = roles_->Get(WireRef(key->wire));
    if (now_row.ok() && (now_row->state == RoleState::kElectedProbing ||
                         now_row->state == RoleState::kActive)) {
      EnsureReceipt joined_flight = BaseReceipt(request);
      joined_flight.disposition = EnsureDisposition::kJoined;
      joined_flight.role = *now_row;
      receipt = joined_flight;
    }
  }
  // A started flight lands itself; every other outcome lands here.
  if (!receipt.ok() || receipt->disposition != EnsureDisposition::kStarted) {
    Land(key->wire);
  }
  return receipt;
}

absl::StatusOr<ScopeCloseOutcome> Activator::CloseScope(
    const ScopeCloseInput& input) {
  absl::StatusOr<ScopeCloseOutcome> closed = roles_->CloseScope(input);
  if (!closed.ok()) return closed.status();
  {
    // Its flight, if any, ends at its next gate (the row is gone); until
    // then it must not make later ensures "join" it.
    absl::MutexLock lock(&mu_);
    flying_.erase(closed->key.wire);
  }
  if (!closed->result.already_closed && options_.on_scope_closed) {
    options_.on_scope_closed(closed->result);
  }
  return closed;
}

absl::StatusOr<EnsureReceipt> Activator::Decide(const ResolvedRoleKey& key,
                                                const EnsureRequest& request) {
  const int64_t now = UnixMillis(clock_->Now());
  // A closed lead scope has no row and gets none: nothing is written.
  absl::StatusOr<bool> closed = roles_->ScopeClosed(key);
  if (!closed.ok()) return closed.status();
  if (*closed) {
    EnsureReceipt receipt = ClosedScopeReceipt(key, request);
    if (!ManagerEnabled(key.key.kind)) {
      // §5.8's order: a disabled manager answers first (there is no row,
      // so no authority to fence).
      receipt.disposition = EnsureDisposition::kManagerDisabled;
      receipt.role.blocked_reason = "manager_disabled";
    }
    return receipt;
  }
  absl::StatusOr<RoleRecord> row = roles_->Get(WireRef(key.wire));
  if (!row.ok() && row.status().code() == absl::StatusCode::kNotFound) {
    // A new row is no transition: it starts electable at epoch 0.
    ReserveInput create;
    create.role = WireRef(key.wire);
    create.patch.state = RoleState::kElectable;
    create.patch.last_reason = "role_created";
    absl::StatusOr<ReserveResult> created = roles_->Reserve(create);
    // Closed since the check above: the store refused inside its write.
    if (ReasonOf(created.status()) == storage::kScopeClosedReason) {
      return ClosedScopeReceipt(key, request);
    }
    if (!created.ok()) return created.status();
    row = created->role;
  }
  if (!row.ok()) return row.status();

  EnsureReceipt receipt = BaseReceipt(request);
  receipt.role = *row;
  if (!ManagerEnabled(key.key.kind)) {
    receipt.accepted = false;
    receipt.disposition = EnsureDisposition::kManagerDisabled;
    if (HoldsAuthority(*row)) {
      absl::StatusOr<RoleRecord> fenced =
          Release(*row, RoleTrigger::kManagerDisabled, "manager_disabled",
                  "manager_disabled");
      if (fenced.ok()) receipt.role = *fenced;
    }
    return receipt;
  }
  const bool holder_live =
      row->holder_agent_id.has_value() &&
      presence_->LiveLease(*row->holder_agent_id, now).has_value();
  // The row the election below starts from: electable, or unreachable with
  // its retry due.
  RoleRecord from = *row;
  if (row->state == RoleState::kActive) {
    if (holder_live) {
      if (row->charter_acked_epoch == row->epoch &&
          row->charter_version == CharterVersion(key.key.kind) &&
          request.trigger != "charter_issued") {
        receipt.disposition = EnsureDisposition::kAlreadyActive;
        return receipt;
      }
      // A new charter (or an ACK of another epoch): the same holder
      // acknowledges again under a new epoch.
      return ReserveHolder(key, *row, *row->holder_agent_id,
                           RoleTrigger::kCharterReissued, request, {});
    }
    absl::StatusOr<RoleRecord> revoked =
        Release(*row, RoleTrigger::kHolderLeaseExpired, "holder_lease_expired",
                std::nullopt);
    if (!revoked.ok()) return ReservationConflict(key.wire, revoked.status());
    from = *revoked;
  } else if (row->state == RoleState::kElectedProbing) {
    if (row->activation_deadline_ms.has_value()) {
      if (*row->activation_deadline_ms > now) {
        receipt.disposition = EnsureDisposition::kJoined;
        return receipt;
      }
      // The ACK did not come in time (the tick may not have seen it yet).
      absl::StatusOr<EnsureReceipt> failed =
          CandidateFailed(key, *row, "ack_timeout", RoleTrigger::kAckTimeout,
                          {}, request.trigger);
      if (!failed.ok()) return ReservationConflict(key.wire, failed.status());
      failed->trigger = request.trigger;
      failed->cause_id = request.cause_id;
      return failed;
    }
    if (holder_live) {
      // A reservation no flight of this hub carries (a restart's re-probe,
      // an operator's ReserveRole): probe its holder; an answer arms the
      // ACK deadline (probe_succeeded).
      receipt.disposition = EnsureDisposition::kStarted;
      options_.executor([this, key, role = *row, trigger = request.trigger] {
        Fly(key, role, {*role.holder_agent_id}, trigger);
      });
      return receipt;
    }
    absl::StatusOr<RoleRecord> revoked =
        Release(*row, RoleTrigger::kHolderLeaseExpired, "holder_lease_expired",
                std::nullopt);
    if (!revoked.ok()) return ReservationConflict(key.wire, revoked.status());
    from = *revoked;
  } else if (row->state == RoleState::kUnreachable ||
             row->state == RoleState::kQuarantined) {
    if (row->next_probe_ms.value_or(0) > now) {
      receipt.disposition = EnsureDisposition::kJoined;  // backoff
      return receipt;
    }
    if (row->state == RoleState::kQuarantined) {
      absl::StatusOr<RoleRecord> restored =
          Release(*row, RoleTrigger::kExclusionExpired, "exclusion_expired",
                  std::nullopt, /*reset_retries=*/true);
      if (!restored.ok()) {
        return ReservationConflict(key.wire, restored.status());
      }
      from = *restored;
    }
  }
  return ReserveNext(key, from, request, request.passed_over);
}

std::vector<CandidateFacts> Activator::Candidates(const ResolvedRoleKey& key) {
  std::vector<CandidateFacts> facts;
  CandidateListInput list;
  list.role = WireRef(key.wire);
  list.page_size = 1000;
  std::set<std::string> kinds;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [kind, adapter] : adapters_) {
      if (disabled_kinds_.count(kind) == 0) kinds.insert(kind);
    }
  }
  const int64_t now = UnixMillis(clock_->Now());
  while (true) {
    absl::StatusOr<CandidatePage> page = roles_->ListCandidates(list);
    if (!page.ok()) break;
    for (const CandidateRecord& c : page->candidates) {
      CandidateFacts f;
      f.agent_id = c.agent_id;
      f.excluded_until_ms = c.excluded_until_ms;
      absl::StatusOr<AgentView> agent = presence_->Get(c.agent_id);
      if (agent.ok()) {
        f.agent_exists = true;
        f.agent_live = presence_->LiveLease(c.agent_id, now).has_value();
        f.agent_project_id = agent->record.project_id;
        f.agent_capabilities = JsonStrings(agent->record.capabilities_json);
        f.stream_attached = streams_->Attached(c.agent_id);
        for (TransportLocator& l :
             StoredLocators(agent->record.transport_locators_json)) {
          if (LocatorUsable(l, now, options_.local_host_id, kinds)) {
            f.usable_locators.push_back(std::move(l));
          }
        }
      }
      facts.push_back(std::move(f));
    }
    if (page->next_page_token.empty()) break;
    list.page_token = page->next_page_token;
  }
  if (streams_->Shared()) {
    // Candidates attached elsewhere are reached through the hub holding
    // them: one read for all of them.
    std::vector<std::string> remote;
    for (const CandidateFacts& f : facts) {
      if (f.agent_exists && f.agent_live && !f.stream_attached) {
        remote.push_back(f.agent_id);
      }
    }
    const std::map<std::string, std::string> elsewhere =
        streams_->HeldElsewhere(remote);
    for (CandidateFacts& f : facts) {
      auto it = elsewhere.find(f.agent_id);
      if (it != elsewhere.end()) f.holder_hub = it->second;
    }
  }
  return facts;
}

absl::StatusOr<EnsureReceipt> Activator::ReserveNext(
    const ResolvedRoleKey& key, const RoleRecord& row,
    const EnsureRequest& request, const std::set<std::string>& tried) {
  const int64_t now = UnixMillis(clock_->Now());
  std::vector<CandidateFacts> facts = Candidates(key);
  std::optional<size_t> pick = FirstEligible(facts, now, key.key.project_id,
                                             RoleKindName(key.key.kind), tried);
  if (!pick.has_value()) {
    EnsureReceipt receipt = BaseReceipt(request);
    receipt.disposition = EnsureDisposition::kNoCandidate;
    receipt.role = row;
    // An unreachable role whose retry is due but has nobody to retry with
    // stays as it is (§5.2 has no row for it); the tick asks again.
    if (row.state == RoleState::kUnreachable) return receipt;
    // Nobody can take it: no authority may remain, and the row says why.
    absl::StatusOr<RoleRecord> blocked =
        Release(row, RoleTrigger::kNoCandidate, "no_candidate", "no_candidate");
    if (!blocked.ok()) return blocked.status();
    receipt.role = *blocked;
    return receipt;
  }
  // From electable an election; from unreachable the retry its backoff
  // waited for.
  const RoleTrigger trigger = row.state == RoleState::kUnreachable
                                  ? RoleTrigger::kRetryDue
                                  : RoleTrigger::kCandidateSelected;
  return ReserveHolder(key, row, facts[*pick].agent_id, trigger, request,
                       tried);
}

absl::StatusOr<EnsureReceipt> Activator::ReserveHolder(
    const ResolvedRoleKey& key, const RoleRecord& row,
    const std::string& holder, RoleTrigger trigger,
    const EnsureRequest& request, const std::set<std::string>& tried) {
  const int64_t now = UnixMillis(clock_->Now());
  absl::StatusOr<AgentView> agent = presence_->Get(holder);
  TransitionInput reserve;
  reserve.from = row;
  reserve.trigger = trigger;
  reserve.write = TransitionWrite::kReserve;
  RolePatchInput& p = reserve.patch;
  p.holder_agent_id = holder;
  if (row.holder_agent_id.has_value() && row.holder_agent_id != holder) {
    p.previous_holder_agent_id = row.holder_agent_id;
  } else {
    p.previous_holder_agent_id = row.previous_holder_agent_id;
  }
  p.activation_deadline_ms =
      now + absl::ToInt64Milliseconds(options_.config.activation_ack_timeout);
  if (agent.ok()) p.holder_lease_expires_ms = agent->record.lease_expires_ms;
  p.charter_version = CharterVersion(key.key.kind);
  p.retry_count = row.retry_count;
  p.last_reason = std::string(RoleTriggerName(trigger));
  // Written: the fields above (and the kernel's state); cleared: the old
  // activation's leftovers. activation_id is left out so the store mints a
  // new one for the holder.
  p.update_mask = {"holder_agent_id",     "previous_holder_agent_id",
                   "activation_deadline", "holder_lease_expires_at",
                   "charter_version",     "charter_acked_epoch",
                   "retry_count",         "next_probe_at",
                   "blocked_reason",      "last_reason"};
  absl::StatusOr<TransitionResult> reserved = roles_->Transition(reserve);
  if (ReasonOf(reserved.status()) == storage::kScopeClosedReason) {
    return ClosedScopeReceipt(key, request);
  }
  if (!reserved.ok()) return ReservationConflict(key.wire, reserved.status());
  EnsureReceipt receipt = BaseReceipt(request);
  receipt.role = reserved->role;
  receipt.disposition = EnsureDisposition::kStarted;
  std::set<std::string> now_tried = tried;
  now_tried.insert(holder);
  options_.executor(
      [this, key, role = reserved->role, now_tried, trigger = request.trigger] {
        Fly(key, role, now_tried, trigger);
      });
  return receipt;
}

bool Activator::Gate(const RoleRecord& reserved) {
  absl::StatusOr<RoleRecord> row = roles_->Get(WireRef(reserved.role_key_wire));
  return row.ok() && row->version == reserved.version &&
         row->epoch == reserved.epoch &&
         row->activation_seq == reserved.activation_seq &&
         row->activation_id == reserved.activation_id;
}

bool Activator::ArmDeadline(RoleKind kind, RoleRecord* reserved) {
  if (reserved->activation_deadline_ms.has_value()) return true;
  TransitionInput arm;
  arm.from = *reserved;
  arm.trigger = RoleTrigger::kProbeSucceeded;
  arm.write = TransitionWrite::kCompareAndSet;
  arm.patch.activation_deadline_ms =
      UnixMillis(clock_->Now()) +
      absl::ToInt64Milliseconds(options_.config.activation_ack_timeout);
  arm.patch.charter_version = CharterVersion(kind);
  arm.patch.last_reason = "probe_succeeded";
  absl::StatusOr<TransitionResult> armed = roles_->Transition(arm);
  if (!armed.ok()) return false;  // someone newer owns the role
  *reserved = armed->role;
  return true;
}

void Activator::Fly(ResolvedRoleKey key, RoleRecord reserved,
                    std::set<std::string> tried, std::string trigger) {
  const std::string holder = reserved.holder_agent_id.value_or("");
  if (streams_->Shared()) {  // ContinueHandedFlights' memory, not needed alone
    absl::MutexLock lock(&mu_);
    flown_[key.wire] = Flown{reserved.activation_id.value_or(""), ++flights_};
  }
  if (HandOverFlight(key, reserved)) return;
  absl::StatusOr<AgentView> agent = presence_->Get(holder);
  // The activation for the reservation as it stands when it is sent.
  auto envelope_of = [&](const RoleRecord& r) {
    ActivationEnvelope envelope;
    envelope.role_key = key.key;
    envelope.role_key_wire = key.wire;
    envelope.epoch = r.epoch;
    envelope.activation_seq = r.activation_seq;
    envelope.activation_id = r.activation_id.value_or("");
    envelope.charter_version = r.charter_version.value_or("");
    envelope.holder_agent_id = holder;
    envelope.ack_deadline_ms = r.activation_deadline_ms.value_or(0);
    if (agent.ok()) envelope.holder_cli = agent->record.cli;
    return envelope;
  };
  // Ends the flight unless a failover started a new one (which lands
  // itself).
  auto fail = [&](const std::string& code, RoleTrigger failure) {
    absl::StatusOr<EnsureReceipt> next = CandidateFailed(
        key, reserved, code, failure, std::move(tried), trigger);
    if (!next.ok() || next->disposition != EnsureDisposition::kStarted) {
      Land(key.wire);
    }
  };

  // The failure recorded when no way works: the last real failure, or
  // adapter_unavailable when that is all the locators gave (it does not
  // count against the candidate), and whether it was a probe or a wake.
  std::string code;
  RoleTrigger failure = RoleTrigger::kProbeFailed;
  // The presence stream first: probe = a RoleProbe event the agent answers
  // within the probe timeout (an attached but hung agent does not), wake =
  // the activation event.
  if (streams_->Attached(holder)) {
    if (!Gate(reserved)) return Land(key.wire);
    RoleProbeEnvelope probe;
    probe.role_key = key.key;
    probe.role_key_wire = key.wire;
    probe.epoch = reserved.epoch;
    probe.activation_id = reserved.activation_id.value_or("");
    switch (streams_->Probe(holder, probe, options_.config.probe_timeout)) {
      case StreamProbeResult::kReady:
        if (!Gate(reserved) || !ArmDeadline(key.key.kind, &reserved)) {
          return Land(key.wire);
        }
        if (streams_->Deliver(holder, envelope_of(reserved))) {
          return Land(key.wire);
        }
        code = std::string(kProbeTransportError);  // the stream just ended
        failure = RoleTrigger::kWakeFailed;
        break;
      case StreamProbeResult::kTimeout:
        code = std::string(kProbeTimeout);
        break;
      case StreamProbeResult::kNotReady:
      case StreamProbeResult::kNotAttached:
        code = std::string(kProbeTargetNotFound);
        break;
    }
  }
  const int64_t now = UnixMillis(clock_->Now());
  std::set<std::string> kinds;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [kind, adapter] : adapters_) {
      if (disabled_kinds_.count(kind) == 0) kinds.insert(kind);
    }
  }
  const std::vector<TransportLocator> locators =
      agent.ok() ? StoredLocators(agent->record.transport_locators_json)
                 : std::vector<TransportLocator>();
  for (const TransportLocator& locator : locators) {
    if (!LocatorUsable(locator, now, options_.local_host_id, kinds)) continue;
    TransportAdapter* adapter = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (disabled_kinds_.count(locator.kind) > 0) continue;
      adapter = adapters_[locator.kind].get();
    }
    if (!Gate(reserved)) return Land(key.wire);
    TransportResult probe =
        adapter->Probe(locator, options_.config.probe_timeout);
    if (probe.code == kProbeAdapterUnavailable) {
      absl::MutexLock lock(&mu_);
      disabled_kinds_.insert(locator.kind);  // only this kind, not the agent
      if (code.empty()) code = std::string(kProbeAdapterUnavailable);
      continue;
    }
    if (!probe.ok()) {
      code = probe.code;
      failure = RoleTrigger::kProbeFailed;
      continue;
    }
    if (!Gate(reserved) || !ArmDeadline(key.key.kind, &reserved)) {
      return Land(key.wire);
    }
    TransportResult wake =
        adapter->Wake(locator, ActivationEnvelopeJson(envelope_of(reserved)),
                      options_.config.probe_timeout);
    if (wake.ok()) {
      ProbeReportInput ok;
      ok.role = WireRef(key.wire);
      ok.agent_id = holder;
      ok.code = "ok";
      ok.transport_id = locator.transport_id;
      (void)roles_->ReportProbe(ok);
      return Land(key.wire);  // awaiting the ACK
    }
    code = wake.code;
    failure = RoleTrigger::kWakeFailed;
  }
  if (code.empty()) code = std::string(kProbeTargetNotFound);
  fail(code, failure);
}

absl::StatusOr<EnsureReceipt> Activator::CandidateFailed(
    const ResolvedRoleKey& key, const RoleRecord& reserved,
    const std::string& code, RoleTrigger failure, std::set<std::string> tried,
    const std::string& trigger) {
  const std::string holder = reserved.holder_agent_id.value_or("");
  ProbeReportInput report;
  report.role = WireRef(key.wire);
  report.agent_id = holder;
  report.code = code;
  absl::StatusOr<CandidateRecord> candidate = roles_->ReportProbe(report);
  // §5.2 exclude_failed_candidate: probe_failed, wake_failed or ack_timeout
  // -> unreachable.
  TransitionInput exclude;
  exclude.from = reserved;
  exclude.trigger = failure;
  exclude.write = TransitionWrite::kCompareAndSet;
  RolePatchInput& p = exclude.patch;
  p.previous_holder_agent_id = holder;
  p.retry_count = reserved.retry_count + 1;
  if (candidate.ok()) p.next_probe_ms = candidate->excluded_until_ms;
  p.last_reason = code;
  p.update_mask = {"holder_agent_id",
                   "previous_holder_agent_id",
                   "activation_id",
                   "activation_deadline",
                   "holder_lease_expires_at",
                   "charter_acked_epoch",
                   "retry_count",
                   "next_probe_at",
                   "last_reason"};
  absl::StatusOr<TransitionResult> unreachable = roles_->Transition(exclude);
  // Someone newer owns the role.
  if (!unreachable.ok()) return unreachable.status();
  EnsureRequest again;
  again.role = WireRef(key.wire);
  again.trigger = trigger;
  again.cause_id =
      absl::StrCat("failover:", key.wire, ":", unreachable->role.epoch);
  std::vector<CandidateFacts> facts = Candidates(key);
  if (FirstEligible(facts, UnixMillis(clock_->Now()), key.key.project_id,
                    RoleKindName(key.key.kind), tried)
          .has_value()) {
    // Fail over: §5.2 releases the role (alternate_candidate_available ->
    // electable), then elects the next candidate with a new reservation.
    absl::StatusOr<RoleRecord> released =
        Release(unreachable->role, RoleTrigger::kAlternateCandidateAvailable,
                "alternate_candidate_available", std::nullopt);
    if (!released.ok()) return released.status();
    return ReserveNext(key, *released, again, tried);
  }
  EnsureReceipt receipt = BaseReceipt(again);
  receipt.disposition = EnsureDisposition::kJoined;  // waiting for the retry
  receipt.role = unreachable->role;
  if (candidate.ok() && candidate->consecutive_probe_failures >=
                            options_.config.max_probe_failures) {
    TransitionInput quarantine;
    quarantine.from = unreachable->role;
    quarantine.trigger = RoleTrigger::kRetriesExhausted;
    quarantine.write = TransitionWrite::kCompareAndSet;
    quarantine.patch.last_reason = "candidates_excluded";
    absl::StatusOr<TransitionResult> quarantined =
        roles_->Transition(quarantine);
    if (quarantined.ok()) receipt.role = quarantined->role;
  }
  return receipt;
}

absl::StatusOr<RoleRecord> Activator::Release(
    const RoleRecord& row, RoleTrigger trigger, const std::string& reason,
    std::optional<std::string> blocked, bool reset_retries) {
  const bool authority = HoldsAuthority(row);
  absl::StatusOr<RoleTransition> next =
      ReduceRoleTransition(row.state, trigger);
  if (!authority && next.ok() && next->to.has_value() &&
      *next->to == row.state && row.blocked_reason == blocked) {
    return row;  // nothing to change
  }
  // With authority, a reservation fences it (epoch + 1); without, a
  // compare-and-set records the change.
  TransitionInput release;
  release.from = row;
  release.trigger = trigger;
  release.write =
      authority ? TransitionWrite::kReserve : TransitionWrite::kCompareAndSet;
  RolePatchInput& p = release.patch;
  p.previous_holder_agent_id =
      row.holder_agent_id ? row.holder_agent_id : row.previous_holder_agent_id;
  p.blocked_reason = blocked;
  p.last_reason = reason;
  p.update_mask = {
      "holder_agent_id",     "previous_holder_agent_id", "activation_id",
      "activation_deadline", "holder_lease_expires_at",  "charter_acked_epoch",
      "next_probe_at",       "blocked_reason",           "last_reason"};
  if (reset_retries) {
    p.retry_count = 0;
    p.update_mask.push_back("retry_count");
  }
  absl::StatusOr<TransitionResult> released = roles_->Transition(release);
  if (!released.ok()) return released.status();
  return released->role;
}

absl::StatusOr<AckOutcome> Activator::Ack(const ActivationAck& ack) {
  auto invalid = [](absl::string_view why) {
    return InvalidArgumentError("ACTIVATION_ACK_INVALID", why);
  };
  if (ack.schema != kAckSchema)
    return invalid("schema must be tfx.role-activation-ack.v1");
  if (!ack.reachable) return invalid("reachable must be true");
  if (!ack.has_charter_ack) return invalid("charter_ack is required");
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ack.role);
  if (!key.ok()) return invalid(key.status().message());
  absl::StatusOr<ResolvedRoleKey> charter_key =
      ResolveRoleKey(ack.charter_role);
  if (!charter_key.ok()) return invalid(charter_key.status().message());

  absl::StatusOr<RoleRecord> row = roles_->Get(WireRef(key->wire));
  if (!row.ok() && row.status().code() == absl::StatusCode::kNotFound) {
    // The holder of a closed scope lost its authority with the row.
    absl::StatusOr<bool> closed = roles_->ScopeClosed(*key);
    if (closed.ok() && *closed) return storage::ScopeClosedError(key->wire);
  }
  if (charter_key->wire != key->wire || !row.ok()) {
    if (row.ok()) return StaleAck(*row, "the charter names another role");
    return FailedPreconditionError("STALE_EPOCH", "the role does not exist");
  }
  if (!ManagerEnabled(key->key.kind)) {
    if (HoldsAuthority(*row)) {
      (void)Release(*row, RoleTrigger::kManagerDisabled, "manager_disabled",
                    "manager_disabled");
    }
    return StaleAck(*row, "the role's manager is disabled");
  }
  if (ack.epoch != row->epoch || ack.activation_seq != row->activation_seq ||
      ack.activation_id != row->activation_id.value_or("") ||
      ack.charter_epoch != row->epoch) {
    return StaleAck(*row, "epoch, activation_seq or activation_id moved on");
  }
  if (ack.holder_agent_id != row->holder_agent_id.value_or("") ||
      ack.principal_agent_id != row->holder_agent_id.value_or("")) {
    absl::Status s = FailedPreconditionError(
        "HOLDER_MISMATCH", "only the reserved holder may acknowledge");
    return WithMetadata(std::move(s), "holder_agent_id",
                        row->holder_agent_id.value_or(""));
  }
  if (ack.charter_version != row->charter_version.value_or("") ||
      ack.charter_version != CharterVersion(key->key.kind)) {
    return FailedPreconditionError(
        "CHARTER_VERSION_MISMATCH",
        absl::StrCat("the current charter is ", CharterVersion(key->key.kind)));
  }
  const int64_t now = UnixMillis(clock_->Now());
  const std::optional<int64_t> holder_lease =
      presence_->LiveLease(*row->holder_agent_id, now);
  if (!holder_lease.has_value()) {
    return FailedPreconditionError("HOLDER_LEASE_EXPIRED",
                                   "the holder is not present");
  }
  if (row->state == RoleState::kActive &&
      row->charter_acked_epoch == row->epoch) {
    AckOutcome repeated;
    repeated.idempotent = true;
    repeated.role = *row;
    return repeated;
  }
  // Only a state the table lets an ACK move (elected-probing) accepts it;
  // from any other the ACK is stale (§5.2 stale_ack).
  if (!ReduceRoleTransition(row->state, RoleTrigger::kActivationAcked).ok()) {
    return StaleAck(*row, "the role is not awaiting an activation");
  }
  TransitionInput acked;
  acked.from = *row;
  acked.trigger = RoleTrigger::kActivationAcked;
  acked.write = TransitionWrite::kCompareAndSet;
  RolePatchInput& p = acked.patch;
  p.charter_acked_epoch = row->epoch;
  p.holder_lease_expires_ms = *holder_lease;
  p.retry_count = 0;
  p.last_reason = "activation_acked";
  p.update_mask = {"charter_acked_epoch", "holder_lease_expires_at",
                   "activation_deadline", "blocked_reason",
                   "next_probe_at",       "retry_count",
                   "last_reason"};
  absl::StatusOr<TransitionResult> active = roles_->Transition(acked);
  if (!active.ok()) return StaleAck(*row, "lost the race to another change");
  AckOutcome outcome;
  outcome.role = active->role;
  if (options_.on_role_active) {
    BacklogHandover handover = options_.on_role_active(active->role);
    outcome.backlog_delivered = handover.handed_over;
    outcome.push_backlog = std::move(handover.push);
  }
  return outcome;
}

void Activator::OnAgentGone(const std::string& agent_id,
                            AgentGoneReason reason) {
  RevokeHeld(agent_id, RoleTrigger::kHolderOffline, "holder_offline",
             absl::StrCat("gone:", agent_id, ":", AgentGoneReasonName(reason)));
}

void Activator::RevokeHeld(const std::string& agent_id,
                           RoleTrigger active_trigger,
                           const std::string& ensure_trigger,
                           const std::string& cause_id) {
  RoleListFilter filter;
  filter.states = {RoleState::kActive, RoleState::kElectedProbing};
  std::string token;
  std::vector<RoleRecord> held;
  while (true) {
    absl::StatusOr<RolePage> page = roles_->List(filter, 1000, token);
    if (!page.ok()) break;
    for (const RoleRecord& r : page->roles) {
      if (r.holder_agent_id == agent_id) held.push_back(r);
    }
    if (page->next_page_token.empty()) break;
    token = page->next_page_token;
  }
  for (const RoleRecord& r : held) {
    RoleKeyRef ref = WireRef(r.role_key_wire);
    // An active holder is revoked by `active_trigger` (holder_offline or
    // holder_lease_expired); a holder still probing has one revoking row in
    // §5.2, holder_lease_expired (its presence is over, which is no probe
    // failure).
    const RoleTrigger trigger = r.state == RoleState::kActive
                                    ? active_trigger
                                    : RoleTrigger::kHolderLeaseExpired;
    if (!Release(r, trigger, std::string(RoleTriggerName(active_trigger)),
                 std::nullopt)
             .ok()) {
      continue;
    }
    EnsureRequest again;
    again.role = ref;
    again.trigger = ensure_trigger;
    again.cause_id = cause_id;
    (void)Ensure(again);
  }
}

void Activator::Tick() {
  const int64_t now = UnixMillis(clock_->Now());
  RoleListFilter filter;
  filter.states = {RoleState::kElectedProbing, RoleState::kActive,
                   RoleState::kUnreachable, RoleState::kQuarantined};
  std::string token;
  std::vector<RoleRecord> rows;
  while (true) {
    absl::StatusOr<RolePage> page = roles_->List(filter, 1000, token);
    if (!page.ok()) return;
    rows.insert(rows.end(), page->roles.begin(), page->roles.end());
    if (page->next_page_token.empty()) break;
    token = page->next_page_token;
  }
  for (const RoleRecord& r : rows) {
    absl::StatusOr<ResolvedRoleKey> key =
        ResolveRoleKey(WireRef(r.role_key_wire));
    if (!key.ok()) continue;
    {
      absl::MutexLock lock(&mu_);
      if (flying_.count(r.role_key_wire) > 0) continue;
    }
    // An ACK timeout is the business of the hub holding the reserved
    // holder (with hubs sharing the database, the others would each count
    // the same failure).
    if (r.state == RoleState::kElectedProbing &&
        r.activation_deadline_ms.has_value() &&
        *r.activation_deadline_ms <= now &&
        (!r.holder_agent_id.has_value() ||
         OwnsAckTimeout(*r.holder_agent_id))) {
      bool mine = false;
      {
        absl::MutexLock lock(&mu_);
        mine = flying_.insert(r.role_key_wire).second;
      }
      if (!mine) continue;
      absl::StatusOr<EnsureReceipt> next =
          CandidateFailed(*key, r, "ack_timeout", RoleTrigger::kAckTimeout, {},
                          "hygiene_changed");
      if (!next.ok() || next->disposition != EnsureDisposition::kStarted) {
        Land(r.role_key_wire);
      }
      continue;
    }
    if ((r.state == RoleState::kUnreachable ||
         r.state == RoleState::kQuarantined) &&
        r.next_probe_ms.value_or(0) <= now) {
      EnsureRequest retry;
      retry.role = WireRef(r.role_key_wire);
      retry.trigger = "hygiene_changed";
      retry.cause_id = absl::StrCat("retry:", r.role_key_wire, ":", r.epoch);
      (void)Ensure(retry);
      continue;
    }
    if ((r.state == RoleState::kActive ||
         r.state == RoleState::kElectedProbing) &&
        r.holder_agent_id.has_value()) {
      if (!presence_->LiveLease(*r.holder_agent_id, now).has_value()) {
        RevokeHeld(*r.holder_agent_id, RoleTrigger::kHolderLeaseExpired,
                   "lease_expired",
                   absl::StrCat("lease:", r.role_key_wire, ":", now));
      }
    }
  }
  // A hint from a reserving hub may have been lost: look for reservations
  // waiting for agents held here.
  ContinueHandedFlights();
}

}  // namespace hub
