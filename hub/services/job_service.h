// hub.v1.JobService over JobBook (docs/design/jobs.md): every request is
// validated here, at the edge, before anything is written; writes run on
// the write pool, so concurrent claims and completions share a group
// commit; reads run on gRPC's thread, as the other listings do.
#ifndef HUB_HUB_SERVICES_JOB_SERVICE_H_
#define HUB_HUB_SERVICES_JOB_SERVICE_H_

#include <functional>
#include <string>

#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/v1/job.grpc.pb.h"
#include "registry/jobs.h"

namespace hub {

class JobServiceImpl final : public hub::v1::JobService::CallbackService {
 public:
  // Everything must outlive the service.
  JobServiceImpl(JobBook* book, BlockingPool* write_pool)
      : book_(book), write_pool_(write_pool) {}

  // Admits every call (hub/edge/admission.h). Set before serving; must
  // outlive the service.
  void SetAdmission(const Admission* admission) { admission_ = admission; }

  grpc::ServerUnaryReactor* CreateJob(
      grpc::CallbackServerContext* context,
      const hub::v1::CreateJobRequest* request,
      hub::v1::CreateJobResponse* response) override;
  grpc::ServerUnaryReactor* ClaimJob(
      grpc::CallbackServerContext* context,
      const hub::v1::ClaimJobRequest* request,
      hub::v1::ClaimJobResponse* response) override;
  grpc::ServerUnaryReactor* HeartbeatJob(
      grpc::CallbackServerContext* context,
      const hub::v1::HeartbeatJobRequest* request,
      hub::v1::HeartbeatJobResponse* response) override;
  grpc::ServerUnaryReactor* CompleteJob(
      grpc::CallbackServerContext* context,
      const hub::v1::CompleteJobRequest* request,
      hub::v1::CompleteJobResponse* response) override;
  grpc::ServerUnaryReactor* FailJob(
      grpc::CallbackServerContext* context,
      const hub::v1::FailJobRequest* request,
      hub::v1::FailJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const hub::v1::GetJobRequest* request,
                                   hub::v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(
      grpc::CallbackServerContext* context,
      const hub::v1::ListJobsRequest* request,
      hub::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(
      grpc::CallbackServerContext* context,
      const hub::v1::CancelJobRequest* request,
      hub::v1::CancelJobResponse* response) override;
  grpc::ServerUnaryReactor* AddJobDependency(
      grpc::CallbackServerContext* context,
      const hub::v1::AddJobDependencyRequest* request,
      hub::v1::AddJobDependencyResponse* response) override;
  grpc::ServerUnaryReactor* RetryJob(
      grpc::CallbackServerContext* context,
      const hub::v1::RetryJobRequest* request,
      hub::v1::RetryJobResponse* response) override;

 private:
  // A supervisor's write of one job (Cancel, Retry, AddJobDependency): the
  // job's project and supervisor are checked on a read (an absent job is
  // the write's to report), then `write` runs on the write pool and the job
  // it returns answers.
  template <typename Response>
  grpc::ServerUnaryReactor* Supervised(
      grpc::CallbackServerContext* context, const Principal& principal,
      const std::string& job_id, const std::string& agent_id,
      Response* response, std::function<absl::StatusOr<JobRecord>()> write);

  JobBook* const book_;
  BlockingPool* const write_pool_;
  const Admission* admission_ = &Admission::Open();
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_JOB_SERVICE_H_
