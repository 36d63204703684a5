#include "registry/reservations.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paths/path_pattern.h"
#include "registry/agent_validation.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {

namespace {

using storage::ReservationRecord;

absl::Status ValidateProject(absl::string_view project_id) {
  if (IsProjectId(project_id)) return absl::OkStatus();
  return WithMetadata(
      InvalidArgumentError("PROJECT_ID_INVALID",
                           absl::StrCat("project_id \"", ErrorText(project_id),
                                        "\" is not prj_ and 22 characters "
                                        "[A-Za-z0-9_-]")),
      "field", "project_id");
}

absl::Status ValidateReservationId(absl::string_view id) {
  if (!id.empty() && id.size() <= 64) return absl::OkStatus();
  return InvalidArgumentError(
      "RESERVATION_ID_INVALID",
      absl::StrCat("reservation_id must be 1..64 characters, got ", id.size()));
}

}  // namespace

ReservationBook::ReservationBook(storage::ReservationStore* store,
                                 const Clock* clock, ReservationLimits limits,
                                 std::function<std::string()> new_id)
    : store_(store),
      clock_(clock),
      limits_(limits),
      new_id_(new_id ? std::move(new_id)
                     : [] { return storage::NewUuidV7(); }) {}

void ReservationBook::Count(std::atomic<int64_t>& counter,
                            ReservationEvent event, int64_t n) {
  if (n <= 0) return;
  counter.fetch_add(n, std::memory_order_relaxed);
  if (observer_) observer_(event, n);
}

int64_t ReservationBook::NowMs() const {
  return absl::ToUnixMillis(clock_->Now());
}

absl::StatusOr<int64_t> ReservationBook::TtlMs(
    std::optional<absl::Duration> ttl) const {
  const absl::Duration d = ttl.value_or(kDefaultReservationTtl);
  if (d < kMinReservationTtl || d > kMaxReservationTtl) {
    return InvalidArgumentError(
        "RESERVATION_TTL_INVALID",
        absl::StrCat("ttl must be 1s..24h, got ", absl::FormatDuration(d)));
  }
  return absl::ToInt64Milliseconds(d);
}

absl::StatusOr<std::vector<std::string>> ReservationBook::NormalizePatterns(
    const std::vector<std::string>& patterns, size_t max, bool literal) {
  auto too_many = [max](absl::string_view got) {
    return WithMetadata(
        InvalidArgumentError(
            "RESERVATION_TOO_MANY_PATTERNS",
            absl::StrCat("between 1 and ", max,
                         " distinct patterns after normalization, got ", got)),
        "limit_value", absl::StrCat(max));
  };
  if (patterns.empty()) return too_many("none");
  // The limit counts what is reserved: spellings of one pattern count once.
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& p : patterns) {
    absl::StatusOr<paths::PathPattern> parsed =
        literal ? paths::PathPattern::ParseLiteral(p)
                : paths::PathPattern::Parse(p);
    if (!parsed.ok()) return parsed.status();
    if (!seen.insert(parsed->text()).second) continue;
    if (out.size() == max) return too_many("more");
    out.push_back(parsed->text());
  }
  return out;
}

absl::StatusOr<ReservationRecord> ReservationBook::Reserve(
    const PathReserveInput& in) {
  absl::StatusOr<storage::ReservationOutcome> out = Attempt(in, std::nullopt);
  if (!out.ok()) return out.status();
  if (!out->granted.has_value()) {
    Count(conflicts_, ReservationEvent::kConflict, 1);
    return storage::ReservationConflictError(out->conflicts);
  }
  return *std::move(out->granted);
}

absl::StatusOr<storage::ReservationOutcome> ReservationBook::Attempt(
    const PathReserveInput& in, const std::optional<std::string>& waiter_id) {
  if (absl::Status s = ValidateProject(in.project_id); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(in.agent_id); !s.ok()) return s;
  if (in.reason.size() > kMaxReservationReasonBytes) {
    return InvalidArgumentError(
        "RESERVATION_REASON_INVALID",
        absl::StrCat("reason must be at most ", kMaxReservationReasonBytes,
                     " bytes, got ", in.reason.size()));
  }
  absl::StatusOr<int64_t> ttl = TtlMs(in.ttl);
  if (!ttl.ok()) return ttl.status();
  absl::StatusOr<std::vector<std::string>> patterns = NormalizePatterns(
      in.patterns,
      static_cast<size_t>(std::max<int64_t>(limits_.max_patterns, 1)),
      /*literal=*/false);
  if (!patterns.ok()) return patterns.status();

  storage::ReservationRequest r;
  r.reservation_id = new_id_();
  r.project_id = in.project_id;
  r.agent_id = in.agent_id;
  r.presence_generation = in.presence_generation;
  r.exclusive = in.exclusive;
  r.patterns = *std::move(patterns);
  r.reason = in.reason;
  r.now_ms = NowMs();
  r.ttl_ms = *ttl;
  r.max_per_agent = limits_.max_per_agent;
  r.max_per_project = limits_.max_per_project;
  r.waiter_id = waiter_id;
  absl::StatusOr<storage::ReservationOutcome> out = store_->Reserve(r);
  if (!out.ok()) return out.status();
  if (out->granted.has_value()) {
    Count(granted_, ReservationEvent::kGranted, 1);
    Committed();
  } else if (out->waiter_updated) {
    Committed();  // its `waiting` change names new blockers
  }
  return out;
}

absl::StatusOr<storage::ReservationWaiter> ReservationBook::Enqueue(
    const PathReserveInput& in, absl::Time deadline,
    std::vector<std::string> waits_for) {
  absl::StatusOr<std::vector<std::string>> patterns = NormalizePatterns(
      in.patterns,
      static_cast<size_t>(std::max<int64_t>(limits_.max_patterns, 1)),
      /*literal=*/false);
  if (!patterns.ok()) return patterns.status();
  storage::ReservationWaiter w;
  w.waiter_id = new_id_();
  w.project_id = in.project_id;
  w.agent_id = in.agent_id;
  w.exclusive = in.exclusive;
  w.created_at_ms = NowMs();
  w.deadline_ms = absl::ToUnixMillis(deadline);
  w.patterns = *std::move(patterns);
  w.waits_for = std::move(waits_for);
  absl::StatusOr<storage::ReservationWaiter> queued =
      store_->EnqueueReservationWaiter(w);
  if (queued.ok()) Committed();
  return queued;
}

void ReservationBook::LeaveQueue(const std::string& waiter_id) {
  absl::StatusOr<bool> left =
      store_->RemoveReservationWaiter(waiter_id, NowMs());
  // A failure leaves the row to the sweep once its deadline passed.
  if (left.ok() && *left) Committed();
}

absl::StatusOr<ReservationRecord> ReservationBook::Renew(
    const std::string& reservation_id, const std::string& agent_id,
    int64_t token, std::optional<absl::Duration> ttl) {
  if (absl::Status s = ValidateReservationId(reservation_id); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) return s;
  absl::StatusOr<int64_t> ttl_ms = TtlMs(ttl);
  if (!ttl_ms.ok()) return ttl_ms.status();
  absl::StatusOr<ReservationRecord> r = store_->RenewReservation(
      {reservation_id, agent_id, token, NowMs(), *ttl_ms});
  if (r.ok()) Committed();
  return r;
}

absl::StatusOr<std::optional<ReservationRecord>> ReservationBook::Release(
    const std::string& reservation_id, const std::string& agent_id,
    std::optional<int64_t> token, const std::vector<std::string>& patterns) {
  if (absl::Status s = ValidateReservationId(reservation_id); !s.ok()) return s;
  if (absl::Status s = ValidateAgentId(agent_id); !s.ok()) return s;
  storage::ReservationRelease r;
  r.reservation_id = reservation_id;
  r.agent_id = agent_id;
  r.token = token;
  r.now_ms = NowMs();
  if (!patterns.empty()) {
    absl::StatusOr<std::vector<std::string>> normalized = NormalizePatterns(
        patterns,
        static_cast<size_t>(std::max<int64_t>(limits_.max_patterns, 1)),
        /*literal=*/false);
    if (!normalized.ok()) return normalized.status();
    r.patterns = *std::move(normalized);
  }
  absl::StatusOr<std::optional<ReservationRecord>> left =
      store_->ReleaseReservation(r);
  if (left.ok() && !left->has_value()) {
    Count(released_, ReservationEvent::kReleased, 1);
  }
  if (left.ok()) Committed();
  return left;
}

absl::StatusOr<ReservationRecord> ReservationBook::Get(
    const std::string& reservation_id) {
  if (absl::Status s = ValidateReservationId(reservation_id); !s.ok()) return s;
  absl::StatusOr<std::optional<ReservationRecord>> r =
      store_->GetReservation(reservation_id, NowMs());
  if (!r.ok()) return r.status();
  if (!r->has_value()) return storage::ReservationNotFound(reservation_id);
  return **std::move(r);
}

absl::StatusOr<ReservationRecord> ReservationBook::ForceRelease(
    const std::string& reservation_id) {
  absl::StatusOr<ReservationRecord> held = Get(reservation_id);
  if (!held.ok()) return held.status();
  storage::ReservationRelease r;
  r.reservation_id = reservation_id;
  r.now_ms = NowMs();
  absl::StatusOr<std::optional<ReservationRecord>> left =
      store_->ReleaseReservation(r);
  if (!left.ok()) return left.status();
  Count(forced_, ReservationEvent::kForced, 1);
  Committed();
  return held;
}

absl::StatusOr<ReservationPage> ReservationBook::List(
    const ReservationListQuery& q) {
  storage::ReservationFilter f;
  if (q.project_id.has_value()) {
    if (absl::Status s = ValidateProject(*q.project_id); !s.ok()) return s;
    f.project_id = q.project_id;
  }
  f.projects = q.projects;
  if (q.agent_id.has_value()) {
    if (absl::Status s = ValidateAgentId(*q.agent_id); !s.ok()) return s;
    f.agent_id = q.agent_id;
  }
  if (q.path.has_value()) {
    if (!q.project_id.has_value()) {
      return InvalidArgumentError("REQUEST_INVALID",
                                  "a path filter needs a project_id");
    }
    absl::StatusOr<paths::PathPattern> p = paths::PathPattern::Parse(*q.path);
    if (!p.ok()) return p.status();
    f.overlapping = p->text();
  }
  if (q.page_size < 0 || q.page_size > 1000) {
    return InvalidArgumentError(
        "REQUEST_INVALID",
        absl::StrCat("page_size must be 0..1000, got ", q.page_size));
  }
  if (!q.page_token.empty()) {
    // The last reservation id of the previous page.
    if (q.page_token.size() > 64 ||
        q.page_token.find_first_not_of("0123456789abcdef-") !=
            std::string::npos) {
      return InvalidArgumentError("PAGE_TOKEN_INVALID",
                                  "page_token is not one this hub returned");
    }
    f.after_reservation_id = q.page_token;
  }
  const int size = q.page_size == 0 ? 100 : q.page_size;
  f.limit = size + 1;
  f.now_ms = NowMs();
  absl::StatusOr<std::vector<ReservationRecord>> rows =
      store_->ListReservations(f);
  if (!rows.ok()) return rows.status();
  ReservationPage page;
  if (static_cast<int>(rows->size()) > size) {
    rows->resize(size);
    page.next_page_token = rows->back().reservation_id;
  }
  page.reservations = *std::move(rows);
  return page;
}

absl::StatusOr<std::vector<storage::ReservationConflict>>
ReservationBook::Check(const PathCheckInput& in) {
  if (absl::Status s = ValidateProject(in.project_id); !s.ok()) return s;
  if (in.agent_id.has_value()) {
    if (absl::Status s = ValidateAgentId(*in.agent_id); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<std::string>> patterns =
      NormalizePatterns(in.patterns, kMaxCheckPaths, in.literal);
  if (!patterns.ok()) return patterns.status();
  storage::ReservationCheck c;
  c.project_id = in.project_id;
  c.agent_id = in.agent_id;
  c.exclusive = in.exclusive;
  c.patterns = *std::move(patterns);
  c.literal = in.literal;
  c.now_ms = NowMs();
  c.max_conflicts = kMaxReportedConflicts;
  return store_->CheckReservations(c);
}

void ReservationBook::OnAgentGone(const std::string& agent_id,
                                  int64_t generation) {
  absl::StatusOr<int64_t> n =
      store_->ReleaseAgentReservations(agent_id, generation, NowMs());
  // A failure leaves them to the sweep; they are not live either way.
  if (n.ok()) Count(holder_gone_, ReservationEvent::kHolderGone, *n);
  if (n.ok() && *n > 0) Committed();
}

int64_t ReservationBook::Sweep(absl::Duration interval) {
  const int64_t now = NowMs();
  int64_t last = last_sweep_ms_.load(std::memory_order_relaxed);
  if (now - last < absl::ToInt64Milliseconds(interval) ||
      !last_sweep_ms_.compare_exchange_strong(last, now)) {
    return 0;
  }
  absl::StatusOr<std::pair<int64_t, int64_t>> swept =
      store_->SweepReservations(now);
  if (!swept.ok()) return 0;  // the next pass tries again
  Count(expired_, ReservationEvent::kExpired, swept->first);
  Count(holder_gone_, ReservationEvent::kHolderGone, swept->second);
  if (swept->first + swept->second > 0) Committed();
  return swept->first + swept->second;
}

ReservationCounters ReservationBook::counters() const {
  ReservationCounters c;
  c.granted = granted_.load(std::memory_order_relaxed);
  c.conflicts = conflicts_.load(std::memory_order_relaxed);
  c.released = released_.load(std::memory_order_relaxed);
  c.forced = forced_.load(std::memory_order_relaxed);
  c.expired = expired_.load(std::memory_order_relaxed);
  c.holder_gone = holder_gone_.load(std::memory_order_relaxed);
  return c;
}

absl::Status ReservationBook::ValidateWatch(const std::string& project_id,
                                            const std::string& agent_id) {
  if (absl::Status s = ValidateProject(project_id); !s.ok()) return s;
  if (!agent_id.empty()) return ValidateAgentId(agent_id);
  return absl::OkStatus();
}

}  // namespace hub
