// The Store's job operations, written once for both engines
// (docs/design/jobs.md, "The store concern"). Each engine implements
// JobRows, the statements of one transaction over assign_jobs and hub's job
// tables in its own SQL; the operations below decide everything else.
//
// Every write reads the job first (PostgreSQL: FOR UPDATE, so two hubs'
// writes of one job serialize) and then writes it with UpdateFenced, whose
// WHERE clause holds what the decision was made on; a write that changes no
// row lost its fence to a writer the read did not see and is refused.
#ifndef HUB_STORAGE_JOB_OPS_H_
#define HUB_STORAGE_JOB_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/job.h"
#include "storage/job_store.h"

namespace hub::storage {

// What a fenced write of a job must still find: the job's state, attempt
// and the attempt's binding as the decision read them.
struct JobRowFence {
  std::string job_id;
  JobState state = JobState::kQueued;
  int64_t attempt = 0;
  std::optional<std::string> attempt_worker;
  std::optional<int64_t> attempt_generation;
  std::optional<int64_t> attempt_role_epoch;
};
JobRowFence FenceOf(const JobRecord& job);

// The claiming agent as its row says.
struct JobWorkerRow {
  int64_t presence_generation = 0;
  bool offline = false;
  std::optional<std::string> project_id;
  std::vector<std::string> capabilities;
  std::vector<std::string> topics;
};

// A role the agent holds active.
struct HeldRole {
  std::string role_key_wire;
  int64_t epoch = 0;
};

// A dependency of a job and its parent's state.
struct JobParent {
  std::string parent_id;
  JobState state = JobState::kQueued;
};

class JobRows {
 public:
  virtual ~JobRows() = default;

  // The job's row (depends_on and late_results left empty), nullopt
  // without one; `lock`: PostgreSQL takes its row lock (SELECT ... FOR
  // UPDATE), SQLite's single writer needs none.
  virtual absl::StatusOr<std::optional<JobRecord>> Load(
      absl::string_view job_id, bool lock) = 0;
  // The job of the project with this idempotency key.
  virtual absl::StatusOr<std::optional<JobRecord>> FindByIdempotencyKey(
      absl::string_view project_id, absl::string_view key) = 0;
  // Inserts the row (assign_jobs, with triflux's status word and max_retries
  // beside hub's columns); not its dependencies.
  virtual absl::Status Insert(const JobRecord& job) = 0;
  // Writes every mutable column of `next` where the row still matches
  // `fence` (job id, hub_state, attempt, attempt_worker, attempt_generation
  // and attempt_role_epoch, NULLs matching NULLs). Returns whether a row
  // changed.
  virtual absl::StatusOr<bool> UpdateFenced(const JobRecord& next,
                                            const JobRowFence& fence) = 0;

  virtual absl::Status InsertDependency(absl::string_view job_id,
                                        absl::string_view parent_id) = 0;
  // The job's parents with their states, by parent id.
  virtual absl::StatusOr<std::vector<JobParent>> Parents(
      absl::string_view job_id) = 0;
  // The ids of the jobs that depend on `parent_id`, by id.
  virtual absl::StatusOr<std::vector<std::string>> Children(
      absl::string_view parent_id) = 0;

  // Records who holds attempt `fence.attempt` of the job (a claim).
  virtual absl::Status InsertAttempt(const JobAttemptFence& fence,
                                     int64_t claimed_at_ms) = 0;
  // Who held the attempt, nullopt when it was never claimed.
  virtual absl::StatusOr<std::optional<JobAttemptFence>> AttemptHolder(
      absl::string_view job_id, int64_t attempt) = 0;
  virtual absl::Status InsertLateResult(absl::string_view job_id,
                                        const JobLateResult& late) = 0;
  // Oldest first.
  virtual absl::StatusOr<std::vector<JobLateResult>> LateResults(
      absl::string_view job_id) = 0;

  // The agent's row, nullopt without one.
  virtual absl::StatusOr<std::optional<JobWorkerRow>> Worker(
      absl::string_view agent_id) = 0;
  // The roles of the project the agent holds active.
  virtual absl::StatusOr<std::vector<HeldRole>> HeldRoles(
      absl::string_view agent_id, absl::string_view project_id) = 0;
  // At most `limit` queued jobs of the project due at `now_ms` (not_before
  // unset or passed), of `topic` when not empty, whose target is the agent,
  // one of `role_wires` or a pool; priority descending, then created, then
  // id. PostgreSQL locks them, skipping rows another transaction holds
  // (FOR UPDATE SKIP LOCKED).
  virtual absl::StatusOr<std::vector<JobRecord>> Claimable(
      absl::string_view project_id, absl::string_view agent_id,
      const std::vector<std::string>& role_wires, absl::string_view topic,
      int64_t now_ms, int64_t limit) = 0;
  // Jobs whose live attempt (offered, running, waiting_human) is bound to
  // the agent at `generation`; PostgreSQL locks them.
  virtual absl::StatusOr<std::vector<JobRecord>> AttemptsOf(
      absl::string_view agent_id, int64_t generation) = 0;
  // Whether some live attempt's deadline is at or before `now_ms` (a read
  // that locks nothing).
  virtual absl::StatusOr<bool> AnyDueDeadline(int64_t now_ms) = 0;
  // At most `limit` jobs with a live attempt whose deadline is at or before
  // `now_ms`, by deadline; PostgreSQL locks them, skipping locked rows.
  virtual absl::StatusOr<std::vector<JobRecord>> DueDeadlines(
      int64_t now_ms, int64_t limit) = 0;
  // At most `limit` jobs with a live attempt whose worker is gone: no
  // agent row at the attempt's generation that is not offline; PostgreSQL
  // locks them, skipping locked rows.
  virtual absl::StatusOr<std::vector<JobRecord>> OrphanedAttempts(
      int64_t limit) = 0;
  // A page of ListJobs.
  virtual absl::StatusOr<std::vector<JobRecord>> Page(
      const JobFilter& filter) = 0;
};

// JobStore's methods over one transaction's rows (job_store.h says what
// each does).
absl::StatusOr<JobOutcome> CreateJobWith(JobRows& rows, const JobRecord& job);
absl::StatusOr<JobOutcome> ClaimJobWith(JobRows& rows, const JobClaim& claim);
absl::StatusOr<JobOutcome> HeartbeatJobWith(
    JobRows& rows, const JobAttemptFence& fence,
    const std::optional<std::string>& progress_json, int64_t now_ms);
absl::StatusOr<JobOutcome> CompleteJobWith(JobRows& rows,
                                           const JobAttemptFence& fence,
                                           const std::string& result_json,
                                           int64_t now_ms);
absl::StatusOr<JobOutcome> FailJobWith(JobRows& rows,
                                       const JobAttemptFence& fence,
                                       const JobFailure& failure);
absl::StatusOr<std::optional<JobRecord>> GetJobWith(JobRows& rows,
                                                    absl::string_view job_id);
absl::StatusOr<std::vector<JobRecord>> ListJobsWith(JobRows& rows,
                                                    const JobFilter& filter);
absl::StatusOr<JobOutcome> CancelJobWith(JobRows& rows,
                                         absl::string_view job_id,
                                         absl::string_view reason,
                                         int64_t now_ms);
absl::StatusOr<JobOutcome> AddJobDependencyWith(
    JobRows& rows, absl::string_view job_id,
    const std::vector<std::string>& parent_ids, int64_t now_ms);
// How many jobs a cycle check walks at most; a longer chain of ancestors is
// refused as kDependencyCycle.
inline constexpr int64_t kMaxDependencyWalk = 10'000;
absl::StatusOr<JobOutcome> RetryJobWith(JobRows& rows, absl::string_view job_id,
                                        int64_t now_ms);
absl::StatusOr<std::vector<JobRecord>> EndAttemptsOfWith(
    JobRows& rows, absl::string_view agent_id, int64_t generation,
    int64_t now_ms);
absl::StatusOr<std::vector<JobRecord>> EndOrphanedAttemptsWith(JobRows& rows,
                                                               int64_t now_ms,
                                                               int64_t limit);
absl::StatusOr<std::vector<JobRecord>> SweepJobDeadlinesWith(JobRows& rows,
                                                             int64_t now_ms,
                                                             int64_t limit);

// The wait before retry number `retry` (1 for the first) of `job_id` under
// `policy`: min(max, initial * multiplier^(retry-1)) scaled by a factor in
// [1 - jitter, 1] drawn from a hash of the job id and the retry, so every
// hub computes the same wait.
int64_t JobBackoffMs(const JobRetryPolicy& policy, absl::string_view job_id,
                     int64_t retry);

// The latest deadline an attempt may have: triflux's hard ceiling of 6 h
// after the job was created.
inline constexpr int64_t kJobHardCeilingMs = 6 * 3600 * 1000;

// JSON of the columns hub stores as JSON.
std::string RetryPolicyJson(const JobRetryPolicy& policy);
JobRetryPolicy ParseRetryPolicyJson(absl::string_view json);
std::string JobErrorJson(const JobError& error);
std::optional<JobError> ParseJobErrorJson(absl::string_view json);
std::string StringListJson(const std::vector<std::string>& values);
// The pool_filter_json a pool job is stored with:
// {"capabilities":[...],"topic":"..."}; nullopt for any other job.
std::optional<std::string> PoolFilterJson(const JobRecord& job);
std::vector<std::string> ParseStringListJson(absl::string_view json);

// The columns both engines select for a job, and their reader over either
// engine's row (Text, Int, OptText, OptInt).
#define HUB_JOB_COLUMNS                                                       \
  "job_id, project_id, supervisor_agent, supervisor_role_wire, worker_kind, " \
  "worker_agent, worker_role_wire, pool_filter_json, topic, task, "           \
  "payload_json, priority, timeout_ms, max_retries, retry_policy_json, "      \
  "on_dependency_failure, idempotency_key, trace_id, correlation_id, "        \
  "hub_state, status, attempt, retry_count, attempt_worker, "                 \
  "attempt_generation, attempt_role_epoch, not_before_ms, deadline_ms, "      \
  "cancel_requested, progress_json, result_json, error_json, "                \
  "created_at_ms, updated_at_ms, started_at_ms, dispatched_at_ms, "           \
  "completed_at_ms, last_retry_at_ms"

JobRecord ReadJobFields(const std::vector<std::optional<std::string>>& text,
                        const std::vector<std::optional<int64_t>>& ints);

template <typename Row>
JobRecord ReadJobColumns(const Row& s) {
  // Columns read as text and as integers, by the order of HUB_JOB_COLUMNS.
  std::vector<std::optional<std::string>> text(38);
  std::vector<std::optional<int64_t>> ints(38);
  for (int i : {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                14, 15, 16, 17, 18, 19, 20, 23, 29, 30, 31}) {
    text[i] = s.OptText(i);
  }
  for (int i :
       {11, 12, 13, 21, 22, 24, 25, 26, 27, 28, 32, 33, 34, 35, 36, 37}) {
    ints[i] = s.OptInt(i);
  }
  return ReadJobFields(text, ints);
}

}  // namespace hub::storage

#endif  // HUB_STORAGE_JOB_OPS_H_
