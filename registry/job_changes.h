// JobChangeTap: a JobStore that passes every call to another and tells,
// after each write that committed a change, which jobs it changed: the job
// written and the others the write changed with it (children released or
// cancelled), a claim, a heartbeat, a job created blocked, and a refused
// completion or failure whose result was kept as a late result. hubd builds
// its JobBook over one and publishes each change as a JobChanged fleet
// event (the console's jobs view and its hints to other hubs).
//
// JobBook's observer tells what a change means to others (claimable, ended,
// cancel requested, late result: JobNotices); it says nothing of claims,
// heartbeats or blocked jobs. Here every committed change is seen, at the
// one seam every write goes through. Thread-safe when `changed` is.
#ifndef HUB_REGISTRY_JOB_CHANGES_H_
#define HUB_REGISTRY_JOB_CHANGES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "storage/job_store.h"

namespace hub {

class JobChangeTap final : public storage::JobStore {
 public:
  // Told each changed job as it is after the write, on the thread that
  // made it (a store completion thread or an RPC's): must not block.
  using Listener = std::function<void(const JobRecord& job)>;

  // `inner` must outlive the tap.
  JobChangeTap(storage::JobStore* inner, Listener changed);

  absl::StatusOr<storage::JobOutcome> CreateJob(const JobRecord& job) override;
  absl::StatusOr<storage::JobOutcome> ClaimJob(
      const storage::JobClaim& claim) override;
  absl::StatusOr<storage::JobOutcome> HeartbeatJob(
      const JobAttemptFence& fence,
      const std::optional<std::string>& progress_json, int64_t now_ms) override;
  absl::StatusOr<storage::JobOutcome> CompleteJob(
      const JobAttemptFence& fence, const std::string& result_json,
      int64_t now_ms) override;
  absl::StatusOr<storage::JobOutcome> FailJob(
      const JobAttemptFence& fence,
      const storage::JobFailure& failure) override;
  absl::StatusOr<std::optional<JobRecord>> GetJob(
      absl::string_view job_id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(
      const storage::JobFilter& filter) override;
  absl::StatusOr<storage::JobOutcome> CancelJob(absl::string_view job_id,
                                                absl::string_view reason,
                                                int64_t now_ms) override;
  absl::StatusOr<storage::JobOutcome> RetryJob(absl::string_view job_id,
                                               int64_t now_ms) override;
  absl::StatusOr<storage::JobOutcome> AddJobDependency(
      absl::string_view job_id, const std::vector<std::string>& parent_ids,
      int64_t now_ms) override;
  absl::StatusOr<std::vector<JobRecord>> EndAttemptsOf(
      absl::string_view agent_id, int64_t generation, int64_t now_ms) override;
  absl::StatusOr<std::vector<JobRecord>> EndOrphanedAttempts(
      int64_t now_ms, int64_t limit) override;
  absl::StatusOr<std::vector<JobRecord>> SweepJobDeadlines(
      int64_t now_ms, int64_t limit) override;

 private:
  // Tells the outcome's jobs when the write committed a change.
  absl::StatusOr<storage::JobOutcome> Tell(
      absl::StatusOr<storage::JobOutcome> out) const;
  absl::StatusOr<std::vector<JobRecord>> Tell(
      absl::StatusOr<std::vector<JobRecord>> jobs) const;

  storage::JobStore* const inner_;
  const Listener changed_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_JOB_CHANGES_H_
