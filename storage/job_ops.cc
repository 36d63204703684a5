#include "storage/job_ops.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {
namespace {

// A worker's error, or hub's own (timed_out, worker_gone, cancelled,
// dependency_failed).
JobError HubError(absl::string_view reason, std::string message) {
  JobError e;
  e.reason = std::string(reason);
  e.message = std::move(message);
  return e;
}

bool PoolMatches(const JobRecord& job, const JobWorkerRow& worker) {
  for (const std::string& cap : job.pool_capabilities) {
    if (std::find(worker.capabilities.begin(), worker.capabilities.end(),
                  cap) == worker.capabilities.end()) {
      return false;
    }
  }
  return job.pool_topic.empty() ||
         std::find(worker.topics.begin(), worker.topics.end(),
                   job.pool_topic) != worker.topics.end();
}

// The role epoch the agent holds the job's role at, when it is the job's
// worker; nullopt when it is not (for a role job: not its holder).
std::optional<std::optional<int64_t>> TargetOf(
    const JobRecord& job, absl::string_view agent_id,
    const JobWorkerRow& worker, const std::vector<HeldRole>& roles) {
  switch (job.worker_kind) {
    case JobWorkerKind::kAgent:
      if (job.worker_agent == agent_id) return std::optional<int64_t>();
      return std::nullopt;
    case JobWorkerKind::kRole:
      for (const HeldRole& role : roles) {
        if (job.worker_role_wire == role.role_key_wire) {
          return std::optional<int64_t>(role.epoch);
        }
      }
      return std::nullopt;
    case JobWorkerKind::kPool:
      if (PoolMatches(job, worker)) return std::optional<int64_t>();
      return std::nullopt;
  }
  return std::nullopt;
}

int64_t AttemptDeadline(const JobRecord& job, int64_t now_ms) {
  return std::min(now_ms + job.timeout_ms,
                  job.created_at_ms + kJobHardCeilingMs);
}

absl::StatusOr<JobRecord> LoadFull(JobRows& rows, const JobRecord& row) {
  JobRecord job = row;
  absl::StatusOr<std::vector<JobParent>> parents = rows.Parents(job.job_id);
  if (!parents.ok()) return parents.status();
  job.depends_on.clear();
  for (const JobParent& p : *parents) job.depends_on.push_back(p.parent_id);
  absl::StatusOr<std::vector<JobLateResult>> late =
      rows.LateResults(job.job_id);
  if (!late.ok()) return late.status();
  job.late_results = std::move(*late);
  return job;
}

// Writes `next` over `read` (fenced by what was read); false when another
// writer changed the row since.
absl::StatusOr<bool> Write(JobRows& rows, const JobRecord& read,
                           const JobRecord& next) {
  return rows.UpdateFenced(next, FenceOf(read));
}

// The job as it ends in `state` with `error` (unset for success).
JobRecord Ended(const JobRecord& job, JobState state,
                std::optional<JobError> error, int64_t now_ms) {
  JobRecord next = job;
  next.state = state;
  if (error.has_value()) next.error = std::move(error);
  next.deadline_ms.reset();
  next.not_before_ms.reset();
  next.completed_at_ms = now_ms;
  next.updated_at_ms = now_ms;
  return next;
}

// The job's next attempt, queued (after the policy's backoff when
// `backoff`), the ended attempt's error kept.
JobRecord Requeued(const JobRecord& job, std::optional<JobError> error,
                   bool backoff, int64_t now_ms) {
  JobRecord next = job;
  next.state = JobState::kQueued;
  next.attempt = job.attempt + 1;
  next.retry_count = job.retry_count + 1;
  next.attempt_worker.reset();
  next.attempt_generation.reset();
  next.attempt_role_epoch.reset();
  next.deadline_ms.reset();
  next.started_at_ms.reset();
  next.dispatched_at_ms.reset();
  next.completed_at_ms.reset();
  next.progress_json.reset();
  if (error.has_value()) next.error = std::move(error);
  next.last_retry_at_ms = now_ms;
  next.updated_at_ms = now_ms;
  if (backoff) {
    next.not_before_ms =
        now_ms + JobBackoffMs(job.retry_policy, job.job_id, next.retry_count);
  } else {
    next.not_before_ms.reset();
  }
  return next;
}

bool Retryable(const JobRecord& job, const JobError& error) {
  if (!error.retryable || job.cancel_requested) return false;
  if (job.retry_count >= job.max_retries) return false;
  const std::vector<std::string>& never =
      job.retry_policy.non_retryable_reasons;
  return std::find(never.begin(), never.end(), error.reason) == never.end();
}

// The parent ended other than succeeded: each blocked child whose policy is
// kCancel ends cancelled, and so on down; kBlock children stay blocked.
absl::Status ApplyParentFailure(JobRows& rows, const JobRecord& parent,
                                int64_t now_ms, std::vector<JobRecord>* out) {
  std::deque<std::pair<std::string, std::string>> ended = {
      {parent.job_id, std::string(JobStateName(parent.state))}};
  std::set<std::string> seen;
  while (!ended.empty()) {
    auto [parent_id, parent_state] = std::move(ended.front());
    ended.pop_front();
    absl::StatusOr<std::vector<std::string>> children =
        rows.Children(parent_id);
    if (!children.ok()) return children.status();
    for (const std::string& id : *children) {
      if (!seen.insert(id).second) continue;
      absl::StatusOr<std::optional<JobRecord>> child = rows.Load(id, true);
      if (!child.ok()) return child.status();
      if (!child->has_value() || (*child)->state != JobState::kBlocked ||
          (*child)->on_dependency_failure != JobDependencyFailure::kCancel) {
        continue;
      }
      JobRecord next = Ended(
          **child, JobState::kCancelled,
          HubError("dependency_failed", absl::StrCat("dependency ", parent_id,
                                                     " ended ", parent_state)),
          now_ms);
      absl::StatusOr<bool> written = Write(rows, **child, next);
      if (!written.ok()) return written.status();
      if (!*written) continue;
      out->push_back(next);
      ended.emplace_back(id, "cancelled");
    }
  }
  return absl::OkStatus();
}

// The parent succeeded: each blocked child whose parents all succeeded is
// queued.
absl::Status ReleaseChildren(JobRows& rows, absl::string_view parent_id,
                             int64_t now_ms, std::vector<JobRecord>* out) {
  absl::StatusOr<std::vector<std::string>> children = rows.Children(parent_id);
  if (!children.ok()) return children.status();
  for (const std::string& id : *children) {
    absl::StatusOr<std::optional<JobRecord>> child = rows.Load(id, true);
    if (!child.ok()) return child.status();
    if (!child->has_value() || (*child)->state != JobState::kBlocked) continue;
    absl::StatusOr<std::vector<JobParent>> parents = rows.Parents(id);
    if (!parents.ok()) return parents.status();
    bool all = std::all_of(
        parents->begin(), parents->end(),
        [](const JobParent& p) { return p.state == JobState::kSucceeded; });
    if (!all) continue;
    JobRecord next = **child;
    next.state = JobState::kQueued;
    next.updated_at_ms = now_ms;
    absl::StatusOr<bool> written = Write(rows, **child, next);
    if (!written.ok()) return written.status();
    if (*written) out->push_back(next);
  }
  return absl::OkStatus();
}

// What follows a job's end in `next.state`: children released or failed.
absl::Status AfterEnd(JobRows& rows, const JobRecord& next, int64_t now_ms,
                      std::vector<JobRecord>* out) {
  if (next.state == JobState::kSucceeded) {
    return ReleaseChildren(rows, next.job_id, now_ms, out);
  }
  if (IsTerminal(next.state)) {
    return ApplyParentFailure(rows, next, now_ms, out);
  }
  return absl::OkStatus();
}

// Why the fenced attempt may not write the job, or kNone.
JobRefusal CheckAttempt(const JobRecord& job, const JobAttemptFence& fence) {
  if (job.attempt != fence.attempt) return JobRefusal::kAttemptMismatch;
  if (!HasLiveAttempt(job.state)) return JobRefusal::kNotRunning;
  if (job.attempt_worker != fence.agent_id ||
      job.attempt_generation != fence.presence_generation ||
      job.attempt_role_epoch.value_or(0) != fence.role_epoch) {
    return JobRefusal::kWorkerMismatch;
  }
  return JobRefusal::kNone;
}

// The same call of the attempt that already ended the job this way (a
// retried RPC whose reply was lost).
bool AlreadyEndedBy(const JobRecord& job, const JobAttemptFence& fence,
                    JobState state) {
  return job.state == state && job.attempt == fence.attempt &&
         job.attempt_worker == fence.agent_id &&
         job.attempt_generation == fence.presence_generation &&
         job.attempt_role_epoch.value_or(0) == fence.role_epoch;
}

// Loads the fenced attempt's job for a write: the refusal (with the job as
// it is) when the fence does not hold.
absl::StatusOr<std::pair<std::optional<JobRecord>, JobOutcome>> LoadAttempt(
    JobRows& rows, const JobAttemptFence& fence) {
  absl::StatusOr<std::optional<JobRecord>> job = rows.Load(fence.job_id, true);
  if (!job.ok()) return job.status();
  JobOutcome outcome;
  if (!job->has_value()) {
    outcome.refusal = JobRefusal::kNotFound;
    return std::make_pair(std::optional<JobRecord>(), outcome);
  }
  outcome.refusal = CheckAttempt(**job, fence);
  return std::make_pair(*job, outcome);
}

// A refused completion or failure: its result kept as a late result.
absl::StatusOr<JobOutcome> Refused(JobRows& rows, const JobRecord& job,
                                   JobOutcome outcome,
                                   const JobAttemptFence& fence,
                                   std::optional<std::string> result_json,
                                   std::optional<JobError> error,
                                   int64_t now_ms) {
  // Only an attempt that was bound and has ended: one before the current,
  // or the current one, ended without this result, by its own worker.
  bool superseded = (outcome.refusal == JobRefusal::kAttemptMismatch &&
                     fence.attempt >= 1 && fence.attempt < job.attempt) ||
                    (outcome.refusal == JobRefusal::kNotRunning &&
                     fence.attempt == job.attempt && IsTerminal(job.state) &&
                     job.state != JobState::kSucceeded &&
                     job.attempt_worker == fence.agent_id &&
                     job.attempt_generation == fence.presence_generation);
  if (superseded) {
    // Only from the attempt's own worker: anyone can name an old attempt.
    absl::StatusOr<std::optional<JobAttemptFence>> held =
        rows.AttemptHolder(job.job_id, fence.attempt);
    if (!held.ok()) return held.status();
    superseded = held->has_value() && (*held)->agent_id == fence.agent_id &&
                 (*held)->presence_generation == fence.presence_generation &&
                 (*held)->role_epoch == fence.role_epoch;
  }
  if (superseded) {
    JobLateResult late;
    late.attempt = fence.attempt;
    late.agent_id = fence.agent_id;
    late.result_json = std::move(result_json);
    late.error = std::move(error);
    late.reported_at_ms = now_ms;
    if (absl::Status s = rows.InsertLateResult(job.job_id, late); !s.ok()) {
      return s;
    }
    outcome.late_result_kept = true;
  }
  absl::StatusOr<JobRecord> full = LoadFull(rows, job);
  if (!full.ok()) return full.status();
  outcome.job = std::move(*full);
  return outcome;
}

// A write that lost its fence to a writer the read did not see: the job
// as it is now, refused for the reason that now holds.
absl::StatusOr<JobOutcome> LostRace(JobRows& rows,
                                    const JobAttemptFence& fence) {
  absl::StatusOr<std::pair<std::optional<JobRecord>, JobOutcome>> now =
      LoadAttempt(rows, fence);
  if (!now.ok()) return now.status();
  JobOutcome outcome = now->second;
  if (outcome.refusal == JobRefusal::kNone) {
    outcome.refusal = JobRefusal::kWorkerMismatch;
  }
  if (now->first.has_value()) {
    absl::StatusOr<JobRecord> full = LoadFull(rows, *now->first);
    if (!full.ok()) return full.status();
    outcome.job = std::move(*full);
  }
  return outcome;
}

absl::StatusOr<JobOutcome> Finish(JobRows& rows, JobRecord next,
                                  std::vector<JobRecord> also) {
  absl::StatusOr<JobRecord> full = LoadFull(rows, next);
  if (!full.ok()) return full.status();
  JobOutcome outcome;
  outcome.job = std::move(*full);
  outcome.also_changed = std::move(also);
  return outcome;
}

// Binds `job`'s current attempt to the agent; false when another claimer
// won it first.
absl::StatusOr<std::optional<JobRecord>> Bind(
    JobRows& rows, const JobRecord& job, absl::string_view agent_id,
    int64_t generation, std::optional<int64_t> role_epoch, int64_t now_ms) {
  JobRecord next = job;
  next.state = JobState::kRunning;
  next.attempt_worker = std::string(agent_id);
  next.attempt_generation = generation;
  next.attempt_role_epoch = role_epoch;
  if (job.worker_kind != JobWorkerKind::kAgent) {
    next.worker_agent = std::string(agent_id);
  }
  next.not_before_ms.reset();
  next.dispatched_at_ms = now_ms;
  next.started_at_ms = now_ms;
  next.deadline_ms = AttemptDeadline(job, now_ms);
  next.updated_at_ms = now_ms;
  absl::StatusOr<bool> written = Write(rows, job, next);
  if (!written.ok()) return written.status();
  if (!*written) return std::optional<JobRecord>();
  JobAttemptFence holder;
  holder.job_id = job.job_id;
  holder.attempt = job.attempt;
  holder.agent_id = std::string(agent_id);
  holder.presence_generation = generation;
  holder.role_epoch = role_epoch.value_or(0);
  if (absl::Status s = rows.InsertAttempt(holder, now_ms); !s.ok()) return s;
  return std::optional<JobRecord>(next);
}

// An attempt ends other than by success: retried, or the job ends.
absl::StatusOr<JobRecord> EndAttempt(JobRows& rows, const JobRecord& job,
                                     const JobError& error, bool backoff,
                                     JobState terminal, int64_t now_ms,
                                     std::vector<JobRecord>* also,
                                     bool* written) {
  JobRecord next;
  if (job.cancel_requested) {
    next = Ended(job, JobState::kCancelled, error, now_ms);
  } else if (Retryable(job, error)) {
    next = Requeued(job, error, backoff, now_ms);
  } else {
    next = Ended(job, terminal, error, now_ms);
  }
  absl::StatusOr<bool> w = Write(rows, job, next);
  if (!w.ok()) return w.status();
  *written = *w;
  if (!*w) return job;
  if (absl::Status s = AfterEnd(rows, next, now_ms, also); !s.ok()) return s;
  return next;
}

uint64_t Fnv1a(absl::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

JobRowFence FenceOf(const JobRecord& job) {
  JobRowFence f;
  f.job_id = job.job_id;
  f.state = job.state;
  f.attempt = job.attempt;
  f.attempt_worker = job.attempt_worker;
  f.attempt_generation = job.attempt_generation;
  f.attempt_role_epoch = job.attempt_role_epoch;
  return f;
}

int64_t JobBackoffMs(const JobRetryPolicy& policy, absl::string_view job_id,
                     int64_t retry) {
  double wait = static_cast<double>(policy.initial_backoff_ms) *
                std::pow(policy.multiplier,
                         static_cast<double>(std::max<int64_t>(retry, 1) - 1));
  wait = std::min(wait, static_cast<double>(policy.max_backoff_ms));
  if (policy.jitter > 0) {
    const uint64_t h = Fnv1a(absl::StrCat(retry), Fnv1a(job_id));
    const double draw = static_cast<double>(h % 1000003) / 1000003.0;
    wait *= 1.0 - policy.jitter * draw;
  }
  return static_cast<int64_t>(std::max(0.0, wait));
}

absl::StatusOr<JobOutcome> CreateJobWith(JobRows& rows, const JobRecord& job) {
  if (job.idempotency_key.has_value()) {
    absl::StatusOr<std::optional<JobRecord>> first =
        rows.FindByIdempotencyKey(job.project_id, *job.idempotency_key);
    if (!first.ok()) return first.status();
    if (first->has_value()) {
      absl::StatusOr<JobRecord> full = LoadFull(rows, **first);
      if (!full.ok()) return full.status();
      JobOutcome outcome;
      outcome.job = std::move(*full);
      return outcome;
    }
  }
  JobRecord row = job;
  std::vector<std::string> parents = job.depends_on;
  std::sort(parents.begin(), parents.end());
  parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
  bool waiting = false;
  std::optional<std::pair<std::string, JobState>> failed;
  for (const std::string& id : parents) {
    // Locked: a parent that ends meanwhile waits for this write, then sees
    // this child.
    absl::StatusOr<std::optional<JobRecord>> parent = rows.Load(id, true);
    if (!parent.ok()) return parent.status();
    if (!parent->has_value() || (*parent)->project_id != job.project_id) {
      JobOutcome outcome;
      outcome.refusal = JobRefusal::kDependencyNotFound;
      return outcome;
    }
    const JobState state = (*parent)->state;
    if (state == JobState::kSucceeded) continue;
    if (IsTerminal(state)) {
      if (!failed.has_value()) failed.emplace(id, state);
    } else {
      waiting = true;
    }
  }
  row.depends_on = parents;
  if (failed.has_value() &&
      job.on_dependency_failure == JobDependencyFailure::kCancel) {
    row = Ended(row, JobState::kCancelled,
                HubError("dependency_failed",
                         absl::StrCat("dependency ", failed->first, " ended ",
                                      JobStateName(failed->second))),
                job.created_at_ms);
  } else if (waiting || failed.has_value()) {
    row.state = JobState::kBlocked;
  } else {
    row.state = JobState::kQueued;
  }
  if (absl::Status s = rows.Insert(row); !s.ok()) return s;
  for (const std::string& id : parents) {
    if (absl::Status s = rows.InsertDependency(row.job_id, id); !s.ok()) {
      return s;
    }
  }
  JobOutcome outcome;
  outcome.created = true;
  outcome.job = row;
  return outcome;
}

absl::StatusOr<JobOutcome> ClaimJobWith(JobRows& rows, const JobClaim& claim) {
  JobOutcome outcome;
  absl::StatusOr<std::optional<JobWorkerRow>> worker =
      rows.Worker(claim.agent_id);
  if (!worker.ok()) return worker.status();
  if (!worker->has_value()) {
    outcome.refusal = JobRefusal::kAgentNotFound;
    return outcome;
  }
  if ((*worker)->offline) {
    outcome.refusal = JobRefusal::kAgentOffline;
    return outcome;
  }
  const int64_t generation = (*worker)->presence_generation;
  if (claim.presence_generation.has_value() &&
      *claim.presence_generation != generation) {
    outcome.refusal = JobRefusal::kStaleGeneration;
    return outcome;
  }
  std::string project = claim.project_id;
  if (project.empty()) project = (*worker)->project_id.value_or("");
  if (project.empty() && claim.job_id.empty()) return outcome;

  if (!claim.job_id.empty()) {
    absl::StatusOr<std::optional<JobRecord>> job =
        rows.Load(claim.job_id, true);
    if (!job.ok()) return job.status();
    if (!job->has_value()) {
      outcome.refusal = JobRefusal::kNotFound;
      return outcome;
    }
    const JobRecord& j = **job;
    absl::StatusOr<std::vector<HeldRole>> roles =
        rows.HeldRoles(claim.agent_id, j.project_id);
    if (!roles.ok()) return roles.status();
    std::optional<std::optional<int64_t>> target =
        TargetOf(j, claim.agent_id, **worker, *roles);
    const bool due =
        !j.not_before_ms.has_value() || *j.not_before_ms <= claim.now_ms;
    const bool project_ok = claim.project_id.empty()
                                ? (!(*worker)->project_id.has_value() ||
                                   *(*worker)->project_id == j.project_id)
                                : claim.project_id == j.project_id;
    if (j.state != JobState::kQueued || !due || !target.has_value() ||
        !project_ok || (!claim.topic.empty() && claim.topic != j.topic)) {
      outcome.refusal = JobRefusal::kNotClaimable;
      absl::StatusOr<JobRecord> full = LoadFull(rows, j);
      if (!full.ok()) return full.status();
      outcome.job = std::move(*full);
      return outcome;
    }
    absl::StatusOr<std::optional<JobRecord>> bound =
        Bind(rows, j, claim.agent_id, generation, *target, claim.now_ms);
    if (!bound.ok()) return bound.status();
    if (!bound->has_value()) {
      outcome.refusal = JobRefusal::kNotClaimable;
      return outcome;
    }
    return Finish(rows, **bound, {});
  }

  absl::StatusOr<std::vector<HeldRole>> roles =
      rows.HeldRoles(claim.agent_id, project);
  if (!roles.ok()) return roles.status();
  std::vector<std::string> wires;
  for (const HeldRole& role : *roles) wires.push_back(role.role_key_wire);
  absl::StatusOr<std::vector<JobRecord>> candidates = rows.Claimable(
      project, claim.agent_id, wires, claim.topic, claim.now_ms, 32);
  if (!candidates.ok()) return candidates.status();
  for (const JobRecord& j : *candidates) {
    std::optional<std::optional<int64_t>> target =
        TargetOf(j, claim.agent_id, **worker, *roles);
    if (!target.has_value()) continue;
    absl::StatusOr<std::optional<JobRecord>> bound =
        Bind(rows, j, claim.agent_id, generation, *target, claim.now_ms);
    if (!bound.ok()) return bound.status();
    if (bound->has_value()) return Finish(rows, **bound, {});
  }
  return outcome;
}

absl::StatusOr<JobOutcome> HeartbeatJobWith(
    JobRows& rows, const JobAttemptFence& fence,
    const std::optional<std::string>& progress_json, int64_t now_ms) {
  absl::StatusOr<std::pair<std::optional<JobRecord>, JobOutcome>> loaded =
      LoadAttempt(rows, fence);
  if (!loaded.ok()) return loaded.status();
  auto& [job, outcome] = *loaded;
  if (outcome.refusal != JobRefusal::kNone) {
    if (job.has_value()) outcome.job = *job;
    return outcome;
  }
  JobRecord next = *job;
  if (progress_json.has_value()) next.progress_json = progress_json;
  next.deadline_ms = AttemptDeadline(*job, now_ms);
  next.updated_at_ms = now_ms;
  absl::StatusOr<bool> written = Write(rows, *job, next);
  if (!written.ok()) return written.status();
  if (!*written) return LostRace(rows, fence);
  JobOutcome done;
  done.job = next;
  return done;
}

absl::StatusOr<JobOutcome> CompleteJobWith(JobRows& rows,
                                           const JobAttemptFence& fence,
                                           const std::string& result_json,
                                           int64_t now_ms) {
  absl::StatusOr<std::pair<std::optional<JobRecord>, JobOutcome>> loaded =
      LoadAttempt(rows, fence);
  if (!loaded.ok()) return loaded.status();
  auto& [job, outcome] = *loaded;
  if (!job.has_value()) return outcome;
  if (AlreadyEndedBy(*job, fence, JobState::kSucceeded)) {
    return Finish(rows, *job, {});
  }
  if (outcome.refusal != JobRefusal::kNone) {
    return Refused(rows, *job, outcome, fence, result_json, std::nullopt,
                   now_ms);
  }
  JobRecord next = Ended(*job, JobState::kSucceeded, std::nullopt, now_ms);
  next.result_json = result_json;
  absl::StatusOr<bool> written = Write(rows, *job, next);
  if (!written.ok()) return written.status();
  if (!*written) return LostRace(rows, fence);
  std::vector<JobRecord> also;
  if (absl::Status s = AfterEnd(rows, next, now_ms, &also); !s.ok()) return s;
  return Finish(rows, next, std::move(also));
}

absl::StatusOr<JobOutcome> FailJobWith(JobRows& rows,
                                       const JobAttemptFence& fence,
                                       const JobFailure& failure) {
  absl::StatusOr<std::pair<std::optional<JobRecord>, JobOutcome>> loaded =
      LoadAttempt(rows, fence);
  if (!loaded.ok()) return loaded.status();
  auto& [job, outcome] = *loaded;
  if (!job.has_value()) return outcome;
  if (AlreadyEndedBy(*job, fence, JobState::kFailed) ||
      AlreadyEndedBy(*job, fence, JobState::kCancelled)) {
    return Finish(rows, *job, {});
  }
  if (outcome.refusal != JobRefusal::kNone) {
    return Refused(rows, *job, outcome, fence, std::nullopt, failure.error,
                   failure.now_ms);
  }
  std::vector<JobRecord> also;
  bool written = false;
  absl::StatusOr<JobRecord> next =
      EndAttempt(rows, *job, failure.error, /*backoff=*/true, JobState::kFailed,
                 failure.now_ms, &also, &written);
  if (!next.ok()) return next.status();
  if (!written) return LostRace(rows, fence);
  return Finish(rows, *next, std::move(also));
}

absl::StatusOr<std::optional<JobRecord>> GetJobWith(JobRows& rows,
                                                    absl::string_view job_id) {
  absl::StatusOr<std::optional<JobRecord>> job = rows.Load(job_id, false);
  if (!job.ok()) return job.status();
  if (!job->has_value()) return job;
  absl::StatusOr<JobRecord> full = LoadFull(rows, **job);
  if (!full.ok()) return full.status();
  return std::optional<JobRecord>(std::move(*full));
}

absl::StatusOr<std::vector<JobRecord>> ListJobsWith(JobRows& rows,
                                                    const JobFilter& filter) {
  absl::StatusOr<std::vector<JobRecord>> page = rows.Page(filter);
  if (!page.ok()) return page.status();
  for (JobRecord& job : *page) {
    absl::StatusOr<JobRecord> full = LoadFull(rows, job);
    if (!full.ok()) return full.status();
    job = std::move(*full);
  }
  return page;
}

absl::StatusOr<JobOutcome> CancelJobWith(JobRows& rows,
                                         absl::string_view job_id,
                                         absl::string_view reason,
                                         int64_t now_ms) {
  absl::StatusOr<std::optional<JobRecord>> job = rows.Load(job_id, true);
  if (!job.ok()) return job.status();
  JobOutcome outcome;
  if (!job->has_value()) {
    outcome.refusal = JobRefusal::kNotFound;
    return outcome;
  }
  const JobRecord& j = **job;
  if (IsTerminal(j.state) || (HasLiveAttempt(j.state) && j.cancel_requested)) {
    return Finish(rows, j, {});
  }
  JobRecord next = j;
  next.cancel_requested = true;
  next.updated_at_ms = now_ms;
  if (!HasLiveAttempt(j.state)) {
    next = Ended(next, JobState::kCancelled,
                 HubError("cancelled", std::string(reason)), now_ms);
  }
  absl::StatusOr<bool> written = Write(rows, j, next);
  if (!written.ok()) return written.status();
  if (!*written) {
    return AbortedError("CAS_CONFLICT",
                        "job changed while it was being cancelled");
  }
  std::vector<JobRecord> also;
  if (absl::Status s = AfterEnd(rows, next, now_ms, &also); !s.ok()) return s;
  return Finish(rows, next, std::move(also));
}

absl::StatusOr<JobOutcome> AddJobDependencyWith(
    JobRows& rows, absl::string_view job_id,
    const std::vector<std::string>& parent_ids, int64_t now_ms) {
  JobOutcome outcome;
  std::vector<std::string> parents = parent_ids;
  std::sort(parents.begin(), parents.end());
  parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
  // Parents first, then the job: a parent's end locks it, then its children.
  std::vector<JobRecord> parent_rows;
  for (const std::string& id : parents) {
    if (id == job_id) {
      outcome.refusal = JobRefusal::kDependencyCycle;
      return outcome;
    }
    absl::StatusOr<std::optional<JobRecord>> parent = rows.Load(id, true);
    if (!parent.ok()) return parent.status();
    if (!parent->has_value()) {
      outcome.refusal = JobRefusal::kDependencyNotFound;
      return outcome;
    }
    parent_rows.push_back(**parent);
  }
  absl::StatusOr<std::optional<JobRecord>> job = rows.Load(job_id, true);
  if (!job.ok()) return job.status();
  if (!job->has_value()) {
    outcome.refusal = JobRefusal::kNotFound;
    return outcome;
  }
  const JobRecord& j = **job;
  for (const JobRecord& p : parent_rows) {
    if (p.project_id != j.project_id) {
      outcome.refusal = JobRefusal::kDependencyNotFound;
      return outcome;
    }
  }
  if (j.state != JobState::kBlocked && j.state != JobState::kQueued) {
    outcome.refusal = JobRefusal::kStarted;
    absl::StatusOr<JobRecord> full = LoadFull(rows, j);
    if (!full.ok()) return full.status();
    outcome.job = std::move(*full);
    return outcome;
  }
  // A cycle: the job is an ancestor of a new parent.
  std::deque<std::string> walk(parents.begin(), parents.end());
  std::set<std::string> seen(parents.begin(), parents.end());
  while (!walk.empty()) {
    if (static_cast<int64_t>(seen.size()) > kMaxDependencyWalk) {
      outcome.refusal = JobRefusal::kDependencyCycle;
      return outcome;
    }
    absl::StatusOr<std::vector<JobParent>> up = rows.Parents(walk.front());
    walk.pop_front();
    if (!up.ok()) return up.status();
    for (const JobParent& p : *up) {
      if (p.parent_id == job_id) {
        outcome.refusal = JobRefusal::kDependencyCycle;
        return outcome;
      }
      if (seen.insert(p.parent_id).second) walk.push_back(p.parent_id);
    }
  }
  for (const std::string& id : parents) {
    if (absl::Status s = rows.InsertDependency(job_id, id); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<JobParent>> all = rows.Parents(job_id);
  if (!all.ok()) return all.status();
  std::optional<JobParent> failed;
  bool waiting = false;
  for (const JobParent& p : *all) {
    if (p.state == JobState::kSucceeded) continue;
    if (IsTerminal(p.state)) {
      if (!failed.has_value()) failed = p;
    } else {
      waiting = true;
    }
  }
  JobRecord next = j;
  next.updated_at_ms = now_ms;
  if (failed.has_value() &&
      j.on_dependency_failure == JobDependencyFailure::kCancel) {
    next = Ended(next, JobState::kCancelled,
                 HubError("dependency_failed",
                          absl::StrCat("dependency ", failed->parent_id,
                                       " ended ", JobStateName(failed->state))),
                 now_ms);
  } else if (waiting || failed.has_value()) {
    next.state = JobState::kBlocked;
  }
  absl::StatusOr<bool> written = Write(rows, j, next);
  if (!written.ok()) return written.status();
  if (!*written) {
    return AbortedError("CAS_CONFLICT",
                        "job changed while its dependencies were added");
  }
  std::vector<JobRecord> also;
  if (absl::Status s = AfterEnd(rows, next, now_ms, &also); !s.ok()) return s;
  return Finish(rows, next, std::move(also));
}

absl::StatusOr<JobOutcome> RetryJobWith(JobRows& rows, absl::string_view job_id,
                                        int64_t now_ms) {
  absl::StatusOr<std::optional<JobRecord>> job = rows.Load(job_id, true);
  if (!job.ok()) return job.status();
  JobOutcome outcome;
  if (!job->has_value()) {
    outcome.refusal = JobRefusal::kNotFound;
    return outcome;
  }
  const JobRecord& j = **job;
  if (!IsTerminal(j.state) || j.state == JobState::kSucceeded) {
    outcome.refusal = JobRefusal::kNotEnded;
    absl::StatusOr<JobRecord> full = LoadFull(rows, j);
    if (!full.ok()) return full.status();
    outcome.job = std::move(*full);
    return outcome;
  }
  JobRecord next = Requeued(j, std::nullopt, /*backoff=*/false, now_ms);
  next.cancel_requested = false;
  next.max_retries = std::max(j.max_retries, next.retry_count);
  absl::StatusOr<std::vector<JobParent>> parents = rows.Parents(j.job_id);
  if (!parents.ok()) return parents.status();
  for (const JobParent& p : *parents) {
    if (p.state != JobState::kSucceeded) next.state = JobState::kBlocked;
  }
  absl::StatusOr<bool> written = Write(rows, j, next);
  if (!written.ok()) return written.status();
  if (!*written) {
    return AbortedError("CAS_CONFLICT",
                        "job changed while it was being retried");
  }
  return Finish(rows, next, {});
}

namespace {

// Each job's attempt ends because its worker is gone: queued again at once
// (no backoff: the task did not fail) or failed.
absl::StatusOr<std::vector<JobRecord>> EndGoneAttempts(
    JobRows& rows, const std::vector<JobRecord>& jobs, int64_t now_ms) {
  std::vector<JobRecord> changed;
  for (const JobRecord& job : jobs) {
    const JobError gone =
        HubError("worker_gone",
                 absl::StrCat("worker ", job.attempt_worker.value_or(""),
                              " at generation ",
                              job.attempt_generation.value_or(0), " is gone"));
    bool written = false;
    absl::StatusOr<JobRecord> next =
        EndAttempt(rows, job, gone, /*backoff=*/false, JobState::kFailed,
                   now_ms, &changed, &written);
    if (!next.ok()) return next.status();
    if (written) changed.push_back(*next);
  }
  return changed;
}

}  // namespace

absl::StatusOr<std::vector<JobRecord>> EndAttemptsOfWith(
    JobRows& rows, absl::string_view agent_id, int64_t generation,
    int64_t now_ms) {
  absl::StatusOr<std::vector<JobRecord>> jobs =
      rows.AttemptsOf(agent_id, generation);
  if (!jobs.ok()) return jobs.status();
  return EndGoneAttempts(rows, *jobs, now_ms);
}

absl::StatusOr<std::vector<JobRecord>> EndOrphanedAttemptsWith(JobRows& rows,
                                                               int64_t now_ms,
                                                               int64_t limit) {
  absl::StatusOr<std::vector<JobRecord>> jobs = rows.OrphanedAttempts(limit);
  if (!jobs.ok()) return jobs.status();
  return EndGoneAttempts(rows, *jobs, now_ms);
}

absl::StatusOr<std::vector<JobRecord>> SweepJobDeadlinesWith(JobRows& rows,
                                                             int64_t now_ms,
                                                             int64_t limit) {
  absl::StatusOr<std::vector<JobRecord>> due = rows.DueDeadlines(now_ms, limit);
  if (!due.ok()) return due.status();
  std::vector<JobRecord> changed;
  for (const JobRecord& job : *due) {
    const JobError timed_out = HubError(
        "timed_out", absl::StrCat("attempt ", job.attempt, " passed its ",
                                  job.timeout_ms, " ms deadline"));
    bool written = false;
    absl::StatusOr<JobRecord> next =
        EndAttempt(rows, job, timed_out, /*backoff=*/true, JobState::kTimedOut,
                   now_ms, &changed, &written);
    if (!next.ok()) return next.status();
    if (written) changed.push_back(*next);
  }
  return changed;
}

}  // namespace hub::storage
