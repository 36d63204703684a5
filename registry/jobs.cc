#include "registry/jobs.h"

#include <utility>

namespace hub {

JobBook::JobBook(storage::JobStore* store, const Clock* clock,
                 std::function<std::string()> new_id)
    : store_(store), clock_(clock), new_id_(std::move(new_id)) {}

void JobBook::Changed(const JobRecord& job) const {
  if (!observer_) return;
  if (job.state == JobState::kQueued) {
    observer_(job, JobEvent::kClaimable, std::nullopt);
  } else if (IsTerminal(job.state)) {
    observer_(job, JobEvent::kEnded, std::nullopt);
  }
}

void JobBook::Changed(const std::vector<JobRecord>& jobs) const {
  for (const JobRecord& job : jobs) Changed(job);
}

void JobBook::Changed(const storage::JobOutcome& outcome) const {
  if (outcome.job.has_value()) Changed(*outcome.job);
  Changed(outcome.also_changed);
}

absl::StatusOr<std::pair<JobRecord, bool>> JobBook::Create(JobRecord job) {
  const int64_t now = NowMs();
  job.job_id = new_id_();
  job.created_at_ms = now;
  job.updated_at_ms = now;
  job.attempt = 1;
  job.retry_count = 0;
  absl::StatusOr<storage::JobOutcome> out = store_->CreateJob(job);
  if (!out.ok()) return out.status();
  if (absl::Status s = ToStatus(*out, job.job_id); !s.ok()) return s;
  if (out->created) {
    created_.fetch_add(1, std::memory_order_relaxed);
    Changed(*out);
  }
  return std::make_pair(std::move(*out->job), out->created);
}

absl::StatusOr<std::optional<JobRecord>> JobBook::Claim(
    storage::JobClaim claim) {
  claim.now_ms = NowMs();
  absl::StatusOr<storage::JobOutcome> out = store_->ClaimJob(claim);
  if (!out.ok()) return out.status();
  const bool about_agent =
      out->refusal == storage::JobRefusal::kAgentNotFound ||
      out->refusal == storage::JobRefusal::kAgentOffline ||
      out->refusal == storage::JobRefusal::kStaleGeneration;
  if (absl::Status s =
          ToStatus(*out, about_agent ? claim.agent_id : claim.job_id);
      !s.ok()) {
    return s;
  }
  if (out->job.has_value()) claimed_.fetch_add(1, std::memory_order_relaxed);
  return std::move(out->job);
}

absl::StatusOr<JobRecord> JobBook::AttemptWrite(
    const absl::StatusOr<storage::JobOutcome>& out,
    const JobAttemptFence& fence) {
  if (!out.ok()) return out.status();
  if (out->refusal != storage::JobRefusal::kNone) {
    stale_writes_.fetch_add(1, std::memory_order_relaxed);
    if (out->late_result_kept && observer_ && out->job.has_value()) {
      // The late result just kept: the job's entry for the fenced attempt.
      for (const JobLateResult& late : out->job->late_results) {
        if (late.attempt == fence.attempt) {
          observer_(*out->job, JobEvent::kLateResult, late);
        }
      }
    }
    return ToStatus(*out, fence.job_id);
  }
  if (out->job.has_value() && out->job->state != JobState::kRunning) {
    Changed(*out);
  } else {
    Changed(out->also_changed);
  }
  return *out->job;
}

absl::StatusOr<JobRecord> JobBook::Heartbeat(
    const JobAttemptFence& fence, const std::optional<std::string>& progress) {
  return AttemptWrite(store_->HeartbeatJob(fence, progress, NowMs()), fence);
}

absl::StatusOr<JobRecord> JobBook::Complete(const JobAttemptFence& fence,
                                            const std::string& result) {
  absl::StatusOr<JobRecord> job =
      AttemptWrite(store_->CompleteJob(fence, result, NowMs()), fence);
  if (job.ok()) succeeded_.fetch_add(1, std::memory_order_relaxed);
  return job;
}

absl::StatusOr<JobRecord> JobBook::Fail(const JobAttemptFence& fence,
                                        const JobError& error) {
  storage::JobFailure failure;
  failure.error = error;
  failure.now_ms = NowMs();
  absl::StatusOr<JobRecord> job =
      AttemptWrite(store_->FailJob(fence, failure), fence);
  if (job.ok()) failed_attempts_.fetch_add(1, std::memory_order_relaxed);
  return job;
}

absl::StatusOr<std::optional<JobRecord>> JobBook::Get(
    const std::string& job_id) {
  return store_->GetJob(job_id);
}

absl::StatusOr<std::vector<JobRecord>> JobBook::List(
    const storage::JobFilter& filter) {
  return store_->ListJobs(filter);
}

absl::StatusOr<JobRecord> JobBook::Cancel(const std::string& job_id,
                                          const std::string& reason) {
  absl::StatusOr<storage::JobOutcome> out =
      store_->CancelJob(job_id, reason, NowMs());
  if (!out.ok()) return out.status();
  if (absl::Status s = ToStatus(*out, job_id); !s.ok()) return s;
  if (HasLiveAttempt(out->job->state)) {
    if (observer_) {
      observer_(*out->job, JobEvent::kCancelRequested, std::nullopt);
    }
  } else {
    Changed(*out);
  }
  return *out->job;
}

absl::StatusOr<JobRecord> JobBook::Retry(const std::string& job_id) {
  absl::StatusOr<storage::JobOutcome> out = store_->RetryJob(job_id, NowMs());
  if (!out.ok()) return out.status();
  if (absl::Status s = ToStatus(*out, job_id); !s.ok()) return s;
  Changed(*out);
  return *out->job;
}

absl::StatusOr<JobRecord> JobBook::AddDependency(
    const std::string& job_id, const std::vector<std::string>& parent_ids) {
  absl::StatusOr<storage::JobOutcome> out =
      store_->AddJobDependency(job_id, parent_ids, NowMs());
  if (!out.ok()) return out.status();
  if (absl::Status s = ToStatus(*out, job_id); !s.ok()) return s;
  Changed(*out);
  return *out->job;
}

void JobBook::OnAgentGone(const std::string& agent_id, int64_t generation) {
  absl::StatusOr<std::vector<JobRecord>> ended =
      store_->EndAttemptsOf(agent_id, generation, NowMs());
  // A failure leaves the attempts to the orphan sweep.
  if (!ended.ok()) return;
  Changed(*ended);
  int64_t gone = 0;
  for (const JobRecord& job : *ended) {
    if (job.error.has_value() && job.error->reason == "worker_gone") ++gone;
  }
  worker_gone_.fetch_add(gone, std::memory_order_relaxed);
}

int64_t JobBook::Sweep(absl::Duration orphan_interval) {
  const int64_t now = NowMs();
  int64_t orphans = 0;
  int64_t last = last_orphan_sweep_ms_.load(std::memory_order_relaxed);
  if (now - last >= absl::ToInt64Milliseconds(orphan_interval) &&
      last_orphan_sweep_ms_.compare_exchange_strong(last, now)) {
    absl::StatusOr<std::vector<JobRecord>> ended =
        store_->EndOrphanedAttempts(now, 1000);
    if (ended.ok()) {
      Changed(*ended);
      orphans = static_cast<int64_t>(ended->size());
      worker_gone_.fetch_add(orphans, std::memory_order_relaxed);
    }
  }
  absl::StatusOr<std::vector<JobRecord>> swept =
      store_->SweepJobDeadlines(now, 1000);
  if (!swept.ok()) return orphans;  // the next pass tries again
  Changed(*swept);
  int64_t timed_out = 0;
  for (const JobRecord& job : *swept) {
    if (job.error.has_value() && job.error->reason == "timed_out") ++timed_out;
  }
  timed_out_.fetch_add(timed_out, std::memory_order_relaxed);
  return orphans + static_cast<int64_t>(swept->size());
}

JobCounters JobBook::counters() const {
  JobCounters c;
  c.created = created_.load(std::memory_order_relaxed);
  c.claimed = claimed_.load(std::memory_order_relaxed);
  c.succeeded = succeeded_.load(std::memory_order_relaxed);
  c.failed_attempts = failed_attempts_.load(std::memory_order_relaxed);
  c.worker_gone = worker_gone_.load(std::memory_order_relaxed);
  c.timed_out = timed_out_.load(std::memory_order_relaxed);
  c.stale_writes = stale_writes_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace hub
