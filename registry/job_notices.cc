#include "registry/job_notices.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hub {
namespace {

using Json = nlohmann::json;

constexpr char kRoleTopic[] = "topic:role:";

// A stored JSON document, or null when it does not parse.
Json Parsed(const std::optional<std::string>& text) {
  if (!text.has_value()) return nullptr;
  Json j = Json::parse(*text, nullptr, false);
  return j.is_discarded() ? Json(nullptr) : j;
}

Json ErrorJson(const std::optional<JobError>& e) {
  if (!e.has_value()) return nullptr;
  return {{"reason", e->reason},
          {"message", e->message},
          {"retryable", e->retryable}};
}

}  // namespace

std::string WorkerAddress(const JobRecord& job) {
  switch (job.worker_kind) {
    case JobWorkerKind::kAgent:
      return job.worker_agent;
    case JobWorkerKind::kRole:
      return absl::StrCat(kRoleTopic, job.worker_role_wire.value_or(""));
    case JobWorkerKind::kPool:
      return job.pool_topic.empty() ? ""
                                    : absl::StrCat("topic:", job.pool_topic);
  }
  return "";
}

std::string SupervisorAddress(const JobRecord& job) {
  if (job.supervisor_role_wire.has_value()) {
    return absl::StrCat(kRoleTopic, *job.supervisor_role_wire);
  }
  return job.supervisor_agent;
}

void JobNotices::Send(const JobRecord& job, JobEvent event,
                      const std::optional<JobLateResult>& late) {
  const int priority = static_cast<int>(std::max<int64_t>(job.priority, 5));
  switch (event) {
    case JobEvent::kClaimable: {
      const std::string to = WorkerAddress(job);
      if (to.empty()) return;
      Json payload = {{"kind", "assign.job"},
                      {"job_id", job.job_id},
                      {"project_id", job.project_id},
                      {"attempt", job.attempt},
                      {"task", job.task},
                      {"payload", Parsed(job.payload_json)},
                      {"supervisor", SupervisorAddress(job)},
                      {"timeout_ms", job.timeout_ms}};
      if (job.not_before_ms) payload["not_before_ms"] = *job.not_before_ms;
      Publish(to, job.topic, "handoff", static_cast<int>(job.priority),
              absl::Milliseconds(std::min<int64_t>(
                  std::max<int64_t>(job.timeout_ms, 600'000), 86'400'000)),
              job,
              payload.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
    case JobEvent::kEnded: {
      const std::string to = SupervisorAddress(job);
      if (to.empty()) return;
      Json payload = {{"kind", "assign.result"},
                      {"job_id", job.job_id},
                      {"project_id", job.project_id},
                      {"state", std::string(JobStateName(job.state))},
                      {"attempt", job.attempt},
                      {"worker", job.attempt_worker.value_or(job.worker_agent)},
                      {"result", Parsed(job.result_json)},
                      {"error", ErrorJson(job.error)}};
      Publish(to, "assign.result", "event", priority, absl::Hours(1), job,
              payload.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
    case JobEvent::kCancelRequested: {
      if (!job.attempt_worker.has_value()) return;
      Json payload = {
          {"kind", "assign.cancel"},
          {"job_id", job.job_id},
          {"attempt", job.attempt},
          {"presence_generation", job.attempt_generation.value_or(0)}};
      Publish(*job.attempt_worker, "assign.cancel", "event", 8, absl::Hours(1),
              job,
              payload.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
    case JobEvent::kLateResult: {
      const std::string to = SupervisorAddress(job);
      if (to.empty() || !late.has_value()) return;
      Json payload = {{"kind", "late_result"},
                      {"job_id", job.job_id},
                      {"attempt", late->attempt},
                      {"worker", late->agent_id},
                      {"result", Parsed(late->result_json)},
                      {"error", ErrorJson(late->error)},
                      {"current_attempt", job.attempt},
                      {"state", std::string(JobStateName(job.state))}};
      Publish(to, "assign.result", "event", priority, absl::Hours(1), job,
              payload.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
  }
}

void JobNotices::Publish(const std::string& to, const std::string& topic,
                         const std::string& type, int priority,
                         absl::Duration ttl, const JobRecord& job,
                         const std::string& payload_json) {
  Messaging* messaging = messaging_();
  if (messaging == nullptr) return;
  PublishInput in;
  in.from_agent_id = "hub";
  in.to = to;
  in.topic = topic;
  in.type = type;
  in.priority = std::clamp(priority, 1, 9);
  in.ttl = ttl;
  in.payload_json = payload_json;
  in.correlation_id = job.job_id;
  in.trace_id = job.trace_id;
  in.project_id = job.project_id;
  if (!messaging->Publish(in).ok()) failures_.fetch_add(1);
}

}  // namespace hub
