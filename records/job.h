// A job as hub records it (triflux's assign_jobs row with hub's columns),
// the states of a job and the attempt fence (docs/design/jobs.md).
#ifndef HUB_RECORDS_JOB_H_
#define HUB_RECORDS_JOB_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "records/stored_word.h"

namespace hub {

// Stored in assign_jobs.hub_state. triflux's own `status` column holds the
// nearest of its five words (TrifluxJobStatus).
enum class JobState {
  kBlocked,
  kQueued,
  kOffered,
  kRunning,
  kWaitingHuman,
  kSucceeded,
  kFailed,
  kTimedOut,
  kCancelled,
};

inline constexpr StoredWord<JobState> kJobStateWords[] = {
    {JobState::kBlocked, "blocked"},
    {JobState::kQueued, "queued"},
    {JobState::kOffered, "offered"},
    {JobState::kRunning, "running"},
    {JobState::kWaitingHuman, "waiting_human"},
    {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},
    {JobState::kTimedOut, "timed_out"},
    {JobState::kCancelled, "cancelled"},
};

inline absl::string_view JobStateName(JobState state) {
  return WordIn(kJobStateWords, state);
}
inline std::optional<JobState> ParseJobState(absl::string_view word) {
  return ValueIn<JobState>(kJobStateWords, word);
}
std::ostream& operator<<(std::ostream& out, JobState value);

// triflux's status word for a hub state: queued, running, succeeded, failed
// or timed_out.
inline absl::string_view TrifluxJobStatus(JobState state) {
  switch (state) {
    case JobState::kBlocked:
    case JobState::kQueued:
    case JobState::kOffered:
      return "queued";
    case JobState::kRunning:
    case JobState::kWaitingHuman:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kTimedOut:
      return "timed_out";
    case JobState::kFailed:
    case JobState::kCancelled:
      return "failed";
  }
  return "failed";
}

// The state a row that triflux wrote (no hub_state) is read as.
inline std::optional<JobState> JobStateOfTrifluxStatus(
    absl::string_view status) {
  if (status == "queued") return JobState::kQueued;
  if (status == "running") return JobState::kRunning;
  if (status == "succeeded") return JobState::kSucceeded;
  if (status == "failed") return JobState::kFailed;
  if (status == "timed_out") return JobState::kTimedOut;
  return std::nullopt;
}

inline bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kTimedOut || state == JobState::kCancelled;
}
// A worker holds the job's current attempt.
inline bool HasLiveAttempt(JobState state) {
  return state == JobState::kOffered || state == JobState::kRunning ||
         state == JobState::kWaitingHuman;
}

// Who works on a job: one agent, a role's holder, or any matching agent of
// the project. Stored in assign_jobs.worker_kind.
enum class JobWorkerKind { kAgent, kRole, kPool };
inline constexpr StoredWord<JobWorkerKind> kJobWorkerKindWords[] = {
    {JobWorkerKind::kAgent, "agent"},
    {JobWorkerKind::kRole, "role"},
    {JobWorkerKind::kPool, "pool"},
};
inline absl::string_view JobWorkerKindName(JobWorkerKind kind) {
  return WordIn(kJobWorkerKindWords, kind);
}
inline std::optional<JobWorkerKind> ParseJobWorkerKind(absl::string_view w) {
  return ValueIn<JobWorkerKind>(kJobWorkerKindWords, w);
}

// What a child does when a parent ends other than succeeded. Stored in
// assign_jobs.on_dependency_failure.
enum class JobDependencyFailure { kCancel, kBlock };
inline constexpr StoredWord<JobDependencyFailure> kJobDependencyFailureWords[] =
    {
        {JobDependencyFailure::kCancel, "cancel"},
        {JobDependencyFailure::kBlock, "block"},
};
inline absl::string_view JobDependencyFailureName(JobDependencyFailure f) {
  return WordIn(kJobDependencyFailureWords, f);
}
inline std::optional<JobDependencyFailure> ParseJobDependencyFailure(
    absl::string_view word) {
  return ValueIn<JobDependencyFailure>(kJobDependencyFailureWords, word);
}

// The backoff of the n-th retry: min(max, initial * multiplier^(n-1)),
// scaled by a factor in [1 - jitter, 1].
struct JobRetryPolicy {
  int64_t initial_backoff_ms = 1000;
  double multiplier = 2.0;
  int64_t max_backoff_ms = 300000;
  double jitter = 0.0;
  std::vector<std::string> non_retryable_reasons;
};

// Why an attempt ended other than succeeded (error_json).
struct JobError {
  std::string reason;
  std::string message;
  bool retryable = true;
  std::string details_json = "{}";
};

// A result of a superseded attempt, kept (hub_job_late_results).
struct JobLateResult {
  int64_t attempt = 0;
  std::string agent_id;
  std::optional<std::string> result_json;
  std::optional<JobError> error;
  int64_t reported_at_ms = 0;
};

// The fence every write of an attempt carries: all of it is in the
// UPDATE's WHERE clause.
struct JobAttemptFence {
  std::string job_id;
  int64_t attempt = 0;
  std::string agent_id;
  int64_t presence_generation = 0;
  int64_t role_epoch = 0;
};

struct JobRecord {
  std::string job_id;  // UUIDv7
  std::string project_id;
  // The supervisor: an agent (supervisor_agent) or a role (its wire, with
  // supervisor_agent "").
  std::string supervisor_agent;
  std::optional<std::string> supervisor_role_wire;
  JobWorkerKind worker_kind = JobWorkerKind::kAgent;
  // kAgent: the target agent. kRole, kPool: the agent of the latest attempt
  // ("" before the first claim), so triflux's worker column names who
  // works.
  std::string worker_agent;
  std::optional<std::string> worker_role_wire;  // kRole
  std::vector<std::string> pool_capabilities;   // kPool
  std::string pool_topic;                       // kPool; "" = any
  std::string topic = "assign.job";
  std::string task;
  std::string payload_json = "{}";
  int64_t priority = 5;
  int64_t timeout_ms = 600000;
  // triflux's max_retries: attempts = max_retries + 1.
  int64_t max_retries = 0;
  JobRetryPolicy retry_policy;
  std::vector<std::string> depends_on;
  JobDependencyFailure on_dependency_failure = JobDependencyFailure::kCancel;
  std::optional<std::string> idempotency_key;
  std::string trace_id;
  std::string correlation_id;

  JobState state = JobState::kQueued;
  // The current attempt, from 1. A claim binds it to a worker; an attempt
  // that ends and is retried makes the next one.
  int64_t attempt = 1;
  int64_t retry_count = 0;
  std::optional<std::string> attempt_worker;
  std::optional<int64_t> attempt_generation;
  std::optional<int64_t> attempt_role_epoch;
  std::optional<int64_t> not_before_ms;
  std::optional<int64_t> deadline_ms;
  bool cancel_requested = false;
  std::optional<std::string> progress_json;
  std::optional<std::string> result_json;
  std::optional<JobError> error;
  std::vector<JobLateResult> late_results;

  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::optional<int64_t> started_at_ms;
  std::optional<int64_t> dispatched_at_ms;
  std::optional<int64_t> completed_at_ms;
  std::optional<int64_t> last_retry_at_ms;
};

}  // namespace hub

#endif  // HUB_RECORDS_JOB_H_
