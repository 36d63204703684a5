// JobStore: jobs, their attempts, dependencies and late results
// (docs/design/jobs.md; the records are records/job.h's, the operations both
// engines share storage/job_ops.h's). The contracts every store method keeps
// are in storage/store.h.
//
// Every write of an attempt is fenced in SQL by the attempt's
// JobAttemptFence (job, attempt, worker, presence generation, role epoch)
// and a state that has a live attempt; a claim by the job's state and
// attempt. A lost fence is an outcome (JobOutcome::refusal), not a storage
// error; the refused write changes the job in nothing, but a refused
// completion or failure keeps its result as a late result in the same
// transaction.
#ifndef HUB_STORAGE_JOB_STORE_H_
#define HUB_STORAGE_JOB_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/job.h"

namespace hub::storage {

// Why a job write changed nothing.
enum class JobRefusal {
  kNone,
  kNotFound,            // NOT_FOUND / ASSIGN_NOT_FOUND
  kAttemptMismatch,     // ASSIGN_ATTEMPT_MISMATCH
  kWorkerMismatch,      // ASSIGN_WORKER_MISMATCH
  kNotRunning,          // JOB_NOT_RUNNING: ended, or no attempt bound
  kNotClaimable,        // JOB_NOT_CLAIMABLE
  kNotEnded,            // JOB_NOT_ENDED (RetryJob)
  kAgentNotFound,       // NOT_FOUND / AGENT_NOT_FOUND
  kAgentOffline,        // AGENT_OFFLINE
  kStaleGeneration,     // STALE_PRESENCE_OWNER
  kDependencyNotFound,  // NOT_FOUND / JOB_DEPENDENCY_NOT_FOUND
  kDependencyCycle,     // INVALID_ARGUMENT / JOB_DEPENDENCY_CYCLE
  kStarted,             // JOB_ALREADY_STARTED: not blocked or queued
};

// The result of a job write: the job after it (or as it is, when refused;
// unset when there is no such job, or nothing was claimable).
struct JobOutcome {
  JobRefusal refusal = JobRefusal::kNone;
  std::optional<JobRecord> job;
  // A refused CompleteJob/FailJob whose result was kept as a late result.
  bool late_result_kept = false;
  // CreateJob: false when the idempotency key returned an earlier job.
  bool created = false;
  // Other jobs this write changed (children released or cancelled by a
  // parent's end), as they are after it.
  std::vector<JobRecord> also_changed;
};

// The status a refusal travels as (OK for kNone); `what` names the job or
// agent in the message and metadata.
absl::Status ToStatus(const JobOutcome& outcome, absl::string_view what);

// A claim: the given job, or the next claimable one for the agent.
struct JobClaim {
  std::string agent_id;
  std::optional<int64_t> presence_generation;  // must be current when set
  std::string job_id;                          // "" : the next one
  std::string project_id;                      // "" : the agent's project
  std::string topic;                           // "" : any
  int64_t now_ms = 0;
};

// How an attempt ends other than by success.
struct JobFailure {
  JobError error;
  int64_t now_ms = 0;
};

struct JobFilter {
  // Each set field narrows the list (AND). Empty projects: any.
  std::vector<std::string> project_ids;
  std::string supervisor_agent;
  std::string worker_agent;
  std::vector<JobState> states;
  std::string trace_id;
  std::string correlation_id;
  std::optional<int64_t> deadline_before_ms;
  // Keyset: jobs after (updated_at_ms, job_id) in the order newest change
  // first, then job id descending.
  std::optional<int64_t> after_updated_at_ms;
  std::string after_job_id;
  int64_t limit = 50;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Inserts `job` (its id, timestamps and state as the caller set them:
  // kBlocked when it has dependencies, else kQueued) and its dependency
  // rows in one write. A dependency that is not a job of the project:
  // kDependencyNotFound, nothing written. A dependency that already
  // succeeded does not block; when every dependency succeeded the job is
  // stored kQueued. One that already failed, timed out or was cancelled
  // applies the job's on_dependency_failure at once. An idempotency key the
  // project already used returns that job (created = false).
  virtual absl::StatusOr<JobOutcome> CreateJob(const JobRecord& job) = 0;

  // Binds the current attempt of the given job, or of the next claimable
  // one (priority descending, then oldest), to the agent at its current
  // generation (kRunning, deadline now + timeout), fenced in SQL by the
  // job's state and attempt: exactly one of concurrent claimers wins. The
  // agent must exist (kAgentNotFound), not be offline (kAgentOffline), and
  // be at claim.presence_generation when set (kStaleGeneration). A job
  // that is not queued, not yet due, or targets another worker:
  // kNotClaimable. With no claimable job: no refusal and no job.
  virtual absl::StatusOr<JobOutcome> ClaimJob(const JobClaim& claim) = 0;

  // Records progress of the fenced attempt and moves its deadline to
  // min(now + timeout, created + 6 h). Refusals: kNotFound,
  // kAttemptMismatch, kWorkerMismatch, kNotRunning.
  // `progress_json` unset keeps the progress as it was.
  virtual absl::StatusOr<JobOutcome> HeartbeatJob(
      const JobAttemptFence& fence,
      const std::optional<std::string>& progress_json, int64_t now_ms) = 0;
  // The fenced attempt succeeded; children whose last parent this was are
  // queued (also_changed). Refused as HeartbeatJob, the result kept as a
  // late result when the job exists.
  virtual absl::StatusOr<JobOutcome> CompleteJob(const JobAttemptFence& fence,
                                                 const std::string& result_json,
                                                 int64_t now_ms) = 0;
  // The fenced attempt failed: a retry (next attempt, queued after the
  // backoff) when the error is retryable, not listed as non-retryable and
  // retries are left; else the job ends (kCancelled when cancellation was
  // requested, kFailed otherwise) and its children follow their policy.
  // Refused as CompleteJob.
  virtual absl::StatusOr<JobOutcome> FailJob(const JobAttemptFence& fence,
                                             const JobFailure& failure) = 0;

  virtual absl::StatusOr<std::optional<JobRecord>> GetJob(
      absl::string_view job_id) = 0;
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(
      const JobFilter& filter) = 0;

  // A blocked or queued job ends kCancelled (its children follow their
  // policy); a running one gets cancel_requested. An ended job is returned
  // as it is. kNotFound without the job.
  virtual absl::StatusOr<JobOutcome> CancelJob(absl::string_view job_id,
                                               absl::string_view reason,
                                               int64_t now_ms) = 0;
  // Adds `parent_ids` (jobs of the job's project) to the dependencies of a
  // job that has not started (blocked or queued), in one write that locks
  // the parents, then the job (the order a parent's end takes). A parent
  // that would close a cycle (the job, or a job that depends on it, however
  // indirectly): kDependencyCycle; one that is not a job of the project:
  // kDependencyNotFound; a job that started or ended: kStarted; nothing is
  // written then. The job is blocked while a parent has not succeeded, and
  // follows its on_dependency_failure at once for a parent that ended
  // otherwise.
  virtual absl::StatusOr<JobOutcome> AddJobDependency(
      absl::string_view job_id, const std::vector<std::string>& parent_ids,
      int64_t now_ms) = 0;
  // An ended job (failed, timed out, cancelled) gets a new attempt, queued
  // now, with one more retry allowed; its last error is kept. kNotEnded for
  // any other state, kNotFound without the job.
  virtual absl::StatusOr<JobOutcome> RetryJob(absl::string_view job_id,
                                              int64_t now_ms) = 0;

  // The agent at `generation` is gone: each attempt it holds ends (reason
  // `worker_gone`), fenced by that generation, and its job is queued for
  // the next attempt at once when retries are left, else it fails. Returns
  // the jobs it changed.
  virtual absl::StatusOr<std::vector<JobRecord>> EndAttemptsOf(
      absl::string_view agent_id, int64_t generation, int64_t now_ms) = 0;
  // Ends at most `limit` attempts whose worker is gone although no
  // EndAttemptsOf ended them (the hub that saw it go stopped first, or the
  // write failed): no agent row at the attempt's generation that is not
  // offline. As EndAttemptsOf otherwise.
  virtual absl::StatusOr<std::vector<JobRecord>> EndOrphanedAttempts(
      int64_t now_ms, int64_t limit) = 0;
  // Ends at most `limit` attempts whose deadline passed by `now_ms` (reason
  // `timed_out`; kCancelled when cancellation was requested), each exactly
  // once across hubs, and retries them as FailJob does. Returns the jobs it
  // changed.
  virtual absl::StatusOr<std::vector<JobRecord>> SweepJobDeadlines(
      int64_t now_ms, int64_t limit) = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_JOB_STORE_H_
