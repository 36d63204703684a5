// JobBook: jobs as the domain sees them (docs/design/jobs.md) over the
// store's JobStore. It stamps what the store needs (ids, times), turns the
// store's refusals into reason-coded statuses, and reacts to the fleet: a
// worker that is gone loses its attempts (OnAgentGone, from the
// coordinator), and attempts past their deadline end (Sweep, from the
// ticker). Thread-safe.
#ifndef HUB_REGISTRY_JOBS_H_
#define HUB_REGISTRY_JOBS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "records/job.h"
#include "registry/clock.h"
#include "storage/job_store.h"

namespace hub {

// What a job's committed change means to others (JobNotices).
enum class JobEvent {
  kClaimable,        // queued: created, released by its parents, retried
  kEnded,            // succeeded, failed, timed out or cancelled
  kCancelRequested,  // cancelled while an attempt runs
  kLateResult,       // a superseded attempt's result was kept
};

struct JobCounters {
  int64_t created = 0;
  int64_t claimed = 0;
  int64_t succeeded = 0;
  int64_t failed_attempts = 0;
  int64_t worker_gone = 0;   // attempts ended because their worker went
  int64_t timed_out = 0;     // attempts ended by their deadline
  int64_t stale_writes = 0;  // attempt writes refused by their fence
};

class JobBook {
 public:
  // `store` and `clock` must outlive the book; `new_id` draws job ids.
  JobBook(storage::JobStore* store, const Clock* clock,
          std::function<std::string()> new_id);

  // Stamps the job's id, creation time and first attempt, and stores it.
  // Returns the job and whether it was created (false: the idempotency key
  // returned an earlier job). Reasons: JOB_DEPENDENCY_NOT_FOUND.
  absl::StatusOr<std::pair<JobRecord, bool>> Create(JobRecord job);
  // The claimed job, or nullopt when nothing was claimable.
  absl::StatusOr<std::optional<JobRecord>> Claim(storage::JobClaim claim);
  // `progress_json` unset: the progress stays as it was.
  absl::StatusOr<JobRecord> Heartbeat(
      const JobAttemptFence& fence,
      const std::optional<std::string>& progress_json);
  absl::StatusOr<JobRecord> Complete(const JobAttemptFence& fence,
                                     const std::string& result_json);
  absl::StatusOr<JobRecord> Fail(const JobAttemptFence& fence,
                                 const JobError& error);
  absl::StatusOr<std::optional<JobRecord>> Get(const std::string& job_id);
  absl::StatusOr<std::vector<JobRecord>> List(const storage::JobFilter& f);
  absl::StatusOr<JobRecord> Cancel(const std::string& job_id,
                                   const std::string& reason);
  absl::StatusOr<JobRecord> Retry(const std::string& job_id);
  // Reasons: JOB_DEPENDENCY_CYCLE, JOB_DEPENDENCY_NOT_FOUND,
  // JOB_ALREADY_STARTED, ASSIGN_NOT_FOUND.
  absl::StatusOr<JobRecord> AddDependency(
      const std::string& job_id, const std::vector<std::string>& parent_ids);

  // The agent is gone at `generation`: each attempt it holds ends and its
  // job is queued again or fails (JobStore::EndAttemptsOf).
  void OnAgentGone(const std::string& agent_id, int64_t generation);
  // Ends the attempts whose deadline passed (JobStore::SweepJobDeadlines),
  // up to 1000 a call, and, at most once per `orphan_interval`, the
  // attempts of workers that are gone although no OnAgentGone ended them
  // (JobStore::EndOrphanedAttempts: this hub or another stopped before it
  // could). Returns how many jobs changed.
  int64_t Sweep(absl::Duration orphan_interval = absl::Seconds(5));

  JobCounters counters() const;

  // Told about each event of a committed change, on the thread that made
  // it, after the write (`late` for kLateResult). Set before serving.
  using Observer = std::function<void(const JobRecord&, JobEvent,
                                      const std::optional<JobLateResult>&)>;
  void SetObserver(Observer observer) { observer_ = std::move(observer); }

 private:
  int64_t NowMs() const { return absl::ToUnixMillis(clock_->Now()); }
  absl::StatusOr<JobRecord> AttemptWrite(
      const absl::StatusOr<storage::JobOutcome>& out,
      const JobAttemptFence& fence);
  // Tells the observer what each changed job's state means.
  void Changed(const JobRecord& job) const;
  void Changed(const std::vector<JobRecord>& jobs) const;
  void Changed(const storage::JobOutcome& outcome) const;

  storage::JobStore* const store_;
  const Clock* const clock_;
  const std::function<std::string()> new_id_;
  Observer observer_;
  std::atomic<int64_t> last_orphan_sweep_ms_{0};
  std::atomic<int64_t> created_{0}, claimed_{0}, succeeded_{0},
      failed_attempts_{0}, worker_gone_{0}, timed_out_{0}, stale_writes_{0};
};

}  // namespace hub

#endif  // HUB_REGISTRY_JOBS_H_
