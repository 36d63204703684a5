#include "registry/job_changes.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/test_util.h"

namespace hub {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

class JobChangeTapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
    ASSERT_NE(store_, nullptr);
    storage::AgentRegistration r;
    r.agent_id = "worker";
    r.cli = "codex";
    r.now_ms = kNow;
    r.lease_ttl_ms = 30'000;
    r.project_id = "prj_1";
    ASSERT_TRUE(store_->agents().RegisterAgent(r).ok());
    tap_ = std::make_unique<JobChangeTap>(
        &store_->jobs(), [this](const JobRecord& job) {
          told_.push_back(job.job_id + ":" +
                          std::string(JobStateName(job.state)));
        });
  }

  JobRecord NewJob(const std::string& id) {
    JobRecord job;
    job.job_id = id;
    job.project_id = "prj_1";
    job.supervisor_agent = "boss";
    job.worker_agent = "worker";
    job.task = "build";
    job.max_retries = 1;
    job.retry_policy.initial_backoff_ms = 0;
    job.created_at_ms = kNow;
    job.updated_at_ms = kNow;
    return job;
  }

  // The ids told since the last call.
  std::vector<std::string> Told() {
    std::vector<std::string> out;
    out.swap(told_);
    return out;
  }

  std::unique_ptr<storage::SqliteStore> store_;
  std::vector<std::string> told_;
  std::unique_ptr<JobChangeTap> tap_;
};

JobAttemptFence FenceOf(const JobRecord& job) {
  return {job.job_id, job.attempt, job.attempt_worker.value_or(""),
          job.attempt_generation.value_or(0), 0};
}

TEST_F(JobChangeTapTest, EveryCommittedWriteTellsItsJobsAndNoRefusalDoes) {
  JobRecord parent = NewJob("job-1");
  parent.idempotency_key = "key";
  ASSERT_TRUE(tap_->CreateJob(parent).ok());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-1:queued"});
  // The same key returns the first job: nothing changed.
  JobRecord again = NewJob("job-9");
  again.idempotency_key = "key";
  ASSERT_TRUE(tap_->CreateJob(again).ok());
  EXPECT_TRUE(Told().empty());
  JobRecord child = NewJob("job-2");
  child.depends_on = {"job-1"};
  ASSERT_TRUE(tap_->CreateJob(child).ok());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-2:blocked"});

  storage::JobClaim claim;
  claim.agent_id = "worker";
  claim.job_id = "job-1";
  claim.now_ms = kNow + 1;
  absl::StatusOr<storage::JobOutcome> first = tap_->ClaimJob(claim);
  ASSERT_TRUE(first.ok() && first->job.has_value());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-1:running"});
  ASSERT_TRUE(tap_->HeartbeatJob(FenceOf(*first->job), "{}", kNow + 2).ok());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-1:running"});

  storage::JobFailure failure;
  failure.error.reason = "flaky";
  failure.now_ms = kNow + 3;
  ASSERT_TRUE(tap_->FailJob(FenceOf(*first->job), failure).ok());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-1:queued"});
  // The ended attempt's heartbeat is refused: nothing told.
  absl::StatusOr<storage::JobOutcome> stale =
      tap_->HeartbeatJob(FenceOf(*first->job), "{}", kNow + 4);
  ASSERT_TRUE(stale.ok());
  EXPECT_NE(stale->refusal, storage::JobRefusal::kNone);
  EXPECT_TRUE(Told().empty());
  // Its completion is refused too, but kept as a late result: told.
  absl::StatusOr<storage::JobOutcome> late =
      tap_->CompleteJob(FenceOf(*first->job), "{}", kNow + 5);
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(late->late_result_kept);
  EXPECT_EQ(Told(), std::vector<std::string>{"job-1:queued"});

  claim.now_ms = kNow + 6;
  absl::StatusOr<storage::JobOutcome> second = tap_->ClaimJob(claim);
  ASSERT_TRUE(second.ok() && second->job.has_value());
  Told();
  // The parent's success releases the child: both told.
  ASSERT_TRUE(tap_->CompleteJob(FenceOf(*second->job), "{}", kNow + 7).ok());
  EXPECT_EQ(Told(),
            (std::vector<std::string>{"job-1:succeeded", "job-2:queued"}));
  ASSERT_TRUE(tap_->CancelJob("job-2", "no", kNow + 8).ok());
  EXPECT_EQ(Told(), std::vector<std::string>{"job-2:cancelled"});
  // Reads tell nothing.
  ASSERT_TRUE(tap_->GetJob("job-2").ok());
  ASSERT_TRUE(tap_->ListJobs({}).ok());
  EXPECT_TRUE(Told().empty());
}

}  // namespace
}  // namespace hub
