// JobService and PresenceService calls of the tests that drive real hubd
// processes with jobs (jobs_fencing_test, jobs_crash_test): each call has a
// deadline, so a hub that hangs or was killed fails the call rather than
// the test, and returns the status with the reply.
#ifndef HUB_TESTS_JOB_TEST_CALLS_H_
#define HUB_TESTS_JOB_TEST_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hub/v1/job.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"

namespace hub::testing {

inline constexpr char kJobProject[] = "prj_JOBSFENCEJOBSFENCEJOBS";

// One hub's stubs.
struct JobStubs {
  explicit JobStubs(const std::string& address) {
    // A subchannel of its own: a channel to a hub that was killed and
    // restarted on the same address does not inherit another's backoff.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args);
    presence = hub::v1::PresenceService::NewStub(channel);
    jobs = hub::v1::JobService::NewStub(channel);
  }
  std::unique_ptr<hub::v1::PresenceService::Stub> presence;
  std::unique_ptr<hub::v1::JobService::Stub> jobs;
};

// A context whose call gives up after `timeout`.
inline std::unique_ptr<grpc::ClientContext> CallContext(
    absl::Duration timeout = absl::Seconds(30)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

// A reply and its status.
template <typename Reply>
struct Call {
  grpc::Status status;
  Reply reply;
  bool ok() const { return status.ok(); }
};

// Registers `id` in kJobProject with `capabilities` and a 2 h lease (no
// heartbeats needed while a test runs).
inline Call<hub::v1::RegisterAgentResponse> RegisterWorker(
    JobStubs& hub, const std::string& id,
    const std::vector<std::string>& capabilities) {
  hub::v1::RegisterAgentRequest r;
  r.set_agent_id(id);
  r.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  r.set_project_id(kJobProject);
  for (const std::string& c : capabilities) r.add_capabilities(c);
  r.mutable_heartbeat_ttl()->set_seconds(7200);
  Call<hub::v1::RegisterAgentResponse> out;
  out.status = hub.presence->RegisterAgent(CallContext().get(), r, &out.reply);
  return out;
}

inline Call<hub::v1::DeregisterResponse> DeregisterWorker(JobStubs& hub,
                                                          const std::string& id,
                                                          int64_t generation) {
  hub::v1::DeregisterRequest r;
  r.set_agent_id(id);
  r.set_presence_generation(generation);
  Call<hub::v1::DeregisterResponse> out;
  out.status = hub.presence->Deregister(CallContext().get(), r, &out.reply);
  return out;
}

// A job of kJobProject for the pool of agents with `capability`, supervised
// by "fence-boss", retried after 1 ms.
inline hub::v1::CreateJobRequest PoolJob(const std::string& capability,
                                         int64_t timeout_s, int max_attempts) {
  hub::v1::CreateJobRequest r;
  r.set_project_id(kJobProject);
  r.mutable_supervisor()->set_agent_id("fence-boss");
  r.mutable_worker()->mutable_pool()->add_capabilities(capability);
  r.set_task("adversarial");
  r.mutable_timeout()->set_seconds(timeout_s);
  r.set_max_attempts(max_attempts);
  r.mutable_retry_policy()->mutable_initial_backoff()->set_nanos(1'000'000);
  r.mutable_retry_policy()->mutable_max_backoff()->set_nanos(1'000'000);
  return r;
}

inline Call<hub::v1::CreateJobResponse> CreateJob(
    JobStubs& hub, const hub::v1::CreateJobRequest& r) {
  Call<hub::v1::CreateJobResponse> out;
  out.status = hub.jobs->CreateJob(CallContext().get(), r, &out.reply);
  return out;
}

// Claims `job_id` ("" : the next claimable one) for `agent` at `generation`.
inline Call<hub::v1::ClaimJobResponse> ClaimJob(JobStubs& hub,
                                                const std::string& agent,
                                                int64_t generation,
                                                const std::string& job_id) {
  hub::v1::ClaimJobRequest r;
  r.set_agent_id(agent);
  r.set_presence_generation(generation);
  r.set_job_id(job_id);
  Call<hub::v1::ClaimJobResponse> out;
  out.status = hub.jobs->ClaimJob(CallContext().get(), r, &out.reply);
  return out;
}

inline Call<hub::v1::HeartbeatJobResponse> HeartbeatJob(
    JobStubs& hub, const hub::v1::JobAttempt& attempt, int64_t step) {
  hub::v1::HeartbeatJobRequest r;
  *r.mutable_attempt() = attempt;
  (*r.mutable_progress()->mutable_fields())["step"].set_number_value(
      static_cast<double>(step));
  Call<hub::v1::HeartbeatJobResponse> out;
  out.status = hub.jobs->HeartbeatJob(CallContext().get(), r, &out.reply);
  return out;
}

// Completes with the result {"by": <agent>, "attempt": <attempt>}.
inline Call<hub::v1::CompleteJobResponse> CompleteJob(
    JobStubs& hub, const hub::v1::JobAttempt& attempt) {
  hub::v1::CompleteJobRequest r;
  *r.mutable_attempt() = attempt;
  auto& fields = *r.mutable_result()->mutable_fields();
  fields["by"].set_string_value(attempt.agent_id());
  fields["attempt"].set_number_value(static_cast<double>(attempt.attempt()));
  Call<hub::v1::CompleteJobResponse> out;
  out.status = hub.jobs->CompleteJob(CallContext().get(), r, &out.reply);
  return out;
}

inline Call<hub::v1::FailJobResponse> FailJob(
    JobStubs& hub, const hub::v1::JobAttempt& attempt, bool retryable) {
  hub::v1::FailJobRequest r;
  *r.mutable_attempt() = attempt;
  r.mutable_error()->set_reason(retryable ? "flaky" : "broken");
  r.mutable_error()->set_retryable(retryable);
  Call<hub::v1::FailJobResponse> out;
  out.status = hub.jobs->FailJob(CallContext().get(), r, &out.reply);
  return out;
}

inline Call<hub::v1::GetJobResponse> GetJob(JobStubs& hub,
                                            const std::string& job_id) {
  hub::v1::GetJobRequest r;
  r.set_job_id(job_id);
  Call<hub::v1::GetJobResponse> out;
  out.status = hub.jobs->GetJob(CallContext().get(), r, &out.reply);
  return out;
}

inline Call<hub::v1::CancelJobResponse> CancelJob(JobStubs& hub,
                                                  const std::string& job_id) {
  hub::v1::CancelJobRequest r;
  r.set_job_id(job_id);
  r.set_reason("adversarial cancel");
  Call<hub::v1::CancelJobResponse> out;
  out.status = hub.jobs->CancelJob(CallContext().get(), r, &out.reply);
  return out;
}

inline bool IsEnded(hub::v1::JobState state) {
  return state == hub::v1::JOB_STATE_SUCCEEDED ||
         state == hub::v1::JOB_STATE_FAILED ||
         state == hub::v1::JOB_STATE_TIMED_OUT ||
         state == hub::v1::JOB_STATE_CANCELLED;
}

// Microseconds of a steady clock, for ordering a test's own calls.
inline int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace hub::testing

#endif  // HUB_TESTS_JOB_TEST_CALLS_H_
