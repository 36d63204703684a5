// JobService through gRPC against an in-process HubServer: a job's round
// trip from supervisor to worker and back, a stale worker's writes refused
// with triflux's reasons and its late result kept, a worker whose stream is
// gone losing its attempt to another worker, deadlines, dependencies,
// cancel, bad input with its reasons, and one winner among 64 claimers.
#include <grpcpp/create_channel.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/v1/job.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub::testing {
namespace {

using hub::v1::ClaimJobRequest;
using hub::v1::ClaimJobResponse;
using hub::v1::CreateJobRequest;
using hub::v1::CreateJobResponse;
using hub::v1::Job;
using hub::v1::JobAttempt;

class JobGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestHub(TestHubOptions(FreshTestDbPath()));
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    jobs_ = hub::v1::JobService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  static CreateJobRequest Request(const std::string& worker,
                                  int max_attempts = 1) {
    CreateJobRequest r;
    r.set_project_id(kStreamProject);
    r.mutable_supervisor()->set_agent_id("boss");
    r.mutable_worker()->set_agent_id(worker);
    r.set_task("run the tests");
    (*r.mutable_payload()->mutable_fields())["suite"].set_string_value("all");
    r.set_max_attempts(max_attempts);
    return r;
  }
  grpc::Status Create(const CreateJobRequest& r, Job* out = nullptr) {
    grpc::ClientContext context;
    CreateJobResponse response;
    grpc::Status s = jobs_->CreateJob(&context, r, &response);
    if (out != nullptr) *out = response.job();
    return s;
  }
  Job CreateOk(const CreateJobRequest& r) {
    Job job;
    grpc::Status s = Create(r, &job);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return job;
  }
  grpc::Status Claim(const std::string& agent, ClaimJobResponse* out,
                     const std::string& job_id = "") {
    grpc::ClientContext context;
    ClaimJobRequest r;
    r.set_agent_id(agent);
    r.set_job_id(job_id);
    return jobs_->ClaimJob(&context, r, out);
  }
  Job ClaimOk(const std::string& agent) {
    ClaimJobResponse response;
    grpc::Status s = Claim(agent, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(response.has_job()) << agent << " claimed nothing";
    return response.job();
  }
  grpc::Status Complete(const JobAttempt& attempt, Job* out = nullptr) {
    grpc::ClientContext context;
    hub::v1::CompleteJobRequest r;
    *r.mutable_attempt() = attempt;
    (*r.mutable_result()->mutable_fields())["passed"].set_number_value(42);
    hub::v1::CompleteJobResponse response;
    grpc::Status s = jobs_->CompleteJob(&context, r, &response);
    if (out != nullptr) *out = response.job();
    return s;
  }
  grpc::Status Fail(const JobAttempt& attempt, const std::string& reason,
                    Job* out = nullptr) {
    grpc::ClientContext context;
    hub::v1::FailJobRequest r;
    *r.mutable_attempt() = attempt;
    r.mutable_error()->set_reason(reason);
    r.mutable_error()->set_retryable(true);
    hub::v1::FailJobResponse response;
    grpc::Status s = jobs_->FailJob(&context, r, &response);
    if (out != nullptr) *out = response.job();
    return s;
  }
  Job Get(const std::string& id) {
    grpc::ClientContext context;
    hub::v1::GetJobRequest r;
    r.set_job_id(id);
    hub::v1::GetJobResponse response;
    grpc::Status s = jobs_->GetJob(&context, r, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.job();
  }
  // Waits (generous deadline) until the job is in `state`.
  bool WaitForState(const std::string& id, hub::v1::JobState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (Get(id).state() == state) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::JobService::Stub> jobs_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;

  // Waits (generous deadline) for a pending message of `agent` with
  // `topic` whose payload's kind is `kind`; returns its payload.
  google::protobuf::Struct AwaitNotice(const std::string& agent,
                                       const std::string& topic,
                                       const std::string& kind) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      grpc::ClientContext context;
      hub::v1::ListPendingRequest r;
      r.set_agent_id(agent);
      r.set_topic(topic);
      r.set_peek(true);
      r.set_page_size(100);
      hub::v1::ListPendingResponse page;
      grpc::Status s = messages_->ListPending(&context, r, &page);
      EXPECT_TRUE(s.ok()) << s.error_message();
      for (const hub::v1::MessageDelivery& d : page.deliveries()) {
        const auto& fields = d.message().payload().fields();
        auto it = fields.find("kind");
        if (it != fields.end() && it->second.string_value() == kind) {
          return d.message().payload();
        }
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << agent << " heard no " << kind << " on " << topic;
    return {};
  }
};

TEST_F(JobGrpcTest, AJobGoesFromSupervisorToWorkerAndItsResultBack) {
  const int64_t generation = RegisterAgentOk(presence_.get(), "worker-a");
  const Job created = CreateOk(Request("worker-a"));
  EXPECT_EQ(created.state(), hub::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(created.attempt().attempt(), 1);
  EXPECT_EQ(created.priority(), 5);
  EXPECT_EQ(created.topic(), "assign.job");
  EXPECT_EQ(created.timeout().seconds(), 600);

  const Job claimed = ClaimOk("worker-a");
  EXPECT_EQ(claimed.job_id(), created.job_id());
  EXPECT_EQ(claimed.state(), hub::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(claimed.attempt().agent_id(), "worker-a");
  EXPECT_EQ(claimed.attempt().presence_generation(), generation);
  EXPECT_EQ(claimed.payload().fields().at("suite").string_value(), "all");

  grpc::ClientContext context;
  hub::v1::HeartbeatJobRequest beat;
  *beat.mutable_attempt() = claimed.attempt();
  (*beat.mutable_progress()->mutable_fields())["pct"].set_number_value(50);
  hub::v1::HeartbeatJobResponse beat_response;
  ASSERT_TRUE(jobs_->HeartbeatJob(&context, beat, &beat_response).ok());
  EXPECT_FALSE(beat_response.cancel_requested());

  Job done;
  ASSERT_TRUE(Complete(claimed.attempt(), &done).ok());
  EXPECT_EQ(done.state(), hub::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.result().fields().at("passed").number_value(), 42);
  EXPECT_EQ(Get(created.job_id()).state(), hub::v1::JOB_STATE_SUCCEEDED);
}

TEST_F(JobGrpcTest, TheWorkerHearsOfItsJobAndTheSupervisorOfItsResult) {
  RegisterAgentOk(presence_.get(), "boss");
  RegisterAgentOk(presence_.get(), "worker-a");
  const Job job = CreateOk(Request("worker-a", 2));
  google::protobuf::Struct offer =
      AwaitNotice("worker-a", "assign.job", "assign.job");
  EXPECT_EQ(offer.fields().at("job_id").string_value(), job.job_id());
  EXPECT_EQ(offer.fields().at("task").string_value(), "run the tests");
  const Job first = ClaimOk("worker-a");
  ASSERT_TRUE(Fail(first.attempt(), "flaky").ok());
  const Job second = [&] {
    // The retry waits its backoff (1 s by default) before it is claimable.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    ClaimJobResponse response;
    while (absl::Now() < deadline) {
      EXPECT_TRUE(Claim("worker-a", &response).ok());
      if (response.has_job()) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return response.job();
  }();
  ASSERT_EQ(second.attempt().attempt(), 2);
  EXPECT_EQ(Reason(Complete(first.attempt())), "ASSIGN_ATTEMPT_MISMATCH");
  google::protobuf::Struct late =
      AwaitNotice("boss", "assign.result", "late_result");
  EXPECT_EQ(late.fields().at("attempt").number_value(), 1);
  ASSERT_TRUE(Complete(second.attempt()).ok());
  google::protobuf::Struct result =
      AwaitNotice("boss", "assign.result", "assign.result");
  EXPECT_EQ(result.fields().at("state").string_value(), "succeeded");
  EXPECT_EQ(result.fields()
                .at("result")
                .struct_value()
                .fields()
                .at("passed")
                .number_value(),
            42);
}

TEST_F(JobGrpcTest, AStaleAttemptsWritesAreRefusedAndItsLateResultKept) {
  RegisterAgentOk(presence_.get(), "worker-a");
  const Job claimed = [&] {
    CreateOk(Request("worker-a", 3));
    return ClaimOk("worker-a");
  }();
  Job retried;
  ASSERT_TRUE(Fail(claimed.attempt(), "flaky", &retried).ok());
  EXPECT_EQ(retried.state(), hub::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(retried.attempt().attempt(), 2);

  grpc::Status late = Complete(claimed.attempt());
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(late), "ASSIGN_ATTEMPT_MISMATCH");
  EXPECT_EQ(ErrorInfoOf(late).metadata().at("attempt"), "2");

  JobAttempt forged = claimed.attempt();
  forged.set_attempt(2);
  forged.set_agent_id("worker-b");
  EXPECT_EQ(Reason(Complete(forged)), "JOB_NOT_RUNNING");

  JobAttempt missing = claimed.attempt();
  missing.set_job_id("no-such-job");
  grpc::Status not_found = Complete(missing);
  EXPECT_EQ(not_found.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(not_found), "ASSIGN_NOT_FOUND");

  const Job now = Get(claimed.job_id());
  EXPECT_EQ(now.state(), hub::v1::JOB_STATE_QUEUED);
  ASSERT_EQ(now.late_results_size(), 1);
  EXPECT_EQ(now.late_results(0).attempt(), 1);
  EXPECT_EQ(now.late_results(0).result().fields().at("passed").number_value(),
            42);
}

TEST_F(JobGrpcTest, AWorkerWhoseStreamIsGoneLosesItsAttemptToAnotherWorker) {
  const int64_t generation = RegisterAgentOk(presence_.get(), "worker-a");
  RegisterAgentOk(presence_.get(), "worker-b");
  AttachedAgent stream = AttachOk(presence_.get(), "worker-a", generation);
  CreateJobRequest request = Request("");
  request.mutable_worker()->mutable_pool()->add_capabilities(
      "role:cto:candidate");
  request.set_max_attempts(3);
  const Job job = CreateOk(request);
  const Job first = ClaimOk("worker-a");
  ASSERT_EQ(first.job_id(), job.job_id());
  // worker-a's session dies: after the detach grace its attempt ends and
  // the job is claimable again, at once (no backoff for a gone worker).
  stream.context->TryCancel();
  ASSERT_TRUE(WaitForState(job.job_id(), hub::v1::JOB_STATE_QUEUED));
  const Job queued = Get(job.job_id());
  EXPECT_EQ(queued.attempt().attempt(), 2);
  EXPECT_EQ(queued.error().reason(), "worker_gone");
  const Job second = ClaimOk("worker-b");
  EXPECT_EQ(second.job_id(), job.job_id());
  EXPECT_EQ(second.attempt().attempt(), 2);
  EXPECT_EQ(Reason(Complete(first.attempt())), "ASSIGN_ATTEMPT_MISMATCH");
  ASSERT_TRUE(Complete(second.attempt()).ok());
  EXPECT_EQ(Get(job.job_id()).late_results_size(), 1);
}

TEST_F(JobGrpcTest, AnAttemptPastItsDeadlineTimesOut) {
  RegisterAgentOk(presence_.get(), "worker-a");
  CreateJobRequest request = Request("worker-a");
  request.mutable_timeout()->set_seconds(1);
  const Job job = CreateOk(request);
  const Job claimed = ClaimOk("worker-a");
  ASSERT_TRUE(WaitForState(job.job_id(), hub::v1::JOB_STATE_TIMED_OUT));
  EXPECT_EQ(Get(job.job_id()).error().reason(), "timed_out");
  EXPECT_EQ(Reason(Complete(claimed.attempt())), "JOB_NOT_RUNNING");
}

TEST_F(JobGrpcTest, AChildIsClaimableOnlyOnceItsParentSucceeded) {
  RegisterAgentOk(presence_.get(), "worker-a");
  const Job parent = CreateOk(Request("worker-a"));
  CreateJobRequest child_request = Request("worker-a");
  child_request.add_depends_on(parent.job_id());
  child_request.set_priority(9);
  const Job child = CreateOk(child_request);
  EXPECT_EQ(child.state(), hub::v1::JOB_STATE_BLOCKED);
  EXPECT_EQ(child.depends_on(0), parent.job_id());
  const Job first = ClaimOk("worker-a");
  EXPECT_EQ(first.job_id(), parent.job_id());
  ASSERT_TRUE(Complete(first.attempt()).ok());
  EXPECT_EQ(Get(child.job_id()).state(), hub::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(ClaimOk("worker-a").job_id(), child.job_id());
}

TEST_F(JobGrpcTest, AddedDependenciesBlockAJobAndACycleIsRefused) {
  const Job parent = CreateOk(Request("worker-a"));
  const Job child = CreateOk(Request("worker-a"));
  auto add = [&](const std::string& job, const std::string& parent_id,
                 Job* out) {
    grpc::ClientContext context;
    hub::v1::AddJobDependencyRequest r;
    r.set_job_id(job);
    r.add_parent_ids(parent_id);
    hub::v1::AddJobDependencyResponse response;
    grpc::Status s = jobs_->AddJobDependency(&context, r, &response);
    if (out != nullptr) *out = response.job();
    return s;
  };
  Job blocked;
  ASSERT_TRUE(add(child.job_id(), parent.job_id(), &blocked).ok());
  EXPECT_EQ(blocked.state(), hub::v1::JOB_STATE_BLOCKED);
  grpc::Status cycle = add(parent.job_id(), child.job_id(), nullptr);
  EXPECT_EQ(cycle.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(cycle), "JOB_DEPENDENCY_CYCLE");
  EXPECT_EQ(Get(parent.job_id()).depends_on_size(), 0);
  EXPECT_EQ(Reason(add(child.job_id(), "no-such-job", nullptr)),
            "JOB_DEPENDENCY_NOT_FOUND");
}

TEST_F(JobGrpcTest, CancelReachesARunningAttemptsNextHeartbeat) {
  RegisterAgentOk(presence_.get(), "worker-a");
  const Job job = CreateOk(Request("worker-a", 5));
  const Job claimed = ClaimOk("worker-a");
  grpc::ClientContext context;
  hub::v1::CancelJobRequest cancel;
  cancel.set_job_id(job.job_id());
  cancel.set_reason("plans changed");
  hub::v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(&context, cancel, &cancelled).ok());
  EXPECT_TRUE(cancelled.job().cancel_requested());
  grpc::ClientContext beat_context;
  hub::v1::HeartbeatJobRequest beat;
  *beat.mutable_attempt() = claimed.attempt();
  hub::v1::HeartbeatJobResponse beat_response;
  ASSERT_TRUE(jobs_->HeartbeatJob(&beat_context, beat, &beat_response).ok());
  EXPECT_TRUE(beat_response.cancel_requested());
  Job ended;
  ASSERT_TRUE(Fail(claimed.attempt(), "stopped", &ended).ok());
  EXPECT_EQ(ended.state(), hub::v1::JOB_STATE_CANCELLED);
}

TEST_F(JobGrpcTest, BadInputIsRefusedWithItsReasonAndWritesNothing) {
  struct Case {
    std::string name;
    std::function<void(CreateJobRequest*)> change;
    std::string reason;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"priority 0 is the default, 10 is out",
       [](CreateJobRequest* r) { r->set_priority(10); }, "JOB_FIELD_INVALID",
       "priority"},
      {"negative timeout",
       [](CreateJobRequest* r) { r->mutable_timeout()->set_seconds(-5); },
       "JOB_FIELD_INVALID", "timeout"},
      {"absurd timeout",
       [](CreateJobRequest* r) {
         r->mutable_timeout()->set_seconds(400LL * 24 * 3600);
       },
       "JOB_FIELD_INVALID", "timeout"},
      {"no task", [](CreateJobRequest* r) { r->clear_task(); },
       "JOB_FIELD_INVALID", "task"},
      {"no worker", [](CreateJobRequest* r) { r->clear_worker(); },
       "JOB_WORKER_INVALID", "worker"},
      {"a worker role key that does not decode",
       [](CreateJobRequest* r) {
         r->clear_worker();
         r->mutable_worker()->set_role_key_wire("rk2.not-a-key");
       },
       "ROLE_KEY_", ""},
      {"an agent and a role at once",
       [](CreateJobRequest* r) {
         r->mutable_worker()->set_role_key_wire("rk2.not-a-key");
       },
       "JOB_WORKER_INVALID", "worker"},
      {"a project id that is not one",
       [](CreateJobRequest* r) { r->set_project_id("prj_short"); },
       "PROJECT_ID_INVALID", "project_id"},
      {"a payload over 256 KiB",
       [](CreateJobRequest* r) {
         (*r->mutable_payload()->mutable_fields())["big"].set_string_value(
             std::string(300 * 1024, 'x'));
       },
       "JOB_FIELD_INVALID", "payload"},
      {"max_attempts over 100",
       [](CreateJobRequest* r) { r->set_max_attempts(101); },
       "JOB_FIELD_INVALID", "max_attempts"},
      {"jitter over 1",
       [](CreateJobRequest* r) { r->mutable_retry_policy()->set_jitter(2); },
       "JOB_FIELD_INVALID", "retry_policy.jitter"},
  };
  for (const Case& c : cases) {
    CreateJobRequest r = Request("worker-a");
    c.change(&r);
    grpc::Status s = Create(r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    // A role key's reason is role_key.proto's (ROLE_KEY_...).
    EXPECT_EQ(Reason(s).substr(0, c.reason.size()), c.reason)
        << c.name << ": " << Reason(s) << " " << s.error_message();
    if (!c.field.empty()) {
      EXPECT_EQ(ErrorInfoOf(s).metadata().at("field"), c.field) << c.name;
    }
  }
  CreateJobRequest unknown_parent = Request("worker-a");
  unknown_parent.add_depends_on("no-such-job");
  grpc::Status s = Create(unknown_parent);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(s), "JOB_DEPENDENCY_NOT_FOUND");

  grpc::ClientContext context;
  hub::v1::ListJobsRequest list;
  list.set_project_id(kStreamProject);
  hub::v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_->ListJobs(&context, list, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(JobGrpcTest, OfSixtyFourConcurrentClaimersOfOneJobExactlyOneWins) {
  constexpr int kClaimers = 64;
  for (int i = 0; i < kClaimers; ++i) {
    RegisterAgentOk(presence_.get(), absl::StrCat("claimer-", i));
  }
  for (int round = 0; round < 10; ++round) {
    CreateJobRequest request = Request("");
    request.mutable_worker()->mutable_pool()->add_capabilities(
        "role:cto:candidate");
    const Job job = CreateOk(request);
    std::atomic<int> winners{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kClaimers; ++i) {
      threads.emplace_back([&, i] {
        ClaimJobResponse response;
        grpc::Status s =
            Claim(absl::StrCat("claimer-", i), &response, job.job_id());
        if (s.ok() && response.has_job()) {
          ++winners;
        } else if (Reason(s) == "JOB_NOT_CLAIMABLE") {
          ++refused;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(winners.load(), 1) << "round " << round;
    EXPECT_EQ(refused.load(), kClaimers - 1) << "round " << round;
  }
}

TEST_F(JobGrpcTest, ListPagesNewestChangeFirst) {
  RegisterAgentOk(presence_.get(), "worker-a");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(CreateOk(Request("worker-a")).job_id());
  std::vector<std::string> seen;
  std::string token;
  do {
    grpc::ClientContext context;
    hub::v1::ListJobsRequest list;
    list.set_page_size(2);
    list.set_page_token(token);
    hub::v1::ListJobsResponse page;
    ASSERT_TRUE(jobs_->ListJobs(&context, list, &page).ok());
    for (const Job& j : page.jobs()) seen.push_back(j.job_id());
    token = page.next_page_token();
  } while (!token.empty());
  EXPECT_EQ(seen.size(), 5u);
  grpc::ClientContext context;
  hub::v1::ListJobsRequest bad;
  bad.set_page_token("garbage!");
  hub::v1::ListJobsResponse page;
  EXPECT_EQ(Reason(jobs_->ListJobs(&context, bad, &page)),
            "PAGE_TOKEN_INVALID");
}

}  // namespace
}  // namespace hub::testing
