// RoleRegistry: role candidates (TRIFLUX-HUB §5.6): merge upsert, listing
// in activator order, and probe reports with backoff and quarantine.
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "registry/agent_validation.h"
#include "registry/role_registry.h"
#include "registry/role_registry_internal.h"
#include "registry/transport_locator.h"
#include "status/status.h"

namespace hub {

using role_internal::CheckText;
using role_internal::FieldError;
using role_internal::MaskedField;
using role_internal::RequestInvalid;
using storage::Patch;

namespace {

constexpr int64_t kProbeClockSkewMs = 1'000;

// A candidate's place in the listing order, for a page token:
// "<priority>,<updated_at_ms>,<agent_id length>,<agent_id><wire>" (lengths,
// not separators, so no character of an id can confuse the parse).
std::string EncodeCandidatePosition(const CandidateRecord& c) {
  return absl::StrCat(c.priority, ",", c.updated_at_ms, ",", c.agent_id.size(),
                      ",", c.agent_id, c.role_key_wire);
}

std::optional<storage::CandidatePageQuery::Key> DecodeCandidatePosition(
    absl::string_view position) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(position, absl::MaxSplits(',', 3));
  storage::CandidatePageQuery::Key key;
  size_t agent_length = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &key.priority) ||
      !absl::SimpleAtoi(parts[1], &key.updated_at_ms) ||
      !absl::SimpleAtoi(parts[2], &agent_length) ||
      agent_length >= parts[3].size()) {
    return std::nullopt;
  }
  key.agent_id = std::string(parts[3].substr(0, agent_length));
  key.role_key_wire = std::string(parts[3].substr(agent_length));
  return key;
}

const std::vector<absl::string_view>& CandidatePatchFields() {
  static const auto* fields =
      new std::vector<absl::string_view>{"source",
                                         "priority",
                                         "transport_locators",
                                         "transport_locators_json",
                                         "consecutive_probe_failures",
                                         "excluded_until",
                                         "last_probe_at",
                                         "last_probe_code"};
  return *fields;
}

constexpr absl::string_view kProbeCodes[] = {"ok",
                                             "target_not_found",
                                             "adapter_unavailable",
                                             "timeout",
                                             "permission_denied",
                                             "protocol_mismatch",
                                             "transport_error",
                                             "ack_timeout"};

bool IsCandidateSource(absl::string_view s) {
  return s == "grant" || s == "standup" || s == "operator";
}

// The stored form of a locator list given as text, validated as a
// registration's would be, except that a candidate has no lease: expires_at
// need only be in the future.
absl::StatusOr<std::string> NormalizeLocators(absl::string_view json_text,
                                              int64_t now_ms) {
  LocatorContext context;
  context.now_ms = now_ms;
  context.heartbeat_ttl_ms = kMaxSafeInteger - now_ms;
  absl::StatusOr<std::vector<TransportLocator>> locators =
      ParseTransportLocatorsJson(json_text, context);
  if (!locators.ok()) {
    return FieldError(locators.status(), "candidate.transport_locators");
  }
  return TransportLocatorsToJson(*locators);
}

// Locators of an upsert: kept, cleared ("[]") or replaced (normalized).
absl::StatusOr<std::optional<std::string>> LocatorsOf(
    const CandidatePatchInput& p, const absl::flat_hash_set<std::string>& mask,
    int64_t now_ms) {
  std::optional<std::string> objects_text;
  if (p.transport_locator_objects) {
    objects_text = absl::StrCat(
        "[", absl::StrJoin(*p.transport_locator_objects, ","), "]");
  }
  absl::StatusOr<Patch<std::string>> structured =
      MaskedField(objects_text, "candidate", "transport_locators", mask, true);
  if (!structured.ok()) return structured.status();
  absl::StatusOr<Patch<std::string>> text =
      MaskedField(p.transport_locators_json, "candidate",
                  "transport_locators_json", mask, true);
  if (!text.ok()) return text.status();
  if (!structured->keep() && !text->keep()) {
    return FieldError(InvalidArgumentError("TRANSPORT_LOCATORS_INVALID",
                                           "give transport_locators or "
                                           "transport_locators_json, not both"),
                      "candidate.transport_locators");
  }
  const Patch<std::string>& chosen = structured->keep() ? *text : *structured;
  if (chosen.keep()) return std::optional<std::string>();
  if (chosen.clear()) return std::optional<std::string>("[]");
  absl::StatusOr<std::string> normalized =
      NormalizeLocators(chosen.value(), now_ms);
  if (!normalized.ok()) return normalized.status();
  return std::optional<std::string>(*normalized);
}

// The store upsert for a validated request, without the registration-event
// resets (applied by the caller once it knows whether the row exists).
absl::StatusOr<storage::CandidateUpsert> BuildCandidateUpsert(
    const std::string& wire, const CandidateUpsertInput& in, int64_t now_ms) {
  const CandidatePatchInput& p = in.patch;
  absl::StatusOr<absl::flat_hash_set<std::string>> mask =
      role_internal::ParseMask(p.update_mask, CandidatePatchFields());
  if (!mask.ok()) return mask.status();
  storage::CandidateUpsert u;
  u.role_key_wire = wire;
  u.agent_id = in.agent_id;
  u.now_ms = now_ms;
  absl::Status s;
  auto required = [&](auto& dst, const auto& value, absl::string_view name) {
    if (!s.ok()) return;
    auto field = MaskedField(value, "candidate", name, *mask, false);
    s = field.status();
    if (s.ok() && field->set()) dst = field->value();
  };
  auto nullable = [&](auto& dst, const auto& value, absl::string_view name) {
    if (!s.ok()) return;
    auto field = MaskedField(value, "candidate", name, *mask, true);
    s = field.status();
    if (s.ok()) dst = std::move(*field);
  };
  required(u.source, p.source, "source");
  required(u.priority, p.priority, "priority");
  required(u.consecutive_probe_failures, p.consecutive_probe_failures,
           "consecutive_probe_failures");
  nullable(u.excluded_until_ms, p.excluded_until_ms, "excluded_until");
  nullable(u.last_probe_ms, p.last_probe_ms, "last_probe_at");
  nullable(u.last_probe_code, p.last_probe_code, "last_probe_code");
  if (!s.ok()) return s;
  if (u.source && !IsCandidateSource(*u.source)) {
    return RequestInvalid("candidate.source", "unknown candidate source");
  }
  if (u.consecutive_probe_failures && *u.consecutive_probe_failures < 0) {
    return RequestInvalid("candidate.consecutive_probe_failures",
                          "consecutive_probe_failures must be >= 0");
  }
  if (u.last_probe_code.set()) {
    s = CheckText(u.last_probe_code.value(), 64, "candidate.last_probe_code");
    if (!s.ok()) return s;
  }
  absl::StatusOr<std::optional<std::string>> locators =
      LocatorsOf(p, *mask, now_ms);
  if (!locators.ok()) return locators.status();
  u.transport_locators_json = *locators;
  return u;
}

absl::StatusOr<std::optional<CandidateRecord>> FindCandidate(
    storage::RoleStore* store, const std::string& wire,
    const std::string& agent_id) {
  absl::StatusOr<std::vector<CandidateRecord>> all =
      store->ListCandidates(wire);
  if (!all.ok()) return all.status();
  for (CandidateRecord& c : *all) {
    if (c.agent_id == agent_id) return std::optional(std::move(c));
  }
  return std::optional<CandidateRecord>();
}

// A storage failure, as opposed to a fence refusal of the write.
bool IsStoreError(const absl::Status& s) {
  return absl::StartsWith(ReasonOf(s), "STORE_");
}

absl::Status CandidateNotFound(const std::string& wire,
                               const std::string& agent_id) {
  absl::Status s = NotFoundError(
      "CANDIDATE_NOT_FOUND",
      absl::StrCat("agent '", agent_id, "' is not a candidate of this role"));
  s = WithMetadata(std::move(s), "agent_id", agent_id);
  return WithMetadata(std::move(s), "role_key_wire", wire);
}

}  // namespace

double RoleRegistry::RandomUnit() {
  if (options_.random_unit) return options_.random_unit();
  absl::MutexLock lock(&random_mu_);
  // xorshift64*: plenty for a backoff jitter.
  random_state_ ^= random_state_ >> 12;
  random_state_ ^= random_state_ << 25;
  random_state_ ^= random_state_ >> 27;
  const uint64_t r = random_state_ * 2685821657736338717ull;
  return static_cast<double>(r >> 11) / static_cast<double>(uint64_t{1} << 53);
}

absl::Status RoleRegistry::EnsureRoleRow(const ResolvedRoleKey& key) {
  absl::StatusOr<RoleRecord> row = store_->GetRole(key.wire);
  if (row.ok()) return absl::OkStatus();
  if (row.status().code() != absl::StatusCode::kNotFound) return row.status();
  // Insert-only: on a row created meanwhile, next_epoch 0 can never be
  // current + 1, so the store refuses instead of fencing it.
  storage::RoleReservation r;
  r.role_key_wire = key.wire;
  r.project_id = key.key.project_id;
  r.role_kind = std::string(RoleKindName(key.key.kind));
  r.scope_id = key.key.scope_id;
  r.expected_version = 0;
  r.expected_epoch = 0;
  r.next_epoch = 0;
  r.now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<storage::RoleWrite> w = store_->ReserveRole(r);
  if (!w.ok()) return w.status();
  if (w->outcome == storage::RoleOutcome::kApplied && w->role) {
    Publish(*w->role);
  }
  return absl::OkStatus();
}

absl::Status RoleRegistry::ReleaseQuarantine(const std::string& wire,
                                             RoleTrigger trigger) {
  absl::StatusOr<RoleRecord> row = store_->GetRole(wire);
  if (!row.ok()) return row.status();
  if (row->state != RoleState::kQuarantined) return absl::OkStatus();
  // §5.6: back to electable by a reservation (epoch + 1), with a fresh
  // retry count; the kernel's clear_quarantine row decides the state.
  TransitionInput release;
  release.from = *row;
  release.trigger = trigger;
  release.write = TransitionWrite::kReserve;
  RolePatchInput& p = release.patch;
  p.retry_count = 0;
  p.last_reason = std::string(RoleTriggerName(trigger));
  p.update_mask = {"holder_agent_id",     "activation_id",
                   "activation_deadline", "holder_lease_expires_at",
                   "retry_count",         "next_probe_at",
                   "last_reason"};
  absl::StatusOr<TransitionResult> released = Transition(release);
  // A lost fence means someone else moved the role on: nothing to release.
  if (!released.ok() && IsStoreError(released.status())) {
    return released.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<CandidateUpsertResult> RoleRegistry::UpsertCandidate(
    const CandidateUpsertInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (absl::Status s = ValidateAgentId(in.agent_id); !s.ok()) {
    return FieldError(std::move(s), "agent_id");
  }
  const int64_t now = UnixMillis(clock_->Now());
  absl::StatusOr<storage::CandidateUpsert> u =
      BuildCandidateUpsert(key->wire, in, now);
  if (!u.ok()) return u.status();
  // Everything is validated: from here only storage can fail.
  if (absl::Status s = EnsureRoleRow(*key); !s.ok()) return s;
  absl::StatusOr<std::optional<CandidateRecord>> existing =
      FindCandidate(store_, key->wire, in.agent_id);
  if (!existing.ok()) return existing.status();
  const bool created = !existing->has_value();
  const bool registration =
      created ||
      (u->transport_locators_json.has_value() &&
       *u->transport_locators_json != (*existing)->transport_locators_json);
  if (registration) {
    // A (re)registered candidate gets a clean slate unless the call says
    // otherwise.
    if (!u->consecutive_probe_failures) u->consecutive_probe_failures = 0;
    if (u->excluded_until_ms.keep()) {
      u->excluded_until_ms = Patch<int64_t>::Clear();
    }
  }
  absl::StatusOr<CandidateRecord> row = store_->UpsertCandidate(*u);
  if (!row.ok()) return row.status();
  if (registration) {
    // Best effort: the candidate is committed; a failed release leaves the
    // role to the quarantine expiry.
    ReleaseQuarantine(key->wire, created ? RoleTrigger::kCandidateRegistered
                                         : RoleTrigger::kLocatorRegistered)
        .IgnoreError();
  }
  if (options_.on_candidate_written) {
    options_.on_candidate_written(key->wire, in.agent_id);
  }
  return CandidateUpsertResult{*row, created};
}

absl::StatusOr<bool> RoleRegistry::RemoveCandidate(
    const RoleKeyRef& role, const std::string& agent_id) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(role);
  if (!key.ok()) return key.status();
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) {
    return FieldError(std::move(s), "agent_id");
  }
  absl::StatusOr<bool> removed = store_->DeleteCandidate(key->wire, agent_id);
  if (removed.ok() && *removed && options_.on_candidate_removed) {
    options_.on_candidate_removed(key->wire, agent_id);
  }
  return removed;
}

absl::StatusOr<CandidatePage> RoleRegistry::ListCandidates(
    const CandidateListInput& in) {
  std::optional<std::string> wire;
  if (in.role) {
    absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(*in.role);
    if (!key.ok()) return key.status();
    wire = key->wire;
  }
  if (in.agent_id) {
    if (absl::Status s = ValidateAgentId(*in.agent_id); !s.ok()) {
      return FieldError(std::move(s), "agent_id");
    }
  }
  absl::StatusOr<int> size = role_internal::EffectivePageSize(in.page_size);
  if (!size.ok()) return size.status();
  const std::string filter_text =
      absl::StrCat(wire.value_or(""), "|", in.agent_id.value_or(""));
  absl::StatusOr<std::string> position =
      role_internal::DecodePageToken(in.page_token, "candidates", filter_text);
  if (!position.ok()) return position.status();
  // One keyset read of the page and one row more (which proves a next
  // page), every filter in the query: the token holds the last row's key.
  storage::CandidatePageQuery query;
  query.role_key_wire = wire;
  query.agent_id = in.agent_id;
  // With a role named, the caller's access to it was checked already.
  if (!wire) query.projects = in.scope.StoreProjects();
  if (!position->empty()) {
    std::optional<storage::CandidatePageQuery::Key> key =
        DecodeCandidatePosition(*position);
    if (!key.has_value()) {
      return FieldError(
          InvalidArgumentError("PAGE_TOKEN_INVALID", "page_token is malformed"),
          "page_token");
    }
    query.after = std::move(*key);
  }
  query.limit = *size + 1;
  absl::StatusOr<std::vector<CandidateRecord>> rows =
      store_->ListCandidatesPage(query);
  if (!rows.ok()) return rows.status();
  CandidatePage page;
  for (CandidateRecord& c : *rows) {
    if (static_cast<int>(page.candidates.size()) == *size) {
      page.next_page_token = role_internal::EncodePageToken(
          "candidates", filter_text,
          EncodeCandidatePosition(page.candidates.back()));
      break;
    }
    page.candidates.push_back(std::move(c));
  }
  return page;
}

absl::StatusOr<CandidateRecord> RoleRegistry::ReportProbe(
    const ProbeReportInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (absl::Status s = ValidateAgentId(in.agent_id); !s.ok()) {
    return FieldError(std::move(s), "agent_id");
  }
  if (std::find(std::begin(kProbeCodes), std::end(kProbeCodes), in.code) ==
      std::end(kProbeCodes)) {
    return RequestInvalid("code", "code must be a known probe code");
  }
  const int64_t now = UnixMillis(clock_->Now());
  const int64_t probed_at = in.probed_at_ms.value_or(now);
  if (probed_at > now + kProbeClockSkewMs) {
    return RequestInvalid("probed_at", "probed_at is in the future");
  }
  if (in.consecutive_probe_failures && *in.consecutive_probe_failures < 0) {
    return RequestInvalid("consecutive_probe_failures",
                          "consecutive_probe_failures must be >= 0");
  }
  absl::StatusOr<std::optional<CandidateRecord>> current =
      FindCandidate(store_, key->wire, in.agent_id);
  if (!current.ok()) return current.status();
  if (!current->has_value()) {
    // A closed scope's candidates are gone for good: say so.
    absl::StatusOr<bool> closed = ScopeClosed(*key);
    if (!closed.ok()) return closed.status();
    if (*closed) return storage::ScopeClosedError(key->wire);
    return CandidateNotFound(key->wire, in.agent_id);
  }

  storage::ReachabilityUpdate u;
  u.role_key_wire = key->wire;
  u.agent_id = in.agent_id;
  u.now_ms = now;
  u.last_probe_ms = probed_at;
  u.last_probe_code = in.code;
  using Failures = storage::ReachabilityUpdate::Failures;
  if (in.code == "ok") {
    u.failures = Failures::kReset;
    u.excluded_until_ms = Patch<int64_t>::Clear();
  } else if (in.code != "adapter_unavailable") {
    // Counted by the store inside its write, and the exclusion derived there
    // from the count that write commits: concurrent reports never lose a
    // failure nor share a count's exclusion.
    u.failures = Failures::kIncrement;
    if (!in.excluded_until_ms) {
      const double draw = RandomUnit();
      const ActivatorConfig& policy = options_.policy;
      u.excluded_until_for = [probed_at, draw, &policy](int64_t after) {
        // At least one failure was just reported (an override may say 0);
        // a count far beyond any policy only selects the cap.
        const int failures = static_cast<int>(
            std::clamp<int64_t>(after, 1, std::numeric_limits<int>::max()));
        return probed_at + ExclusionMillis(failures, draw, policy);
      };
    }
  }
  if (in.consecutive_probe_failures) {
    u.failures = Failures::kSet;
    u.failures_value = *in.consecutive_probe_failures;
  }
  if (in.excluded_until_ms) u.excluded_until_ms = *in.excluded_until_ms;
  absl::StatusOr<CandidateRecord> row = store_->UpdateCandidateReachability(u);
  if (!row.ok() && row.status().code() == absl::StatusCode::kNotFound) {
    return CandidateNotFound(key->wire, in.agent_id);
  }
  return row;
}

}  // namespace hub
