#include "registry/job_changes.h"

#include <utility>

namespace hub {

JobChangeTap::JobChangeTap(storage::JobStore* inner, Listener changed)
    : inner_(inner), changed_(std::move(changed)) {}

absl::StatusOr<storage::JobOutcome> JobChangeTap::Tell(
    absl::StatusOr<storage::JobOutcome> out) const {
  if (!out.ok()) return out;
  // A refusal changed nothing, but for the late result it kept; an
  // idempotent create returned an earlier job.
  const bool committed =
      out->refusal == storage::JobRefusal::kNone || out->late_result_kept;
  if (committed && out->job.has_value()) changed_(*out->job);
  if (committed) {
    for (const JobRecord& job : out->also_changed) changed_(job);
  }
  return out;
}

absl::StatusOr<std::vector<JobRecord>> JobChangeTap::Tell(
    absl::StatusOr<std::vector<JobRecord>> jobs) const {
  if (jobs.ok()) {
    for (const JobRecord& job : *jobs) changed_(job);
  }
  return jobs;
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::CreateJob(
    const JobRecord& job) {
  absl::StatusOr<storage::JobOutcome> out = inner_->CreateJob(job);
  if (out.ok() && !out->created) return out;  // the key's earlier job
  return Tell(std::move(out));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::ClaimJob(
    const storage::JobClaim& claim) {
  return Tell(inner_->ClaimJob(claim));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::HeartbeatJob(
    const JobAttemptFence& fence,
    const std::optional<std::string>& progress_json, int64_t now_ms) {
  return Tell(inner_->HeartbeatJob(fence, progress_json, now_ms));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::CompleteJob(
    const JobAttemptFence& fence, const std::string& result_json,
    int64_t now_ms) {
  return Tell(inner_->CompleteJob(fence, result_json, now_ms));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::FailJob(
    const JobAttemptFence& fence, const storage::JobFailure& failure) {
  return Tell(inner_->FailJob(fence, failure));
}

absl::StatusOr<std::optional<JobRecord>> JobChangeTap::GetJob(
    absl::string_view job_id) {
  return inner_->GetJob(job_id);
}

absl::StatusOr<std::vector<JobRecord>> JobChangeTap::ListJobs(
    const storage::JobFilter& filter) {
  return inner_->ListJobs(filter);
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::CancelJob(
    absl::string_view job_id, absl::string_view reason, int64_t now_ms) {
  return Tell(inner_->CancelJob(job_id, reason, now_ms));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::RetryJob(
    absl::string_view job_id, int64_t now_ms) {
  return Tell(inner_->RetryJob(job_id, now_ms));
}

absl::StatusOr<storage::JobOutcome> JobChangeTap::AddJobDependency(
    absl::string_view job_id, const std::vector<std::string>& parent_ids,
    int64_t now_ms) {
  return Tell(inner_->AddJobDependency(job_id, parent_ids, now_ms));
}

absl::StatusOr<std::vector<JobRecord>> JobChangeTap::EndAttemptsOf(
    absl::string_view agent_id, int64_t generation, int64_t now_ms) {
  return Tell(inner_->EndAttemptsOf(agent_id, generation, now_ms));
}

absl::StatusOr<std::vector<JobRecord>> JobChangeTap::EndOrphanedAttempts(
    int64_t now_ms, int64_t limit) {
  return Tell(inner_->EndOrphanedAttempts(now_ms, limit));
}

absl::StatusOr<std::vector<JobRecord>> JobChangeTap::SweepJobDeadlines(
    int64_t now_ms, int64_t limit) {
  return Tell(inner_->SweepJobDeadlines(now_ms, limit));
}

}  // namespace hub
