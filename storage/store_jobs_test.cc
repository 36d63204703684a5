// Jobs on every engine: create and idempotency, claims fenced by state and
// attempt (one winner among racers; on PostgreSQL from two stores, as two
// hubs would), every write of an attempt fenced by attempt, worker,
// generation and role epoch, late results kept once, retries with backoff,
// a gone worker's attempts, deadlines, dependencies, cancel and retry, and
// lists.
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/job_ops.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

using testing::StoreTest;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kProject[] = "prj_1";

class Jobs : public StoreTest {
 protected:
  // Registers `agent` in prj_1; returns its generation.
  int64_t Register(Store& store, const std::string& agent,
                   const std::string& capabilities = "[]") {
    AgentRegistration r;
    r.agent_id = agent;
    r.cli = "claude";
    r.now_ms = kNow;
    r.lease_ttl_ms = 30'000;
    r.capabilities_json = capabilities;
    r.project_id = std::string(kProject);
    absl::StatusOr<AgentRecord> w = store.agents().RegisterAgent(r);
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return 0;
    return w->presence_generation;
  }
  int64_t Register(const std::string& agent,
                   const std::string& capabilities = "[]") {
    return Register(store(), agent, capabilities);
  }

  JobRecord NewJob(const std::string& worker, int64_t max_retries = 0) {
    JobRecord job;
    job.job_id = NewUuidV7();
    job.project_id = kProject;
    job.supervisor_agent = "boss";
    job.worker_kind = JobWorkerKind::kAgent;
    job.worker_agent = worker;
    job.task = "fix the build";
    job.payload_json = R"({"files":["a.cc"]})";
    job.timeout_ms = 60'000;
    job.max_retries = max_retries;
    job.created_at_ms = kNow;
    job.updated_at_ms = kNow;
    return job;
  }
  JobRecord Created(const JobRecord& job) {
    absl::StatusOr<JobOutcome> out = store().jobs().CreateJob(job);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok() || !out->job.has_value()) return {};
    EXPECT_EQ(out->refusal, JobRefusal::kNone);
    return *out->job;
  }
  JobOutcome Claim(const std::string& agent, const std::string& job_id = "",
                   int64_t now = kNow + 1) {
    JobClaim c;
    c.agent_id = agent;
    c.job_id = job_id;
    c.now_ms = now;
    absl::StatusOr<JobOutcome> out = store().jobs().ClaimJob(c);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : JobOutcome{};
  }
  JobRecord Claimed(const std::string& agent, const std::string& job_id = "",
                    int64_t now = kNow + 1) {
    JobOutcome out = Claim(agent, job_id, now);
    EXPECT_EQ(out.refusal, JobRefusal::kNone);
    EXPECT_TRUE(out.job.has_value()) << "nothing claimed by " << agent;
    return out.job.value_or(JobRecord{});
  }
  static JobAttemptFence FenceOfAttempt(const JobRecord& job) {
    JobAttemptFence f;
    f.job_id = job.job_id;
    f.attempt = job.attempt;
    f.agent_id = job.attempt_worker.value_or("");
    f.presence_generation = job.attempt_generation.value_or(0);
    f.role_epoch = job.attempt_role_epoch.value_or(0);
    return f;
  }
  JobOutcome Complete(const JobAttemptFence& f, int64_t now = kNow + 2) {
    absl::StatusOr<JobOutcome> out =
        store().jobs().CompleteJob(f, R"({"ok":true})", now);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : JobOutcome{};
  }
  JobOutcome Fail(const JobAttemptFence& f, const std::string& reason,
                  bool retryable = true, int64_t now = kNow + 2) {
    JobFailure failure;
    failure.error.reason = reason;
    failure.error.message = "it broke";
    failure.error.retryable = retryable;
    failure.now_ms = now;
    absl::StatusOr<JobOutcome> out = store().jobs().FailJob(f, failure);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : JobOutcome{};
  }
  JobRecord Get(const std::string& id) {
    absl::StatusOr<std::optional<JobRecord>> job = store().jobs().GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok() || !job->has_value()) return {};
    return **job;
  }
};

TEST_P(Jobs, ACreatedJobReadsBackQueuedAtItsFirstAttemptWithEveryField) {
  JobRecord job = NewJob("w1", 3);
  job.retry_policy.initial_backoff_ms = 250;
  job.retry_policy.multiplier = 3;
  job.retry_policy.jitter = 0.5;
  job.retry_policy.non_retryable_reasons = {"bad_input"};
  job.trace_id = "trace-1";
  job.correlation_id = "corr-1";
  job.priority = 7;
  job.idempotency_key = "key-1";
  Created(job);
  JobRecord got = Get(job.job_id);
  EXPECT_EQ(got.state, JobState::kQueued);
  EXPECT_EQ(got.attempt, 1);
  EXPECT_EQ(got.worker_agent, "w1");
  EXPECT_EQ(got.payload_json, job.payload_json);
  EXPECT_EQ(got.priority, 7);
  EXPECT_EQ(got.max_retries, 3);
  EXPECT_EQ(got.retry_policy.initial_backoff_ms, 250);
  EXPECT_EQ(got.retry_policy.multiplier, 3);
  EXPECT_EQ(got.retry_policy.non_retryable_reasons,
            std::vector<std::string>{"bad_input"});
  EXPECT_EQ(got.trace_id, "trace-1");
  EXPECT_EQ(got.idempotency_key, "key-1");
  // triflux reads the row with its own words.
  EXPECT_EQ(Query(absl::StrCat("SELECT status FROM assign_jobs WHERE job_id "
                               "= '",
                               job.job_id, "'")),
            "queued");
}

TEST_P(Jobs, ASecondCreateWithTheSameIdempotencyKeyReturnsTheFirstJob) {
  JobRecord first = NewJob("w1");
  first.idempotency_key = "once";
  Created(first);
  JobRecord again = NewJob("w1");
  again.idempotency_key = "once";
  absl::StatusOr<JobOutcome> out = store().jobs().CreateJob(again);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->created);
  EXPECT_EQ(out->job->job_id, first.job_id);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM assign_jobs"), "1");
}

TEST_P(Jobs, AClaimBindsTheAttemptToTheWorkerAtItsGenerationOnce) {
  const int64_t gen = Register("w1");
  Register("w2");
  JobRecord job = Created(NewJob("w1"));
  // Not w2's job.
  EXPECT_EQ(Claim("w2", job.job_id).refusal, JobRefusal::kNotClaimable);
  EXPECT_FALSE(Claim("w2").job.has_value());
  JobRecord claimed = Claimed("w1");
  EXPECT_EQ(claimed.job_id, job.job_id);
  EXPECT_EQ(claimed.state, JobState::kRunning);
  EXPECT_EQ(claimed.attempt, 1);
  EXPECT_EQ(claimed.attempt_worker, "w1");
  EXPECT_EQ(claimed.attempt_generation, gen);
  EXPECT_EQ(claimed.deadline_ms, kNow + 1 + 60'000);
  // Nothing else to claim, and this one is taken.
  EXPECT_FALSE(Claim("w1").job.has_value());
  EXPECT_EQ(Claim("w1", job.job_id).refusal, JobRefusal::kNotClaimable);
}

TEST_P(Jobs, AClaimNeedsAPresentWorkerAtTheGenerationItNames) {
  JobClaim c;
  c.agent_id = "ghost";
  c.now_ms = kNow;
  EXPECT_EQ(store().jobs().ClaimJob(c)->refusal, JobRefusal::kAgentNotFound);
  const int64_t gen = Register("w1");
  c.agent_id = "w1";
  c.presence_generation = gen + 1;
  EXPECT_EQ(store().jobs().ClaimJob(c)->refusal, JobRefusal::kStaleGeneration);
}

TEST_P(Jobs, ClaimsTakeTheHighestPriorityThenTheOldestJob) {
  Register("w1");
  JobRecord low = NewJob("w1");
  low.priority = 3;
  JobRecord high_old = NewJob("w1");
  high_old.priority = 8;
  JobRecord high_new = NewJob("w1");
  high_new.priority = 8;
  high_new.created_at_ms = kNow + 5;
  Created(low);
  Created(high_new);
  Created(high_old);
  EXPECT_EQ(Claimed("w1", "", kNow + 10).job_id, high_old.job_id);
  EXPECT_EQ(Claimed("w1", "", kNow + 10).job_id, high_new.job_id);
  EXPECT_EQ(Claimed("w1", "", kNow + 10).job_id, low.job_id);
}

TEST_P(Jobs, APoolJobGoesOnlyToAnAgentWithEveryCapability) {
  Register("plain");
  Register("builder", R"(["cpp","bazel"])");
  JobRecord job = NewJob("");
  job.worker_kind = JobWorkerKind::kPool;
  job.pool_capabilities = {"cpp", "bazel"};
  Created(job);
  EXPECT_FALSE(Claim("plain").job.has_value());
  JobRecord claimed = Claimed("builder");
  EXPECT_EQ(claimed.job_id, job.job_id);
  // triflux's worker column names who works on it.
  EXPECT_EQ(claimed.worker_agent, "builder");
  EXPECT_EQ(Get(job.job_id).pool_capabilities,
            (std::vector<std::string>{"cpp", "bazel"}));
}

TEST_P(Jobs, ARoleJobGoesToTheRoleHolderAndCarriesTheRoleEpoch) {
  Register("lead-1");
  Register("other");
  ASSERT_EQ(Exec("INSERT INTO role_registry (role_key_wire, project_id, "
                 "role_kind, scope_id, state, holder_agent_id, epoch, "
                 "activation_seq, charter_acked_epoch, retry_count, "
                 "last_transition_ms, last_reason, version) VALUES "
                 "('rk2.cto-key', 'prj_1', 'cto', '', 'active', 'lead-1', 4, "
                 "4, 4, 0, 0, 'test', 1)"),
            "");
  JobRecord job = NewJob("");
  job.worker_kind = JobWorkerKind::kRole;
  job.worker_role_wire = "rk2.cto-key";
  Created(job);
  EXPECT_FALSE(Claim("other").job.has_value());
  JobRecord claimed = Claimed("lead-1");
  EXPECT_EQ(claimed.attempt_role_epoch, 4);
  // A write naming another epoch is refused.
  JobAttemptFence stale = FenceOfAttempt(claimed);
  stale.role_epoch = 3;
  EXPECT_EQ(Complete(stale).refusal, JobRefusal::kWorkerMismatch);
  EXPECT_EQ(Complete(FenceOfAttempt(claimed)).refusal, JobRefusal::kNone);
}

TEST_P(Jobs, EveryWriteOfAnAttemptIsRefusedWhenAnyPartOfItsFenceIsStale) {
  Register("w1");
  Register("w2");
  Created(NewJob("w1"));
  JobRecord claimed = Claimed("w1");
  const JobAttemptFence good = FenceOfAttempt(claimed);

  JobAttemptFence other_attempt = good;
  other_attempt.attempt = 2;
  JobAttemptFence other_worker = good;
  other_worker.agent_id = "w2";
  JobAttemptFence other_generation = good;
  other_generation.presence_generation += 1;
  JobAttemptFence missing = good;
  missing.job_id = "no-such-job";

  for (const auto& [fence, refusal] :
       std::vector<std::pair<JobAttemptFence, JobRefusal>>{
           {other_attempt, JobRefusal::kAttemptMismatch},
           {other_worker, JobRefusal::kWorkerMismatch},
           {other_generation, JobRefusal::kWorkerMismatch},
           {missing, JobRefusal::kNotFound}}) {
    absl::StatusOr<JobOutcome> beat =
        store().jobs().HeartbeatJob(fence, "{}", kNow + 2);
    ASSERT_TRUE(beat.ok()) << beat.status();
    EXPECT_EQ(beat->refusal, refusal);
    EXPECT_EQ(Fail(fence, "boom").refusal, refusal);
    EXPECT_EQ(Complete(fence).refusal, refusal);
  }
  // The job never moved.
  JobRecord now = Get(claimed.job_id);
  EXPECT_EQ(now.state, JobState::kRunning);
  EXPECT_EQ(now.updated_at_ms, claimed.updated_at_ms);
  EXPECT_EQ(Complete(good).refusal, JobRefusal::kNone);
  EXPECT_EQ(Get(claimed.job_id).state, JobState::kSucceeded);
  EXPECT_EQ(Get(claimed.job_id).result_json, R"({"ok":true})");
}

TEST_P(Jobs, ACompletionRepeatedByItsOwnAttemptSucceedsAgainWithoutChange) {
  Register("w1");
  Created(NewJob("w1"));
  JobRecord claimed = Claimed("w1");
  JobOutcome first = Complete(FenceOfAttempt(claimed), kNow + 2);
  JobOutcome again = Complete(FenceOfAttempt(claimed), kNow + 9);
  EXPECT_EQ(again.refusal, JobRefusal::kNone);
  EXPECT_EQ(again.job->updated_at_ms, first.job->updated_at_ms);
  EXPECT_TRUE(again.job->late_results.empty());
}

TEST_P(Jobs, ASupersededAttemptsResultIsKeptOnceAsALateResult) {
  const int64_t gen = Register("w1");
  Created(NewJob("w1", 2));
  JobRecord first = Claimed("w1");
  // The worker goes; its attempt ends and the job is queued again.
  absl::StatusOr<std::vector<JobRecord>> ended =
      store().jobs().EndAttemptsOf("w1", gen, kNow + 2);
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].state, JobState::kQueued);
  EXPECT_EQ((*ended)[0].attempt, 2);
  EXPECT_EQ((*ended)[0].error->reason, "worker_gone");
  // Its late completion changes nothing, and is kept once.
  JobOutcome late = Complete(FenceOfAttempt(first), kNow + 3);
  EXPECT_EQ(late.refusal, JobRefusal::kAttemptMismatch);
  EXPECT_TRUE(late.late_result_kept);
  Complete(FenceOfAttempt(first), kNow + 4);
  JobRecord now = Get(first.job_id);
  EXPECT_EQ(now.state, JobState::kQueued);
  ASSERT_EQ(now.late_results.size(), 1u);
  EXPECT_EQ(now.late_results[0].attempt, 1);
  EXPECT_EQ(now.late_results[0].agent_id, "w1");
  EXPECT_EQ(now.late_results[0].result_json, R"({"ok":true})");
  EXPECT_EQ(now.late_results[0].reported_at_ms, kNow + 3);
  ToStatus(late, first.job_id).IgnoreError();
  EXPECT_EQ(ReasonOf(ToStatus(late, first.job_id)), "ASSIGN_ATTEMPT_MISMATCH");
}

TEST_P(Jobs, AGoneWorkerOfAnotherGenerationKeepsItsNewAttempts) {
  const int64_t gen = Register("w1");
  Created(NewJob("w1", 1));
  Claimed("w1");
  absl::StatusOr<std::vector<JobRecord>> ended =
      store().jobs().EndAttemptsOf("w1", gen - 1, kNow + 2);
  ASSERT_TRUE(ended.ok());
  EXPECT_TRUE(ended->empty());
}

TEST_P(Jobs, TheOrphanSweepEndsAttemptsOfWorkersGoneWithoutAReaction) {
  Register("w1");
  Register("w2");
  JobRecord lost = Created(NewJob("w1", 2));
  JobRecord kept = Created(NewJob("w2", 2));
  Claimed("w1", lost.job_id);
  Claimed("w2", kept.job_id);
  // w1 registers again (a new session) and nobody ended its old attempt.
  Register("w1");
  absl::StatusOr<std::vector<JobRecord>> ended =
      store().jobs().EndOrphanedAttempts(kNow + 5, 100);
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].job_id, lost.job_id);
  EXPECT_EQ((*ended)[0].state, JobState::kQueued);
  EXPECT_EQ((*ended)[0].error->reason, "worker_gone");
  EXPECT_FALSE((*ended)[0].not_before_ms.has_value());
  EXPECT_EQ(Get(kept.job_id).state, JobState::kRunning);
  EXPECT_TRUE(store().jobs().EndOrphanedAttempts(kNow + 6, 100)->empty());
}

TEST_P(Jobs, AGoneWorkerWithoutRetriesLeftFailsTheJob) {
  const int64_t gen = Register("w1");
  JobRecord job = Created(NewJob("w1", 0));
  Claimed("w1");
  ASSERT_TRUE(store().jobs().EndAttemptsOf("w1", gen, kNow + 2).ok());
  JobRecord now = Get(job.job_id);
  EXPECT_EQ(now.state, JobState::kFailed);
  EXPECT_EQ(now.error->reason, "worker_gone");
  EXPECT_EQ(Query(absl::StrCat("SELECT status FROM assign_jobs WHERE job_id "
                               "= '",
                               job.job_id, "'")),
            "failed");
}

TEST_P(Jobs, ARetryableFailureQueuesTheNextAttemptAfterItsBackoff) {
  Register("w1");
  JobRecord job = NewJob("w1", 2);
  job.retry_policy.initial_backoff_ms = 1000;
  job.retry_policy.multiplier = 4;
  Created(job);
  JobRecord a1 = Claimed("w1");
  JobOutcome f1 = Fail(FenceOfAttempt(a1), "flaky", true, kNow + 10);
  EXPECT_EQ(f1.job->state, JobState::kQueued);
  EXPECT_EQ(f1.job->attempt, 2);
  EXPECT_EQ(f1.job->retry_count, 1);
  EXPECT_EQ(f1.job->not_before_ms, kNow + 10 + 1000);
  EXPECT_EQ(f1.job->error->reason, "flaky");
  // Not due before its backoff.
  EXPECT_FALSE(Claim("w1", "", kNow + 500).job.has_value());
  JobRecord a2 = Claimed("w1", "", kNow + 1010);
  EXPECT_EQ(a2.attempt, 2);
  JobOutcome f2 = Fail(FenceOfAttempt(a2), "flaky", true, kNow + 2000);
  EXPECT_EQ(f2.job->not_before_ms, kNow + 2000 + 4000);
  JobRecord a3 = Claimed("w1", "", kNow + 6000);
  // Out of retries: the job fails.
  JobOutcome f3 = Fail(FenceOfAttempt(a3), "flaky", true, kNow + 7000);
  EXPECT_EQ(f3.job->state, JobState::kFailed);
  EXPECT_EQ(f3.job->attempt, 3);
}

TEST_P(Jobs, ANonRetryableFailureEndsTheJobAtOnce) {
  Register("w1");
  JobRecord job = NewJob("w1", 5);
  job.retry_policy.non_retryable_reasons = {"bad_input"};
  Created(job);
  EXPECT_EQ(Fail(FenceOfAttempt(Claimed("w1")), "bad_input").job->state,
            JobState::kFailed);
  Created(NewJob("w1", 5));
  EXPECT_EQ(Fail(FenceOfAttempt(Claimed("w1")), "other", false).job->state,
            JobState::kFailed);
}

TEST_P(Jobs, BackoffGrowsToItsCapAndJitterOnlyShortensIt) {
  JobRetryPolicy p;
  p.initial_backoff_ms = 100;
  p.multiplier = 2;
  p.max_backoff_ms = 1000;
  EXPECT_EQ(JobBackoffMs(p, "j", 1), 100);
  EXPECT_EQ(JobBackoffMs(p, "j", 3), 400);
  EXPECT_EQ(JobBackoffMs(p, "j", 10), 1000);
  p.jitter = 0.5;
  std::set<int64_t> seen;
  for (int i = 0; i < 50; ++i) {
    int64_t wait = JobBackoffMs(p, absl::StrCat("job-", i), 10);
    EXPECT_GE(wait, 500);
    EXPECT_LE(wait, 1000);
    EXPECT_EQ(wait, JobBackoffMs(p, absl::StrCat("job-", i), 10));
    seen.insert(wait);
  }
  EXPECT_GT(seen.size(), 10u);
}

TEST_P(Jobs, TheSweepTimesOutAttemptsPastTheirDeadlineOnce) {
  Register("w1");
  JobRecord once = Created(NewJob("w1", 0));
  JobRecord claimed = Claimed("w1", once.job_id);
  const int64_t deadline = *claimed.deadline_ms;
  absl::StatusOr<std::vector<JobRecord>> early =
      store().jobs().SweepJobDeadlines(deadline - 1, 100);
  ASSERT_TRUE(early.ok());
  EXPECT_TRUE(early->empty());
  absl::StatusOr<std::vector<JobRecord>> swept =
      store().jobs().SweepJobDeadlines(deadline, 100);
  ASSERT_TRUE(swept.ok()) << swept.status();
  ASSERT_EQ(swept->size(), 1u);
  EXPECT_EQ((*swept)[0].state, JobState::kTimedOut);
  EXPECT_EQ((*swept)[0].error->reason, "timed_out");
  EXPECT_FALSE((*swept)[0].deadline_ms.has_value());
  EXPECT_TRUE(store().jobs().SweepJobDeadlines(deadline + 1, 100)->empty());
  // The late worker is refused.
  EXPECT_EQ(Complete(FenceOfAttempt(claimed)).refusal, JobRefusal::kNotRunning);
}

TEST_P(Jobs, AHeartbeatMovesTheDeadlineButNotPastTheHardCeiling) {
  Register("w1");
  JobRecord job = NewJob("w1");
  job.timeout_ms = 4 * 3600 * 1000;
  Created(job);
  JobRecord claimed = Claimed("w1");
  const int64_t later = kNow + 3 * 3600 * 1000;
  absl::StatusOr<JobOutcome> beat = store().jobs().HeartbeatJob(
      FenceOfAttempt(claimed), R"({"pct":50})", later);
  ASSERT_TRUE(beat.ok());
  EXPECT_EQ(beat->job->deadline_ms, kNow + kJobHardCeilingMs);
  EXPECT_EQ(Get(job.job_id).progress_json, R"({"pct":50})");
  // A keep-alive keeps the progress.
  ASSERT_TRUE(
      store()
          .jobs()
          .HeartbeatJob(FenceOfAttempt(claimed), std::nullopt, later + 1)
          .ok());
  EXPECT_EQ(Get(job.job_id).progress_json, R"({"pct":50})");
}

TEST_P(Jobs, AChildWaitsBlockedUntilItsLastParentSucceeds) {
  Register("w1");
  JobRecord a = Created(NewJob("w1"));
  JobRecord b = Created(NewJob("w1"));
  JobRecord child = NewJob("w1");
  child.depends_on = {a.job_id, b.job_id};
  child.priority = 9;
  JobRecord created = Created(child);
  EXPECT_EQ(created.state, JobState::kBlocked);
  EXPECT_EQ(Get(child.job_id).depends_on.size(), 2u);
  JobRecord ca = Claimed("w1", a.job_id);
  JobOutcome done_a = Complete(FenceOfAttempt(ca));
  EXPECT_TRUE(done_a.also_changed.empty());
  EXPECT_EQ(Get(child.job_id).state, JobState::kBlocked);
  JobRecord cb = Claimed("w1", b.job_id);
  JobOutcome done_b = Complete(FenceOfAttempt(cb));
  ASSERT_EQ(done_b.also_changed.size(), 1u);
  EXPECT_EQ(done_b.also_changed[0].job_id, child.job_id);
  EXPECT_EQ(Get(child.job_id).state, JobState::kQueued);
  EXPECT_EQ(Claimed("w1").job_id, child.job_id);
}

TEST_P(Jobs, AFailedParentCancelsItsChildrenDownTheChainOrLeavesThemBlocked) {
  Register("w1");
  JobRecord parent = Created(NewJob("w1"));
  JobRecord child = NewJob("w1");
  child.depends_on = {parent.job_id};
  Created(child);
  JobRecord grandchild = NewJob("w1");
  grandchild.depends_on = {child.job_id};
  Created(grandchild);
  JobRecord patient = NewJob("w1");
  patient.depends_on = {parent.job_id};
  patient.on_dependency_failure = JobDependencyFailure::kBlock;
  Created(patient);
  JobOutcome failed =
      Fail(FenceOfAttempt(Claimed("w1", parent.job_id)), "boom", false);
  EXPECT_EQ(failed.also_changed.size(), 2u);
  EXPECT_EQ(Get(child.job_id).state, JobState::kCancelled);
  EXPECT_EQ(Get(child.job_id).error->reason, "dependency_failed");
  EXPECT_EQ(Get(grandchild.job_id).state, JobState::kCancelled);
  EXPECT_EQ(Get(patient.job_id).state, JobState::kBlocked);
  // A retry of the parent that succeeds releases the patient child.
  absl::StatusOr<JobOutcome> retried =
      store().jobs().RetryJob(parent.job_id, kNow + 5);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->job->state, JobState::kQueued);
  EXPECT_EQ(retried->job->attempt, 2);
  Complete(FenceOfAttempt(Claimed("w1", parent.job_id, kNow + 6)), kNow + 7);
  EXPECT_EQ(Get(patient.job_id).state, JobState::kQueued);
}

TEST_P(Jobs, ADependencyOnAJobOutsideTheProjectIsRefusedAndNothingWritten) {
  JobRecord elsewhere = NewJob("w1");
  elsewhere.project_id = "prj_2";
  Created(elsewhere);
  JobRecord child = NewJob("w1");
  child.depends_on = {elsewhere.job_id};
  absl::StatusOr<JobOutcome> out = store().jobs().CreateJob(child);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->refusal, JobRefusal::kDependencyNotFound);
  child.depends_on = {"missing"};
  EXPECT_EQ(store().jobs().CreateJob(child)->refusal,
            JobRefusal::kDependencyNotFound);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM assign_jobs"), "1");
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_job_dependencies"), "0");
}

TEST_P(Jobs, AddingADependencyThatWouldCloseACycleIsRefused) {
  JobRecord a = Created(NewJob("w1"));
  JobRecord b = NewJob("w1");
  b.depends_on = {a.job_id};
  Created(b);
  JobRecord c = NewJob("w1");
  c.depends_on = {b.job_id};
  Created(c);
  // a <- b <- c: c as a's parent closes a cycle, and so does a itself.
  for (const std::string& parent : {c.job_id, b.job_id, a.job_id}) {
    absl::StatusOr<JobOutcome> out =
        store().jobs().AddJobDependency(a.job_id, {parent}, kNow + 1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->refusal, JobRefusal::kDependencyCycle) << parent;
    EXPECT_EQ(ReasonOf(ToStatus(*out, a.job_id)), "JOB_DEPENDENCY_CYCLE");
  }
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_job_dependencies"), "2");
  EXPECT_EQ(Get(a.job_id).state, JobState::kQueued);
}

TEST_P(Jobs, AnAddedDependencyBlocksAQueuedJobUntilTheParentSucceeds) {
  Register("w1");
  JobRecord parent = Created(NewJob("w1"));
  JobRecord child = Created(NewJob("w1"));
  absl::StatusOr<JobOutcome> out =
      store().jobs().AddJobDependency(child.job_id, {parent.job_id}, kNow + 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->refusal, JobRefusal::kNone);
  EXPECT_EQ(out->job->state, JobState::kBlocked);
  EXPECT_EQ(out->job->depends_on, std::vector<std::string>{parent.job_id});
  Complete(FenceOfAttempt(Claimed("w1", parent.job_id)));
  EXPECT_EQ(Get(child.job_id).state, JobState::kQueued);
  // A job that started has its dependencies fixed.
  JobRecord running = Claimed("w1", child.job_id);
  JobRecord late = Created(NewJob("w1"));
  EXPECT_EQ(store()
                .jobs()
                .AddJobDependency(running.job_id, {late.job_id}, kNow + 3)
                ->refusal,
            JobRefusal::kStarted);
  EXPECT_EQ(store()
                .jobs()
                .AddJobDependency(late.job_id, {"missing"}, kNow + 3)
                ->refusal,
            JobRefusal::kDependencyNotFound);
}

TEST_P(Jobs, CancelEndsAQueuedJobAndMarksARunningOneUntilItsWorkerStops) {
  Register("w1");
  JobRecord queued = Created(NewJob("w1"));
  absl::StatusOr<JobOutcome> c1 =
      store().jobs().CancelJob(queued.job_id, "not needed", kNow + 1);
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(c1->job->state, JobState::kCancelled);
  EXPECT_EQ(c1->job->error->message, "not needed");

  Created(NewJob("w1", 3));
  JobRecord running = Claimed("w1");
  absl::StatusOr<JobOutcome> c2 =
      store().jobs().CancelJob(running.job_id, "stop", kNow + 2);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->job->state, JobState::kRunning);
  EXPECT_TRUE(c2->job->cancel_requested);
  absl::StatusOr<JobOutcome> beat =
      store().jobs().HeartbeatJob(FenceOfAttempt(running), "{}", kNow + 3);
  EXPECT_TRUE(beat->job->cancel_requested);
  // Retries left, but a cancelled job is not retried.
  EXPECT_EQ(Fail(FenceOfAttempt(running), "stopped").job->state,
            JobState::kCancelled);
  EXPECT_EQ(store().jobs().CancelJob("nope", "", kNow)->refusal,
            JobRefusal::kNotFound);
}

TEST_P(Jobs, RetryQueuesOnlyAnEndedJob) {
  Register("w1");
  JobRecord job = Created(NewJob("w1"));
  EXPECT_EQ(store().jobs().RetryJob(job.job_id, kNow)->refusal,
            JobRefusal::kNotEnded);
  Fail(FenceOfAttempt(Claimed("w1")), "boom");
  absl::StatusOr<JobOutcome> retried =
      store().jobs().RetryJob(job.job_id, kNow + 5);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->job->state, JobState::kQueued);
  EXPECT_EQ(retried->job->attempt, 2);
  EXPECT_EQ(retried->job->error->reason, "boom");
  EXPECT_EQ(retried->job->last_retry_at_ms, kNow + 5);
}

TEST_P(Jobs, ListFiltersAndPagesNewestChangeFirst) {
  Register("w1");
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    JobRecord job = NewJob(i % 2 ? "w1" : "w2");
    job.updated_at_ms = kNow + i;
    job.trace_id = i < 3 ? "t-a" : "t-b";
    ids.push_back(Created(job).job_id);
  }
  JobFilter all;
  all.limit = 3;
  std::vector<std::string> seen;
  while (true) {
    absl::StatusOr<std::vector<JobRecord>> page = store().jobs().ListJobs(all);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const JobRecord& j : *page) seen.push_back(j.job_id);
    if (page->size() < 3) break;
    all.after_updated_at_ms = page->back().updated_at_ms;
    all.after_job_id = page->back().job_id;
  }
  EXPECT_EQ(seen, std::vector<std::string>(ids.rbegin(), ids.rend()));

  JobFilter by;
  by.worker_agent = "w1";
  by.trace_id = "t-b";
  EXPECT_EQ(store().jobs().ListJobs(by)->size(), 2u);  // 3 and 5
  by = JobFilter();
  by.states = {JobState::kRunning};
  EXPECT_TRUE(store().jobs().ListJobs(by)->empty());
  Claimed("w1");
  EXPECT_EQ(store().jobs().ListJobs(by)->size(), 1u);
  by.project_ids = {"prj_other"};
  EXPECT_TRUE(store().jobs().ListJobs(by)->empty());
}

TEST_P(Jobs, OfManyConcurrentClaimersOfOneJobExactlyOneWins) {
  constexpr int kClaimers = 16;
  std::vector<std::unique_ptr<Store>> hubs;
  Store* second = &store();
  if (postgres()) {
    hubs.push_back(Open());
    ASSERT_NE(hubs.back(), nullptr);
    second = hubs.back().get();
  }
  for (int i = 0; i < kClaimers; ++i) {
    Register(store(), absl::StrCat("w", i), R"(["x"])");
  }
  for (int round = 0; round < 5; ++round) {
    JobRecord job = NewJob("");
    job.worker_kind = JobWorkerKind::kPool;
    job.pool_capabilities = {"x"};
    Created(job);
    std::atomic<int> winners{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kClaimers; ++i) {
      threads.emplace_back([&, i] {
        Store& via = i % 2 ? *second : store();
        JobClaim c;
        c.agent_id = absl::StrCat("w", i);
        c.job_id = job.job_id;
        c.now_ms = kNow + 1;
        absl::StatusOr<JobOutcome> out = via.jobs().ClaimJob(c);
        if (!out.ok()) {
          ++errors;
        } else if (out->refusal == JobRefusal::kNone) {
          ++winners;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(winners.load(), 1) << "round " << round;
  }
}

TEST_P(Jobs, ATrifluxRowIsReadAsTheStateItsStatusNames) {
  store();  // the schema
  ASSERT_EQ(Exec("INSERT INTO assign_jobs (job_id, supervisor_agent, "
                 "worker_agent, status, created_at_ms, updated_at_ms) VALUES "
                 "('tfx-1', 'sup', 'wk', 'timed_out', 1, 2)"),
            "");
  JobRecord job = Get("tfx-1");
  EXPECT_EQ(job.state, JobState::kTimedOut);
  EXPECT_EQ(job.topic, "assign.job");
  EXPECT_EQ(job.attempt, 1);
}

HUB_STORE_TEST_SUITE(Jobs);

}  // namespace
}  // namespace hub::storage
