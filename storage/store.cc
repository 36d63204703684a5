#include "storage/store.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "status/status.h"

namespace hub::storage {

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// NOT_FOUND for an agent id nobody registered, naming it (errors.proto).
absl::Status AgentNotFound(absl::string_view agent_id) {
  return WithMetadata(
      NotFoundError("AGENT_NOT_FOUND",
                    absl::StrCat("agent '", agent_id, "' not found")),
      "agent_id", agent_id);
}

std::string NewUuidV7() {
  static absl::Mutex mu(absl::kConstInit);
  static int64_t last_ms = 0;
  static int64_t seq = 0;
  static std::mt19937_64* rng = new std::mt19937_64(std::random_device{}());
  absl::MutexLock lock(&mu);
  int64_t ms = std::max(SystemNowMs(), last_ms);
  if (ms == last_ms) {
    if (++seq > 0xfff) {
      ++ms;
      seq = 0;
    }
  } else {
    seq = 0;
  }
  last_ms = ms;
  uint64_t rand_b = (*rng)();
  uint64_t hi =
      (static_cast<uint64_t>(ms) << 16) | 0x7000u | static_cast<uint64_t>(seq);
  uint64_t lo = (rand_b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32,
                         (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48,
                         lo & 0xffffffffffffULL);
}

absl::string_view RoleOutcomeName(RoleOutcome outcome) {
  switch (outcome) {
    case RoleOutcome::kApplied:
      return "ok";
    case RoleOutcome::kNotFound:
      return "not_found";
    case RoleOutcome::kStaleVersion:
      return "stale_version";
    case RoleOutcome::kStaleEpoch:
      return "stale_epoch";
    case RoleOutcome::kStaleActivationSeq:
      return "stale_activation_seq";
    case RoleOutcome::kStaleActivationId:
      return "stale_activation_id";
    case RoleOutcome::kInvalidCas:
      return "invalid_cas";
    case RoleOutcome::kCasConflict:
      return "cas_conflict";
  }
  return "unknown";
}

absl::Status ToStatus(RoleOutcome outcome) {
  std::string msg =
      absl::StrCat("role write refused: ", RoleOutcomeName(outcome));
  switch (outcome) {
    case RoleOutcome::kApplied:
      return absl::OkStatus();
    case RoleOutcome::kNotFound:
      return NotFoundError("ROLE_NOT_FOUND", msg);
    case RoleOutcome::kStaleVersion:
      return FailedPreconditionError("STALE_VERSION", msg);
    case RoleOutcome::kStaleEpoch:
      return FailedPreconditionError("STALE_EPOCH", msg);
    case RoleOutcome::kStaleActivationSeq:
      return FailedPreconditionError("STALE_ACTIVATION_SEQ", msg);
    case RoleOutcome::kStaleActivationId:
      return FailedPreconditionError("STALE_ACTIVATION_ID", msg);
    case RoleOutcome::kInvalidCas:
      return InvalidArgumentError("INVALID_CAS", msg);
    case RoleOutcome::kCasConflict:
      return AbortedError("CAS_CONFLICT", msg);
  }
  return AbortedError("CAS_CONFLICT", msg);
}

absl::Status ToStatus(PresenceOutcome outcome, absl::string_view agent_id) {
  switch (outcome) {
    case PresenceOutcome::kApplied:
      return absl::OkStatus();
    case PresenceOutcome::kNotFound:
      return AgentNotFound(agent_id);
    case PresenceOutcome::kStaleGeneration:
      return FailedPreconditionError(
          "STALE_PRESENCE_OWNER",
          absl::StrCat("agent '", agent_id,
                       "' was re-registered by a newer owner"));
  }
  return absl::OkStatus();
}

absl::Status ToStatus(const JobOutcome& outcome, absl::string_view what) {
  const std::string quoted = absl::StrCat("'", what, "'");
  auto with_job = [&](absl::Status s) {
    if (outcome.job.has_value()) {
      s = WithMetadata(std::move(s), "job_id", outcome.job->job_id);
      s = WithMetadata(std::move(s), "state", JobStateName(outcome.job->state));
      s = WithMetadata(std::move(s), "attempt",
                       absl::StrCat(outcome.job->attempt));
    }
    return s;
  };
  switch (outcome.refusal) {
    case JobRefusal::kNone:
      return absl::OkStatus();
    case JobRefusal::kNotFound:
      return NotFoundError("ASSIGN_NOT_FOUND", absl::StrCat("no job ", quoted));
    case JobRefusal::kAttemptMismatch:
      return with_job(FailedPreconditionError(
          "ASSIGN_ATTEMPT_MISMATCH",
          absl::StrCat("job ", quoted, " is at another attempt",
                       outcome.late_result_kept
                           ? "; the result is kept as a late result"
                           : "")));
    case JobRefusal::kWorkerMismatch:
      return with_job(FailedPreconditionError(
          "ASSIGN_WORKER_MISMATCH",
          absl::StrCat("the attempt of job ", quoted,
                       " is held by another worker, generation or role "
                       "epoch")));
    case JobRefusal::kNotRunning:
      return with_job(FailedPreconditionError(
          "JOB_NOT_RUNNING",
          absl::StrCat("job ", quoted, " has no running attempt")));
    case JobRefusal::kNotClaimable:
      return with_job(FailedPreconditionError(
          "JOB_NOT_CLAIMABLE",
          absl::StrCat("job ", quoted,
                       " is not queued and due for this worker")));
    case JobRefusal::kNotEnded:
      return with_job(FailedPreconditionError(
          "JOB_NOT_ENDED",
          absl::StrCat("job ", quoted,
                       " has not failed, timed out or been cancelled")));
    case JobRefusal::kAgentNotFound:
      return AgentNotFound(what);
    case JobRefusal::kAgentOffline:
      return WithMetadata(
          FailedPreconditionError(
              "AGENT_OFFLINE", absl::StrCat("agent ", quoted, " is offline")),
          "agent_id", what);
    case JobRefusal::kStaleGeneration:
      return WithMetadata(
          FailedPreconditionError(
              "STALE_PRESENCE_OWNER",
              absl::StrCat("agent ", quoted,
                           " is at another presence generation")),
          "agent_id", what);
    case JobRefusal::kDependencyCycle:
      return InvalidArgumentError(
          "JOB_DEPENDENCY_CYCLE",
          absl::StrCat("a dependency of ", quoted,
                       " depends on it already: the dependencies would form "
                       "a cycle"));
    case JobRefusal::kStarted:
      return with_job(FailedPreconditionError(
          "JOB_ALREADY_STARTED",
          absl::StrCat("job ", quoted,
                       " has started or ended: its dependencies are fixed")));
    case JobRefusal::kDependencyNotFound:
      return NotFoundError("JOB_DEPENDENCY_NOT_FOUND",
                           absl::StrCat("a dependency of ", quoted,
                                        " is not a job of its project"));
  }
  return absl::OkStatus();
}

absl::Status SeatLostError(absl::string_view hub_id) {
  return UnavailableError(
      "HUB_SEAT_LOST",
      absl::StrCat("hub ", hub_id,
                   " has no live seat in the database (it was declared dead "
                   "or left): it serves again once it rejoins"));
}

absl::Status Store::BackupTo(const std::string& path) {
  (void)path;
  return FailedPreconditionError(
      "BACKUP_UNSUPPORTED",
      absl::StrCat(
          "the ", Info().store_type,
          " store is not backed up through hub: use the database's "
          "own tools (pg_dump, pg_basebackup, streaming replication)"));
}

namespace {

absl::Status NoRoleChangeLog() {
  return ReasonError(absl::StatusCode::kUnimplemented,
                     "ROLE_CHANGE_LOG_UNSUPPORTED",
                     "this store keeps no role change log (one hub per "
                     "database publishes its own writes)");
}

}  // namespace

absl::StatusOr<std::vector<InboxRecord>>
MessageStore::MarkDeliveredManyIfUnacked(
    const std::vector<Delivery>& deliveries, int64_t now_ms) {
  std::vector<InboxRecord> marked;
  for (const Delivery& d : deliveries) {
    absl::StatusOr<std::optional<InboxRecord>> row =
        MarkDeliveredIfUnacked(d.message_id, d.agent_id, now_ms);
    if (row.ok()) {
      if (row->has_value()) marked.push_back(**std::move(row));
    } else if (row.status().code() != absl::StatusCode::kNotFound) {
      return row.status();
    }
  }
  return marked;
}

absl::StatusOr<int64_t> RoleStore::RoleChangeHead() {
  return NoRoleChangeLog();
}

absl::StatusOr<RoleChangePage> RoleStore::ReadRoleChanges(int64_t after_seq,
                                                          int64_t limit) {
  (void)after_seq;
  (void)limit;
  return NoRoleChangeLog();
}

absl::StatusOr<int64_t> RoleStore::PruneRoleChanges(int64_t keep_ms,
                                                    int64_t limit) {
  (void)keep_ms;
  (void)limit;
  return NoRoleChangeLog();
}

absl::Status CheckAckGeneration(int64_t current,
                                std::optional<int64_t> claimed) {
  if (!claimed.has_value() || *claimed == current) return absl::OkStatus();
  return FailedPreconditionError(
      "STALE_PRESENCE_OWNER", absl::StrCat("presence_generation ", *claimed,
                                           " is not current (", current, ")"));
}

absl::Status OwnedByAnotherError(absl::string_view agent_id,
                                 absl::string_view owner) {
  return WithMetadata(
      ReasonError(absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                  absl::StrCat("agent ", agent_id,
                               " is owned by another principal than ", owner)),
      "agent_id", agent_id);
}

absl::Status InboxFullError(absl::string_view agent_id, int64_t limit) {
  return WithMetadata(
      LimitExceededError("max_pending_per_inbox", limit,
                         absl::StrCat("agent ", agent_id, " already has ",
                                      limit, " unacknowledged messages")),
      "agent_id", agent_id);
}

absl::Status NotDeadLetterError(absl::string_view message_id,
                                MessageStatus status) {
  return WithMetadata(
      WithMetadata(
          FailedPreconditionError(
              "MESSAGE_NOT_DEAD_LETTER",
              absl::StrCat("message '", message_id, "' is ",
                           MessageStatusName(status),
                           ", not a dead letter: nothing to re-drive")),
          "message_id", message_id),
      "status", MessageStatusName(status));
}

absl::Status ScopeClosedError(absl::string_view wire) {
  return WithMetadata(
      FailedPreconditionError(
          kScopeClosedReason,
          "the lead scope is closed: its role, candidates and backlog were "
          "removed and the scope id is never reused"),
      "role_key_wire", wire);
}

}  // namespace hub::storage
