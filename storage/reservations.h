// Path reservations in the store (hub_reservations; docs/design/
// reservations.md): the records and inputs of ReservationStore's methods
// (storage/reservation_store.h), and the conflict decision both engines make
// inside their write.
//
// A reservation is a set of normalized path patterns (paths/path_pattern.h)
// an agent holds in a project, exclusive or shared, until its expiry. It is
// *live* while its expiry is in the future and its holder is present at the
// generation that reserved it (the agents row exists with that
// presence_generation and is not offline). Only live reservations conflict,
// are listed or renewed; the store decides liveness in the statement that
// reads them, so an ended reservation never conflicts even before a sweep
// deletes it.
#ifndef HUB_STORAGE_RESERVATIONS_H_
#define HUB_STORAGE_RESERVATIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub::storage {

struct ReservationRecord {
  std::string reservation_id;
  std::string project_id;
  std::string agent_id;
  int64_t presence_generation = 0;  // the holder's, when it reserved
  bool exclusive = false;
  // Fencing token: strictly increasing per project, one per granted
  // reservation.
  int64_t token = 0;
  std::string reason;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  std::vector<std::string> patterns;  // normalized, in the order reserved
  // Filled by ReservationStore::ListReservations only: the queued waiters of
  // other agents whose request conflicts with this reservation (the conflict
  // rules: either side exclusive and a pattern of each overlapping), how
  // many, and the first kMaxListedWaitingAgents of their agents, distinct,
  // in queue order.
  int64_t waiter_count = 0;
  std::vector<std::string> waiting_agent_ids;
  // A waiter's only (as the change log records one, kWaiting): what it
  // waits behind, ReservationWaiter::waits_for.
  std::vector<std::string> waits_for;
};

// ReservationRecord::waiting_agent_ids holds at most this many.
inline constexpr size_t kMaxListedWaitingAgents = 8;

// What happened to a reservation, as the change log records it
// (hub_reservation_changes).
enum class ReservationChangeKind {
  kGranted,
  kRenewed,     // its expiry moved
  kNarrowed,    // some of its patterns were released; it lives on
  kReleased,    // by its holder, whole
  kForced,      // released by an operator
  kExpired,     // its TTL passed (deleted by a sweep or a grant)
  kHolderGone,  // its holder deregistered, went offline, or was replaced
  // A waiting reserve joined its project's queue, or left it without a
  // grant (timed out, cancelled): `reservation` is the waiter (its id,
  // agent, mode and patterns, token 0, expiry = the wait's deadline).
  kWaiting,
  kWaitEnded,
};
// "granted", "renewed", "narrowed", "released", "forced", "expired",
// "holder_gone", "waiting", "wait_ended": the log's words.
absl::string_view ReservationChangeWord(ReservationChangeKind kind);
// nullopt for a word that is none of those.
std::optional<ReservationChangeKind> ReservationChangeKindOf(
    absl::string_view word);

// One committed change of the reservation change log
// (ReservationStore::ReadReservationChanges).
struct ReservationChange {
  // The change's place in commit order (increasing; commits of one project
  // are in the order their writes took the project's token row).
  int64_t seq = 0;
  ReservationChangeKind kind = ReservationChangeKind::kGranted;
  // When the write ran, by the writing hub's clock.
  int64_t written_at_ms = 0;
  // After the change; for an end, as it was.
  ReservationRecord reservation;
};
struct ReservationChangePage {
  std::vector<ReservationChange> changes;  // by seq
  // The newest seq committed as of the read.
  int64_t head = 0;
};

// A live reservation another request conflicts with, and the two patterns
// that overlap.
struct ReservationConflict {
  std::string reservation_id;
  std::string agent_id;
  bool exclusive = false;
  int64_t token = 0;
  int64_t expires_at_ms = 0;
  std::string held_pattern;  // the reservation's pattern
  std::string pattern;       // the request's pattern
  // Not a reservation but a waiter ahead in the queue (reservation_id is
  // its waiter id, token 0, expires_at_ms its deadline).
  bool waiting = false;
};

// A reserve waiting in its project's queue (hub_reservation_waiters): a
// later reserve of another agent that overlaps it conflicts with it, so the
// first waiter for a path gets it first.
struct ReservationWaiter {
  std::string waiter_id;
  std::string project_id;
  std::string agent_id;
  int64_t presence_generation = 0;
  bool exclusive = true;
  int64_t seq = 0;  // its place in the project's queue (Enqueue sets it)
  int64_t created_at_ms = 0;
  int64_t deadline_ms = 0;
  std::vector<std::string> patterns;  // normalized
  // What it waits behind: the ids of the reservations (or waiters ahead)
  // its last attempt conflicted with, distinct, in the order the attempt
  // reported them, at most kMaxWaiterBlockers (WaitsFor).
  std::vector<std::string> waits_for;
};

// ReservationWaiter::waits_for holds at most this many.
inline constexpr size_t kMaxWaiterBlockers = 4;
// The distinct ids of `conflicts`, in order, at most kMaxWaiterBlockers.
std::vector<std::string> WaitsFor(
    const std::vector<ReservationConflict>& conflicts);

// A waiter as the change log records it (kWaiting, kWaitEnded): its id as
// reservation_id, token 0, expires_at_ms its deadline.
ReservationRecord WaiterAsRecord(const ReservationWaiter& waiter);

// ReservationStore::SnapshotReservations: the live reservations, the queued
// waiters and the newest seq of the change log, from one snapshot: every change
// up to `head` is in them, no later one is.
struct ReservationSnapshot {
  std::vector<ReservationRecord> reservations;  // by reservation_id
  // Deadline ahead and agent present at its generation (the waiters that
  // count), by project, then seq.
  std::vector<ReservationWaiter> waiters;
  int64_t head = 0;
};

// ReservationStore::Reserve input. The patterns are normalized
// (PathPattern::text()), distinct, and at most a few dozen; the caller
// validated them.
struct ReservationRequest {
  std::string reservation_id;  // new, unique (UUIDv7)
  std::string project_id;
  std::string agent_id;
  // The caller's presence generation: when set it must be the agent's
  // (else STALE_PRESENCE_OWNER); unset: the agent's current one.
  std::optional<int64_t> presence_generation;
  bool exclusive = true;
  std::vector<std::string> patterns;
  std::string reason;
  int64_t now_ms = 0;
  int64_t ttl_ms = 0;
  // Live reservations the agent may hold in the project, and the project
  // altogether, counting this one; 0 = no limit. Past either: RESOURCE_
  // EXHAUSTED / LIMIT_EXCEEDED (max_reservations_per_agent,
  // max_reservations_per_project), nothing written.
  int64_t max_per_agent = 0;
  int64_t max_per_project = 0;
  // Conflicts reported at most (the decision still sees every one).
  size_t max_conflicts = 16;
  // The retry of this queued waiter: only the waiters ahead of it conflict,
  // and a grant takes it out of the queue. Unset: every overlapping waiter
  // of another agent conflicts.
  std::optional<std::string> waiter_id;
};

// ReservationStore::Reserve result: granted, or the conflicts (nothing
// written).
struct ReservationOutcome {
  std::optional<ReservationRecord> granted;
  std::vector<ReservationConflict> conflicts;
  // A waiter's retry that conflicted with something else than its row said
  // (ReservationWaiter::waits_for): the row now names the new blockers, and
  // a kWaiting change says so (a write was committed).
  bool waiter_updated = false;
};

// ReservationStore::CheckReservations input: what Reserve would conflict with,
// read only. `agent_id` set: that agent's own reservations never conflict.
struct ReservationCheck {
  std::string project_id;
  std::optional<std::string> agent_id;
  bool exclusive = true;
  std::vector<std::string> patterns;  // normalized
  // The patterns are paths of files: `*` and `?` are plain characters.
  bool literal = false;
  int64_t now_ms = 0;
  size_t max_conflicts = 16;
};

struct ReservationRenewal {
  std::string reservation_id;
  std::string agent_id;
  int64_t token = 0;
  int64_t now_ms = 0;
  int64_t ttl_ms = 0;
};

// ReservationStore::ReleaseReservation input. `agent_id` empty: a forced
// release by an operator (no holder or token fence).
struct ReservationRelease {
  std::string reservation_id;
  std::string agent_id;
  std::optional<int64_t> token;
  // Normalized patterns to release; empty: the whole reservation.
  std::vector<std::string> patterns;
  int64_t now_ms = 0;
};

// ReservationStore::ListReservations filters; they combine with AND. Live
// reservations only, by reservation_id.
struct ReservationFilter {
  std::optional<std::string> project_id;
  // Only reservations whose project is one of these, when set (an empty
  // list matches nothing). Not applied with `overlapping`, which names its
  // project.
  std::optional<std::vector<std::string>> projects;
  std::optional<std::string> agent_id;
  // Only reservations with a pattern overlapping this normalized pattern.
  // REQUIRES: project_id set.
  std::optional<std::string> overlapping;
  std::string after_reservation_id;  // keyset ("" = from the start)
  int64_t now_ms = 0;
  int64_t limit = 100;  // > 0
};

// One pattern row read as a possible conflict, with its reservation's
// holder and mode and whether it is live (decided by the statement).
struct ReservationCandidate {
  std::string reservation_id;
  std::string pattern;
  std::string agent_id;
  bool exclusive = false;
  int64_t token = 0;
  int64_t expires_at_ms = 0;
  bool live = false;
};

// The conflict rules (docs/design/reservations.md, "Conflicts"): a live
// candidate of another agent conflicts when either side is exclusive and
// the two patterns overlap. Conflicts come back by (reservation id, its
// pattern), one per (reservation, request pattern), at most
// max(max_conflicts, 1). `mine` and the candidates' patterns are normalized;
// `self` empty means no agent is exempt; `literal`: `mine` are paths
// (PathPattern::ParseLiteral).
std::vector<ReservationConflict> DecideConflicts(
    const std::vector<std::string>& mine, bool exclusive,
    absl::string_view self, const std::vector<ReservationCandidate>& candidates,
    size_t max_conflicts, bool literal = false);

// Whether a request of `patterns` in this mode by agent `self` conflicts
// with `held` (a reservation, or a waiter as the change log records one)
// under the same rules: `held` is of another agent, either side is
// exclusive, and a pattern of each overlaps.
bool RequestConflictsWith(const std::vector<std::string>& patterns,
                          bool exclusive, absl::string_view self,
                          const ReservationRecord& held);

// The candidate query's keys for `patterns`: every prefix a conflicting row
// can have at or above one of them (equality lookups), and the ranges below
// them; `whole_project` when a pattern's prefix is "" (every row).
struct CandidateKeys {
  std::vector<std::string> at_or_above;
  std::vector<std::pair<std::string, std::string>> below;  // [low, high)
  bool whole_project = false;
  // Only exclusive rows: the request is shared, and shared beside shared
  // never conflicts (the partial index of exclusive patterns serves it).
  bool exclusive_only = false;
};
CandidateKeys CandidateKeysFor(const std::vector<std::string>& patterns,
                               bool literal = false);

// The literal prefix of a normalized pattern (PathPattern::literal_prefix);
// of a path (`literal`), the path.
std::string ReservationPrefix(absl::string_view pattern, bool literal = false);

// FAILED_PRECONDITION / RESERVATION_CONFLICT naming the first conflict
// (metadata reservation_id, holder_agent_id, held_pattern, pattern,
// expires_at_ms, token, conflicts = how many were found; waiting = true when
// it is a waiter ahead in the queue).
absl::Status ReservationConflictError(
    const std::vector<ReservationConflict>& conflicts);
// NOT_FOUND / RESERVATION_NOT_FOUND (metadata reservation_id): no live
// reservation with that id.
absl::Status ReservationNotFound(absl::string_view reservation_id);

}  // namespace hub::storage

#endif  // HUB_STORAGE_RESERVATIONS_H_
