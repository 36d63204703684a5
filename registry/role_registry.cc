// RoleRegistry: role keys, reservation, compare-and-set, reads and watches.
// Candidates are in role_registry_candidates.cc.
#include "registry/role_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "registry/agent_validation.h"
#include "registry/role_registry_internal.h"
#include "status/status.h"

namespace hub {

using role_internal::CheckText;
using role_internal::FieldError;
using role_internal::RequestInvalid;
using role_internal::RoleWriteError;
using storage::Patch;
using storage::RoleOutcome;

namespace {

// The paths an update_mask may name (hub.v1.RolePatch field names).
const std::vector<absl::string_view>& RolePatchFields() {
  static const auto* fields = new std::vector<absl::string_view>{
      "state",           "holder_agent_id",     "previous_holder_agent_id",
      "activation_id",   "activation_deadline", "holder_lease_expires_at",
      "charter_version", "charter_acked_epoch", "retry_count",
      "next_probe_at",   "blocked_reason",      "last_transition_at",
      "last_reason"};
  return *fields;
}

// Where a role-key failure points: the structured field it names, or the
// wire.
std::string RoleKeyField(const absl::Status& s, bool structured) {
  if (!structured) return "role_key_wire";
  const std::string reason = ReasonOf(s);
  if (reason == "PROJECT_ID_INVALID") return "role_key.project_id";
  if (reason == "ROLE_KIND_UNSUPPORTED") return "role_key.kind";
  if (reason == "ROLE_SCOPE_FORBIDDEN" || reason == "SCOPE_REQUIRED" ||
      reason == "SCOPE_ID_INVALID") {
    return "role_key.scope_id";
  }
  return "role_key";
}

// Checks the values a RolePatchInput sets. `max_acked_epoch` bounds
// charter_acked_epoch when the row's epoch is known.
absl::Status ValidateRolePatchValues(const RolePatchInput& p,
                                     std::optional<int64_t> max_acked_epoch) {
  if (p.state_unknown) {
    return FieldError(
        InvalidArgumentError("ROLE_REACHABILITY_STATE_INVALID",
                             "patch.state is not one of the five role states"),
        "patch.state");
  }
  for (const auto& [value, field] :
       {std::pair(&p.holder_agent_id, "patch.holder_agent_id"),
        std::pair(&p.previous_holder_agent_id,
                  "patch.previous_holder_agent_id")}) {
    if (!value->has_value()) continue;
    absl::Status s = ValidateAgentId(**value);
    if (!s.ok()) return FieldError(std::move(s), field);
  }
  absl::Status s;
  if (p.activation_id)
    s = CheckText(*p.activation_id, 64, "patch.activation_id");
  if (s.ok() && p.charter_version) {
    s = CheckText(*p.charter_version, 128, "patch.charter_version");
  }
  if (s.ok() && p.blocked_reason) {
    s = CheckText(*p.blocked_reason, 128, "patch.blocked_reason");
  }
  if (s.ok() && p.last_reason) {
    s = CheckText(*p.last_reason, 128, "patch.last_reason");
  }
  if (!s.ok()) return s;
  if (p.retry_count && *p.retry_count < 0) {
    return RequestInvalid("patch.retry_count", "retry_count must be >= 0");
  }
  if (p.charter_acked_epoch &&
      (*p.charter_acked_epoch < 0 ||
       *p.charter_acked_epoch > max_acked_epoch.value_or(INT64_MAX))) {
    return RequestInvalid("patch.charter_acked_epoch",
                          "charter_acked_epoch must be within 0..epoch");
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::RolePatch> BuildRolePatch(
    const RolePatchInput& p, std::optional<int64_t> max_acked_epoch) {
  absl::StatusOr<absl::flat_hash_set<std::string>> mask =
      role_internal::ParseMask(p.update_mask, RolePatchFields());
  if (!mask.ok()) return mask.status();
  storage::RolePatch out;
  absl::Status s;
  auto take = [&](auto& dst, const auto& value, absl::string_view name,
                  bool nullable) {
    if (!s.ok()) return;
    auto field =
        role_internal::MaskedField(value, "patch", name, *mask, nullable);
    if (field.ok()) dst = std::move(*field);
    s = field.status();
  };
  // An unknown state counts as present for the mask (the request set the
  // field); ValidateRolePatchValues then refuses it, so the stand-in value
  // is never written.
  take(out.state,
       p.state_unknown ? std::optional<RoleState>(RoleState::kElectable)
                       : p.state,
       "state", false);
  take(out.holder_agent_id, p.holder_agent_id, "holder_agent_id", true);
  take(out.previous_holder_agent_id, p.previous_holder_agent_id,
       "previous_holder_agent_id", true);
  take(out.activation_id, p.activation_id, "activation_id", true);
  take(out.activation_deadline_ms, p.activation_deadline_ms,
       "activation_deadline", true);
  take(out.holder_lease_expires_ms, p.holder_lease_expires_ms,
       "holder_lease_expires_at", true);
  take(out.charter_version, p.charter_version, "charter_version", true);
  take(out.charter_acked_epoch, p.charter_acked_epoch, "charter_acked_epoch",
       true);
  take(out.retry_count, p.retry_count, "retry_count", false);
  take(out.next_probe_ms, p.next_probe_ms, "next_probe_at", true);
  take(out.blocked_reason, p.blocked_reason, "blocked_reason", true);
  Patch<int64_t> last_transition;
  take(last_transition, p.last_transition_ms, "last_transition_at", false);
  take(out.last_reason, p.last_reason, "last_reason", false);
  if (!s.ok()) return s;
  if (last_transition.set()) out.last_transition_ms = last_transition.value();
  if (s = ValidateRolePatchValues(p, max_acked_epoch); !s.ok()) return s;
  if (out.state.set() && out.state.value() == RoleState::kActive &&
      out.holder_agent_id.clear()) {
    return RequestInvalid("patch.state", "state active requires a holder");
  }
  return out;
}

// Whether the "active requires a holder" rule depends on the stored row. A
// reservation never keeps the state (it defaults from the holder), so only an
// explicit active matters there.
bool NeedsRowForActiveRule(const storage::RolePatch& p, bool reservation) {
  const bool to_active = p.state.set() && p.state.value() == RoleState::kActive;
  if (reservation) return to_active && p.holder_agent_id.keep();
  return (to_active && p.holder_agent_id.keep()) ||
         (p.state.keep() && p.holder_agent_id.clear());
}

absl::Status CheckActiveRule(const storage::RolePatch& p,
                             const std::optional<RoleRecord>& row) {
  const RoleState state = p.state.set()
                              ? p.state.value()
                              : (row ? row->state : RoleState::kElectable);
  std::optional<std::string> holder = p.holder_agent_id.ApplyTo(
      row ? row->holder_agent_id : std::optional<std::string>());
  if (state == RoleState::kActive && !holder.has_value()) {
    return RequestInvalid("patch.state", "state active requires a holder");
  }
  return absl::OkStatus();
}

// The row, or nullopt when absent.
absl::StatusOr<std::optional<RoleRecord>> LoadRow(storage::RoleStore* store,
                                                  const std::string& wire) {
  absl::StatusOr<RoleRecord> row = store->GetRole(wire);
  if (row.ok()) return std::optional<RoleRecord>(std::move(*row));
  if (row.status().code() == absl::StatusCode::kNotFound) {
    return std::optional<RoleRecord>();
  }
  return row.status();
}

// §5.3 on a row that does not exist: guards must name the zero row.
std::optional<RoleOutcome> ZeroRowGuards(const ReserveInput& in) {
  if (in.expected_version.value_or(0) != 0) return RoleOutcome::kStaleVersion;
  if (in.expected_epoch.value_or(0) != 0 || in.next_epoch.value_or(0) != 0) {
    return RoleOutcome::kStaleEpoch;
  }
  if (in.next_activation_seq.value_or(0) != 0) {
    return RoleOutcome::kStaleActivationSeq;
  }
  return std::nullopt;
}

absl::Status InvalidCas(absl::string_view field) {
  return FieldError(
      InvalidArgumentError(
          "INVALID_CAS", absl::StrCat("compare-and-set needs all four guards; ",
                                      field, " is missing")),
      field);
}

// The project and scope filters of a list: PROJECT_ID_INVALID,
// SCOPE_ID_INVALID.
absl::Status CheckListFilters(const std::optional<std::string>& project_id,
                              const std::optional<std::string>& scope_id) {
  if (project_id && !IsProjectId(*project_id)) {
    return FieldError(InvalidArgumentError("PROJECT_ID_INVALID",
                                           "project_id must match "
                                           "^prj_[A-Za-z0-9_-]{22}$"),
                      "project_id");
  }
  if (scope_id && !IsScopeId(*scope_id)) {
    return FieldError(InvalidArgumentError("SCOPE_ID_INVALID",
                                           "scope_id must match "
                                           "^scp_[A-Za-z0-9_-]{22}$"),
                      "scope_id");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResolvedRoleKey> ResolveRoleKey(const RoleKeyRef& ref) {
  if (!ref.key.has_value() && !ref.wire.has_value()) {
    return FieldError(
        InvalidArgumentError("ROLE_KEY_INVALID",
                             "a role key is required (role_key or "
                             "role_key_wire)"),
        "role_key");
  }
  std::optional<ResolvedRoleKey> structured;
  if (ref.key.has_value()) {
    absl::StatusOr<RoleKey> key = NormalizeRoleKey(*ref.key);
    if (!key.ok())
      return FieldError(key.status(), RoleKeyField(key.status(), true));
    absl::StatusOr<std::string> wire = EncodeRoleKey(*key);
    if (!wire.ok()) return FieldError(wire.status(), "role_key");
    structured = ResolvedRoleKey{*key, *wire};
  }
  if (!ref.wire.has_value()) return *structured;
  absl::StatusOr<RoleKey> decoded = DecodeRoleKey(*ref.wire);
  if (!decoded.ok()) return FieldError(decoded.status(), "role_key_wire");
  if (structured.has_value() && structured->wire != *ref.wire) {
    return FieldError(
        InvalidArgumentError("ROLE_KEY_MISMATCH",
                             "role_key and role_key_wire name different roles"),
        "role_key_wire");
  }
  return ResolvedRoleKey{*decoded, *ref.wire};
}

RoleRegistry::RoleRegistry(storage::RoleStore* store, const Clock* clock,
                           RoleRegistryOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      random_state_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {}

RoleRegistry::~RoleRegistry() = default;

absl::StatusOr<storage::RoleReservation> RoleRegistry::BuildReservation(
    const ReserveInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  absl::StatusOr<storage::RolePatch> patch =
      BuildRolePatch(in.patch, std::nullopt);
  if (!patch.ok()) return patch.status();
  const bool guarded = in.expected_version || in.expected_epoch ||
                       in.next_epoch || in.next_activation_seq;
  const bool active_rule = NeedsRowForActiveRule(*patch, true);
  if (guarded || active_rule) {
    absl::StatusOr<std::optional<RoleRecord>> row = LoadRow(store_, key->wire);
    if (!row.ok()) return row.status();
    if (!row->has_value()) {
      // A closed scope says so rather than naming a stale guard.
      absl::StatusOr<bool> closed = ScopeClosed(*key);
      if (!closed.ok()) return closed.status();
      if (*closed) return storage::ScopeClosedError(key->wire);
      if (std::optional<RoleOutcome> refused = ZeroRowGuards(in)) {
        return RoleWriteError(*refused, std::nullopt, key->wire);
      }
    }
    if (active_rule) {
      if (absl::Status s = CheckActiveRule(*patch, *row); !s.ok()) return s;
    }
  }
  storage::RoleReservation r;
  r.role_key_wire = key->wire;
  r.project_id = key->key.project_id;
  r.role_kind = std::string(RoleKindName(key->key.kind));
  r.scope_id = key->key.scope_id;
  r.expected_version = in.expected_version;
  r.expected_epoch = in.expected_epoch;
  r.next_epoch = in.next_epoch;
  r.next_activation_seq = in.next_activation_seq;
  r.patch = std::move(*patch);
  r.now_ms = UnixMillis(clock_->Now());
  return r;
}

absl::StatusOr<ReserveResult> RoleRegistry::Reserve(const ReserveInput& in) {
  absl::StatusOr<storage::RoleReservation> r = BuildReservation(in);
  if (!r.ok()) return r.status();
  return ReserveStorePatch(*r);
}

void RoleRegistry::ReserveAsync(const ReserveInput& in,
                                storage::Callback<ReserveResult> done) {
  absl::StatusOr<storage::RoleReservation> r = BuildReservation(in);
  if (!r.ok()) {
    std::move(done)(r.status());
    return;
  }
  store_->ReserveRoleAsync(
      *r, [this, wire = r->role_key_wire, done = std::move(done)](
              absl::StatusOr<storage::RoleWrite> w) mutable {
        std::move(done)(Reserved(wire, std::move(w)));
      });
}

absl::StatusOr<ReserveResult> RoleRegistry::ReserveStorePatch(
    const storage::RoleReservation& r) {
  return Reserved(r.role_key_wire, store_->ReserveRole(r));
}

absl::StatusOr<ReserveResult> RoleRegistry::Reserved(
    const std::string& wire, absl::StatusOr<storage::RoleWrite> w) {
  absl::StatusOr<RoleRecord> role = Written(wire, std::move(w));
  if (!role.ok()) return role.status();
  return ReserveResult{*role, role->version == 0};
}

absl::StatusOr<storage::RoleCas> RoleRegistry::BuildCas(const CasInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (!in.expected_version) return InvalidCas("expected_version");
  if (!in.expected_epoch) return InvalidCas("expected_epoch");
  if (!in.expected_activation_seq) return InvalidCas("expected_activation_seq");
  if (!in.expected_activation_id) return InvalidCas("expected_activation_id");
  absl::StatusOr<storage::RolePatch> patch =
      BuildRolePatch(in.patch, *in.expected_epoch);
  if (!patch.ok()) return patch.status();
  if (NeedsRowForActiveRule(*patch, false)) {
    absl::StatusOr<std::optional<RoleRecord>> row = LoadRow(store_, key->wire);
    if (!row.ok()) return row.status();
    // A missing row is reported by the store (ROLE_NOT_FOUND) below.
    if (row->has_value()) {
      if (absl::Status s = CheckActiveRule(*patch, *row); !s.ok()) return s;
    }
  }
  storage::RoleCas cas;
  cas.role_key_wire = key->wire;
  cas.expected_version = in.expected_version;
  cas.expected_epoch = in.expected_epoch;
  cas.expected_activation_seq =
      std::optional<std::optional<int64_t>>(in.expected_activation_seq);
  cas.expected_activation_id = in.expected_activation_id;
  cas.patch = std::move(*patch);
  cas.now_ms = UnixMillis(clock_->Now());
  return cas;
}

absl::StatusOr<RoleRecord> RoleRegistry::CompareAndSet(const CasInput& in) {
  absl::StatusOr<storage::RoleCas> cas = BuildCas(in);
  if (!cas.ok()) return cas.status();
  return CompareAndSetStorePatch(*cas);
}

void RoleRegistry::CompareAndSetAsync(const CasInput& in,
                                      storage::Callback<RoleRecord> done) {
  absl::StatusOr<storage::RoleCas> cas = BuildCas(in);
  if (!cas.ok()) {
    std::move(done)(cas.status());
    return;
  }
  store_->CompareAndSetRoleAsync(
      *cas, [this, wire = cas->role_key_wire, done = std::move(done)](
                absl::StatusOr<storage::RoleWrite> w) mutable {
        std::move(done)(Written(wire, std::move(w)));
      });
}

absl::StatusOr<RoleRecord> RoleRegistry::CompareAndSetStorePatch(
    const storage::RoleCas& cas) {
  return Written(cas.role_key_wire, store_->CompareAndSetRole(cas));
}

absl::StatusOr<RoleRecord> RoleRegistry::Written(
    const std::string& wire, absl::StatusOr<storage::RoleWrite> w) {
  if (!w.ok()) return w.status();
  if (w->outcome != RoleOutcome::kApplied || !w->role.has_value()) {
    return RoleWriteError(w->outcome, w->role, wire);
  }
  Publish(*w->role);
  return *w->role;
}

absl::StatusOr<ScopeCloseOutcome> RoleRegistry::CloseScope(
    const ScopeCloseInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (key->key.kind != RoleKind::kLead) {
    return FieldError(
        InvalidArgumentError("ROLE_KIND_UNSUPPORTED",
                             "only a lead scope can be closed; a project's "
                             "cto role has no scope"),
        in.role.key.has_value() ? "role_key.kind" : "role_key_wire");
  }
  if (in.reason.size() > 256) {
    return RequestInvalid("reason", "reason must be at most 256 characters");
  }
  if (in.closed_by.empty()) {
    return RequestInvalid("closed_by", "closing a scope needs a principal");
  }
  storage::ScopeClose close;
  close.project_id = key->key.project_id;
  close.scope_id = key->key.scope_id;
  close.role_key_wire = key->wire;
  close.closed_by = in.closed_by;
  close.reason = in.reason;
  close.now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<storage::ScopeCloseResult> result =
      store_->CloseLeadScope(close);
  if (!result.ok()) return result.status();
  {
    absl::MutexLock lock(&closed_mu_);
    closed_wires_.insert(key->wire);
  }
  if (result->removed_role.has_value()) {
    const RoleRecord& removed = *result->removed_role;
    PublishRemoved(removed);
    // §5.2 removes the row from every state (scope_closed), so the store's
    // transaction deletes it without asking; the kernel's row is reported.
    absl::StatusOr<RoleTransition> row =
        ReduceRoleTransition(removed.state, RoleTrigger::kScopeClosed);
    if (row.ok()) {
      RoleTransitionNote note;
      note.role_key_wire = removed.role_key_wire;
      note.from = removed.state;
      note.trigger = RoleTrigger::kScopeClosed;
      note.version = removed.version;
      Note(note);
    }
  }
  return ScopeCloseOutcome{*key, std::move(*result)};
}

absl::StatusOr<bool> RoleRegistry::ScopeClosed(const ResolvedRoleKey& key) {
  if (key.key.kind != RoleKind::kLead) return false;
  {
    absl::MutexLock lock(&closed_mu_);
    if (closed_wires_.contains(key.wire)) return true;
  }
  absl::StatusOr<std::optional<ClosedScopeRecord>> closed =
      store_->GetClosedScope(key.wire);
  if (!closed.ok()) return closed.status();
  if (!closed->has_value()) return false;
  absl::MutexLock lock(&closed_mu_);
  closed_wires_.insert(key.wire);
  return true;
}

absl::StatusOr<RoleRecord> RoleRegistry::Get(const RoleKeyRef& role) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(role);
  if (!key.ok()) return key.status();
  absl::StatusOr<RoleRecord> row = store_->GetRole(key->wire);
  if (!row.ok() && row.status().code() == absl::StatusCode::kNotFound) {
    return RoleWriteError(RoleOutcome::kNotFound, std::nullopt, key->wire);
  }
  return row;
}

absl::StatusOr<RolePage> RoleRegistry::List(const RoleListFilter& filter,
                                            int page_size,
                                            const std::string& page_token) {
  if (absl::Status s = CheckListFilters(filter.project_id, filter.scope_id);
      !s.ok()) {
    return s;
  }
  if (filter.states_unknown) {
    return FieldError(
        InvalidArgumentError("ROLE_REACHABILITY_STATE_INVALID",
                             "states holds an unknown role state"),
        "states");
  }
  absl::StatusOr<int> size = role_internal::EffectivePageSize(page_size);
  if (!size.ok()) return size.status();
  storage::RoleFilter f;
  f.project_id = filter.project_id;
  if (filter.kind) f.role_kind = std::string(RoleKindName(*filter.kind));
  f.scope_id = filter.scope_id;
  f.states = filter.states;
  const std::string filter_text = absl::StrCat(
      f.project_id.value_or(""), "|", f.role_kind.value_or(""), "|",
      f.scope_id.value_or(""), "|", absl::StrJoin(f.states, ","));
  absl::StatusOr<std::string> after =
      role_internal::DecodePageToken(page_token, "roles", filter_text);
  if (!after.ok()) return after.status();
  // One keyset read of the page and one row more (which proves a next
  // page): every filter, the token's projects included, is in the query.
  if (!after->empty()) f.after_wire = *after;
  f.projects = filter.scope.StoreProjects();
  f.limit = *size + 1;
  absl::StatusOr<std::vector<RoleRecord>> rows = store_->ListRoles(f);
  if (!rows.ok()) return rows.status();
  RolePage page;
  for (RoleRecord& row : *rows) {
    if (static_cast<int>(page.roles.size()) == *size) {
      page.next_page_token = role_internal::EncodePageToken(
          "roles", filter_text, page.roles.back().role_key_wire);
      break;
    }
    page.roles.push_back(std::move(row));
  }
  return page;
}

absl::StatusOr<ClosedScopePage> RoleRegistry::ListClosedScopes(
    const ClosedScopeListFilter& filter, int page_size,
    const std::string& page_token) {
  if (absl::Status s = CheckListFilters(filter.project_id, filter.scope_id);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int> size = role_internal::EffectivePageSize(page_size);
  if (!size.ok()) return size.status();
  storage::ClosedScopeFilter f;
  f.project_id = filter.project_id;
  f.scope_id = filter.scope_id;
  const std::string filter_text =
      absl::StrCat(f.project_id.value_or(""), "|", f.scope_id.value_or(""));
  absl::StatusOr<std::string> after =
      role_internal::DecodePageToken(page_token, "closed_scopes", filter_text);
  if (!after.ok()) return after.status();
  // As List: one keyset read of the page and one row more.
  if (!after->empty()) f.after_wire = *after;
  f.projects = filter.scope.StoreProjects();
  f.limit = *size + 1;
  absl::StatusOr<std::vector<ClosedScopeRecord>> rows =
      store_->ListClosedScopes(f);
  if (!rows.ok()) return rows.status();
  ClosedScopePage page;
  for (ClosedScopeRecord& row : *rows) {
    if (static_cast<int>(page.closed.size()) == *size) {
      page.next_page_token = role_internal::EncodePageToken(
          "closed_scopes", filter_text, page.closed.back().role_key_wire);
      break;
    }
    page.closed.push_back(std::move(row));
  }
  return page;
}

}  // namespace hub
