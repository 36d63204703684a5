#include "hub/services/job_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hub/edge/auth.h"
#include "hub/services/error_mapping.h"
#include "hub/services/job_mapping.h"
#include "hub/services/proto_time.h"
#include "registry/agent_validation.h"
#include "status/status.h"

namespace hub {

using job_limits::kMaxDependencies;
using job_limits::kMaxPayloadBytes;
using job_limits::kMaxProgressBytes;
using job_limits::kMaxWordBytes;

namespace {

// The principal may see the job: its project is one of the token's.
absl::Status MaySee(const Principal& principal, const JobRecord& job) {
  if (principal.MayTouchProject(job.project_id)) return absl::OkStatus();
  return WithMetadata(NotFoundError("ASSIGN_NOT_FOUND",
                                    absl::StrCat("no job '", job.job_id, "'")),
                      "job_id", job.job_id);
}

// Cancel and Retry: an operator, or the job's supervisor agent.
absl::Status MaySupervise(const Principal& principal, const JobRecord& job,
                          const std::string& agent_id) {
  if (absl::Status s = MaySee(principal, job); !s.ok()) return s;
  if (!principal.IsAgentToken()) return absl::OkStatus();
  if (!agent_id.empty() && job.supervisor_agent == agent_id) {
    return absl::OkStatus();
  }
  return ReasonError(absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                     "only an operator or the job's supervisor agent may "
                     "cancel, retry or add dependencies to it");
}

template <typename Response>
void Answer(grpc::ServerUnaryReactor* reactor, Response* response,
            const absl::StatusOr<JobRecord>& job) {
  if (!job.ok()) {
    reactor->Finish(ToGrpcStatus(job.status()));
    return;
  }
  absl::StatusOr<hub::v1::Job> proto = JobToProto(*job);
  if (!proto.ok()) {
    reactor->Finish(ToGrpcStatus(proto.status()));
    return;
  }
  *response->mutable_job() = std::move(*proto);
  reactor->Finish(grpc::Status::OK);
}

}  // namespace

template <typename Response>
grpc::ServerUnaryReactor* JobServiceImpl::Supervised(
    grpc::CallbackServerContext* context, const Principal& principal,
    const std::string& job_id, const std::string& agent_id, Response* response,
    std::function<absl::StatusOr<JobRecord>()> write) {
  absl::StatusOr<std::optional<JobRecord>> job = book_->Get(job_id);
  if (!job.ok()) return FinishUnary(context, job.status());
  if (job->has_value()) {
    if (absl::Status s = MaySupervise(principal, **job, agent_id); !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([reactor, response, write = std::move(write)] {
    Answer(reactor, response, write());
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::CreateJob(
    grpc::CallbackServerContext* context,
    const hub::v1::CreateJobRequest* request,
    hub::v1::CreateJobResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<JobRecord> job = JobFromCreate(*request);
  if (!job.ok()) return FinishUnary(context, job.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, job = std::move(*job)] {
    absl::StatusOr<std::pair<JobRecord, bool>> created = book_->Create(job);
    if (!created.ok()) {
      reactor->Finish(ToGrpcStatus(created.status()));
      return;
    }
    response->set_created(created->second);
    Answer(reactor, response, created->first);
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ClaimJob(
    grpc::CallbackServerContext* context,
    const hub::v1::ClaimJobRequest* request,
    hub::v1::ClaimJobResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  storage::JobClaim claim;
  if (absl::Status s = ValidateJobAgent(request->agent_id(), "agent_id");
      !s.ok()) {
    return FinishUnary(context, s);
  }
  claim.agent_id = request->agent_id();
  if (request->has_presence_generation()) {
    claim.presence_generation = request->presence_generation();
  }
  if (!request->job_id().empty()) {
    if (absl::Status s = ValidateJobIdField(request->job_id(), "job_id");
        !s.ok()) {
      return FinishUnary(context, s);
    }
    claim.job_id = request->job_id();
  }
  if (!request->project_id().empty()) {
    if (absl::Status s = ValidateJobProject(request->project_id()); !s.ok()) {
      return FinishUnary(context, s);
    }
    claim.project_id = request->project_id();
  }
  if (!request->topic().empty()) {
    if (absl::Status s = ValidateTopic(request->topic()); !s.ok()) {
      return FinishUnary(context, WithMetadata(std::move(s), "field", "topic"));
    }
    claim.topic = request->topic();
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, claim = std::move(claim)] {
    absl::StatusOr<std::optional<JobRecord>> job = book_->Claim(claim);
    if (!job.ok()) {
      reactor->Finish(ToGrpcStatus(job.status()));
      return;
    }
    if (!job->has_value()) {
      reactor->Finish(grpc::Status::OK);
      return;
    }
    Answer(reactor, response, **job);
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::HeartbeatJob(
    grpc::CallbackServerContext* context,
    const hub::v1::HeartbeatJobRequest* request,
    hub::v1::HeartbeatJobResponse* response) {
  if (absl::StatusOr<Principal> p = admission_->AdmitCall(*context, *request);
      !p.ok()) {
    return FinishUnary(context, p.status());
  }
  absl::StatusOr<JobAttemptFence> fence = JobFenceOf(request->attempt());
  if (!fence.ok()) return FinishUnary(context, fence.status());
  std::optional<std::string> progress;  // unset: kept as it was
  if (request->has_progress()) {
    absl::StatusOr<std::string> json = JobStructField(
        true, request->progress(), "progress", kMaxProgressBytes);
    if (!json.ok()) return FinishUnary(context, json.status());
    progress = std::move(*json);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, fence = std::move(*fence),
                         progress = std::move(progress)] {
    absl::StatusOr<JobRecord> job = book_->Heartbeat(fence, progress);
    if (!job.ok()) {
      reactor->Finish(ToGrpcStatus(job.status()));
      return;
    }
    response->set_cancel_requested(job->cancel_requested);
    if (job->deadline_ms)
      *response->mutable_deadline() =
          ToProtoTimestamp(absl::FromUnixMillis(*job->deadline_ms));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::CompleteJob(
    grpc::CallbackServerContext* context,
    const hub::v1::CompleteJobRequest* request,
    hub::v1::CompleteJobResponse* response) {
  if (absl::StatusOr<Principal> p = admission_->AdmitCall(*context, *request);
      !p.ok()) {
    return FinishUnary(context, p.status());
  }
  absl::StatusOr<JobAttemptFence> fence = JobFenceOf(request->attempt());
  if (!fence.ok()) return FinishUnary(context, fence.status());
  absl::StatusOr<std::string> result = JobStructField(
      request->has_result(), request->result(), "result", kMaxPayloadBytes);
  if (!result.ok()) return FinishUnary(context, result.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, fence = std::move(*fence),
                         result = std::move(*result)] {
    Answer(reactor, response, book_->Complete(fence, result));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::FailJob(
    grpc::CallbackServerContext* context,
    const hub::v1::FailJobRequest* request,
    hub::v1::FailJobResponse* response) {
  if (absl::StatusOr<Principal> p = admission_->AdmitCall(*context, *request);
      !p.ok()) {
    return FinishUnary(context, p.status());
  }
  absl::StatusOr<JobAttemptFence> fence = JobFenceOf(request->attempt());
  if (!fence.ok()) return FinishUnary(context, fence.status());
  const hub::v1::JobError& e = request->error();
  if (e.reason().empty() || e.reason().size() > kMaxWordBytes) {
    return FinishUnary(
        context,
        InvalidJobField("error.reason", "error.reason must be 1 .. 128 bytes"));
  }
  if (absl::Status s = ValidateJobText(e.message(), "error.message", 20'000);
      !s.ok()) {
    return FinishUnary(context, s);
  }
  JobError error;
  error.reason = e.reason();
  error.message = e.message();
  error.retryable = e.retryable();
  absl::StatusOr<std::string> details = JobStructField(
      e.has_details(), e.details(), "error.details", kMaxProgressBytes);
  if (!details.ok()) return FinishUnary(context, details.status());
  error.details_json = *details;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, fence = std::move(*fence),
                         error = std::move(error)] {
    Answer(reactor, response, book_->Fail(fence, error));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(
    grpc::CallbackServerContext* context, const hub::v1::GetJobRequest* request,
    hub::v1::GetJobResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  if (absl::Status s = ValidateJobIdField(request->job_id(), "job_id");
      !s.ok()) {
    return FinishUnary(context, s);
  }
  absl::StatusOr<std::optional<JobRecord>> job = book_->Get(request->job_id());
  if (!job.ok()) return FinishUnary(context, job.status());
  if (!job->has_value()) {
    return FinishUnary(
        context,
        WithMetadata(
            NotFoundError(
                "ASSIGN_NOT_FOUND",
                absl::StrCat("no job '", ErrorText(request->job_id()), "'")),
            "job_id", request->job_id()));
  }
  if (absl::Status s = MaySee(*principal, **job); !s.ok()) {
    return FinishUnary(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Answer(reactor, response, **job);
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(
    grpc::CallbackServerContext* context,
    const hub::v1::ListJobsRequest* request,
    hub::v1::ListJobsResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  storage::JobFilter filter;
  if (!request->project_id().empty()) {
    if (absl::Status s = ValidateJobProject(request->project_id()); !s.ok()) {
      return FinishUnary(context, s);
    }
    filter.project_ids = {request->project_id()};
  } else if (!principal->all_projects) {
    filter.project_ids = principal->projects;
    if (filter.project_ids.empty())
      return FinishUnary(context, absl::OkStatus());
  }
  for (const auto& [value, field, out] :
       {std::tuple{&request->supervisor_agent_id(), "supervisor_agent_id",
                   &filter.supervisor_agent},
        std::tuple{&request->worker_agent_id(), "worker_agent_id",
                   &filter.worker_agent}}) {
    if (value->empty()) continue;
    if (absl::Status s = ValidateJobAgent(*value, field); !s.ok()) {
      return FinishUnary(context, s);
    }
    *out = *value;
  }
  for (int state : request->states()) {
    std::optional<JobState> s = JobStateOfProto(state);
    if (!s.has_value()) {
      return FinishUnary(
          context,
          InvalidJobField("states", absl::StrCat(state, " is not a JobState")));
    }
    filter.states.push_back(*s);
  }
  for (const auto& [value, field] :
       {std::pair{&request->trace_id(), "trace_id"},
        std::pair{&request->correlation_id(), "correlation_id"}}) {
    if (absl::Status s = ValidateJobText(*value, field); !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  filter.trace_id = request->trace_id();
  filter.correlation_id = request->correlation_id();
  if (request->has_deadline_before()) {
    if (absl::Status s =
            CheckJobTimestamp(request->deadline_before(), "deadline_before");
        !s.ok()) {
      return FinishUnary(context, s);
    }
    filter.deadline_before_ms =
        absl::ToUnixMillis(FromProtoTimestamp(request->deadline_before()));
  }
  if (request->page_size() < 0 || request->page_size() > 1000) {
    return FinishUnary(
        context, InvalidJobField("page_size", "page_size must be 0 .. 1000"));
  }
  const int64_t page_size =
      request->page_size() == 0 ? 50 : request->page_size();
  // One more than the page: a next page exists only when it is there.
  filter.limit = page_size + 1;
  if (!request->page_token().empty()) {
    if (absl::Status s = ParseJobPageToken(request->page_token(), &filter);
        !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  absl::StatusOr<std::vector<JobRecord>> jobs = book_->List(filter);
  if (!jobs.ok()) return FinishUnary(context, jobs.status());
  const bool more = static_cast<int64_t>(jobs->size()) > page_size;
  if (more) jobs->resize(page_size);
  for (const JobRecord& job : *jobs) {
    absl::StatusOr<hub::v1::Job> p = JobToProto(job);
    if (!p.ok()) return FinishUnary(context, p.status());
    *response->add_jobs() = std::move(*p);
  }
  if (more) response->set_next_page_token(JobPageToken(jobs->back()));
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(
    grpc::CallbackServerContext* context,
    const hub::v1::CancelJobRequest* request,
    hub::v1::CancelJobResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  if (absl::Status s = ValidateJobIdField(request->job_id(), "job_id");
      !s.ok()) {
    return FinishUnary(context, s);
  }
  if (absl::Status s = ValidateJobText(request->reason(), "reason", 512);
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return Supervised(context, *principal, request->job_id(), request->agent_id(),
                    response, [this, request] {
                      return book_->Cancel(request->job_id(),
                                           request->reason());
                    });
}

grpc::ServerUnaryReactor* JobServiceImpl::RetryJob(
    grpc::CallbackServerContext* context,
    const hub::v1::RetryJobRequest* request,
    hub::v1::RetryJobResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  if (absl::Status s = ValidateJobIdField(request->job_id(), "job_id");
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return Supervised(
      context, *principal, request->job_id(), request->agent_id(), response,
      [this, request] { return book_->Retry(request->job_id()); });
}

grpc::ServerUnaryReactor* JobServiceImpl::AddJobDependency(
    grpc::CallbackServerContext* context,
    const hub::v1::AddJobDependencyRequest* request,
    hub::v1::AddJobDependencyResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  if (absl::Status s = ValidateJobIdField(request->job_id(), "job_id");
      !s.ok()) {
    return FinishUnary(context, s);
  }
  if (request->parent_ids_size() == 0 ||
      request->parent_ids_size() > kMaxDependencies) {
    return FinishUnary(
        context,
        InvalidJobField("parent_ids", absl::StrCat("parent_ids must name 1 .. ",
                                                   kMaxDependencies, " jobs")));
  }
  std::vector<std::string> parents;
  for (const std::string& id : request->parent_ids()) {
    if (absl::Status s = ValidateJobIdField(id, "parent_ids"); !s.ok()) {
      return FinishUnary(context, s);
    }
    parents.push_back(id);
  }
  return Supervised(context, *principal, request->job_id(), request->agent_id(),
                    response, [this, request, parents = std::move(parents)] {
                      return book_->AddDependency(request->job_id(), parents);
                    });
}

}  // namespace hub
