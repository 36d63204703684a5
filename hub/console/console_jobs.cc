// ConsoleModel: the jobs view (docs/design/jobs.md), read from the store's
// jobs (every hub's) and kept live by each job's committed change (the
// JobChanged fleet event; other hubs' through the console's hints).
#include <string>
#include <utility>
#include <vector>

#include "hub/console/console_model.h"

namespace hub::console {
namespace {

using nlohmann::json;

// Payloads, progress and results as the page shows them: their JSON text,
// cut to 2 KB.
constexpr size_t kShownJson = 2048;

json Shown(const std::optional<std::string>& text) {
  if (!text.has_value()) return nullptr;
  return text->substr(0, kShownJson) + (text->size() > kShownJson ? " …" : "");
}

json OrNull(const std::optional<int64_t>& v) {
  return v.has_value() ? json(*v) : json(nullptr);
}

json OrNull(const std::optional<std::string>& v) {
  return v.has_value() ? json(*v) : json(nullptr);
}

json ErrorJson(const std::optional<JobError>& e) {
  if (!e.has_value()) return nullptr;
  return {{"reason", e->reason},
          {"message", e->message},
          {"retryable", e->retryable}};
}

json JobJson(const JobRecord& j) {
  json late = json::array();
  for (const JobLateResult& l : j.late_results) {
    late.push_back({{"attempt", l.attempt},
                    {"agent_id", l.agent_id},
                    {"result", Shown(l.result_json)},
                    {"error", ErrorJson(l.error)},
                    {"reported_at_ms", l.reported_at_ms}});
  }
  return {{"job_id", j.job_id},
          {"project_id", j.project_id},
          {"state", std::string(JobStateName(j.state))},
          {"task", j.task},
          {"topic", j.topic},
          {"priority", j.priority},
          {"supervisor", j.supervisor_agent},
          {"supervisor_role", OrNull(j.supervisor_role_wire)},
          {"worker_kind", std::string(JobWorkerKindName(j.worker_kind))},
          {"worker_agent", j.worker_agent},
          {"worker_role", OrNull(j.worker_role_wire)},
          {"pool_capabilities", j.pool_capabilities},
          {"pool_topic", j.pool_topic},
          {"attempt", j.attempt},
          {"max_attempts", j.max_retries + 1},
          {"attempt_worker", OrNull(j.attempt_worker)},
          {"attempt_generation", OrNull(j.attempt_generation)},
          {"timeout_ms", j.timeout_ms},
          {"deadline_ms", OrNull(j.deadline_ms)},
          {"not_before_ms", OrNull(j.not_before_ms)},
          {"cancel_requested", j.cancel_requested},
          {"depends_on", j.depends_on},
          {"progress", Shown(j.progress_json)},
          {"result", Shown(j.result_json)},
          {"error", ErrorJson(j.error)},
          {"late_results", std::move(late)},
          {"trace_id", j.trace_id},
          {"created_at_ms", j.created_at_ms},
          {"updated_at_ms", j.updated_at_ms},
          {"started_at_ms", OrNull(j.started_at_ms)},
          {"completed_at_ms", OrNull(j.completed_at_ms)}};
}

}  // namespace

void ConsoleModel::RenderJob(const std::string& job_id) {
  absl::StatusOr<std::optional<JobRecord>> job =
      sources_.store->jobs().GetJob(job_id);
  if (!job.ok() || !job->has_value()) return;  // unreadable now, or none
  const JobRecord& j = **job;
  feed_.Post("job", {j.project_id},
             JobJson(j).dump(-1, ' ', false, json::error_handler_t::replace));
}

absl::StatusOr<json> ConsoleModel::Jobs(const ProjectScope& scope) {
  const int64_t seq = feed_.head();
  const int64_t now = Now();
  json jobs = json::array();
  const std::optional<std::vector<std::string>> projects =
      scope.StoreProjects();
  // A token of no project sees no job (an empty filter means any project).
  if (!projects.has_value() || !projects->empty()) {
    const struct {
      std::vector<JobState> states;
      int64_t limit;
    } lists[] = {
        {{JobState::kBlocked, JobState::kQueued}, options_.jobs_waiting},
        {{JobState::kOffered, JobState::kRunning, JobState::kWaitingHuman},
         options_.jobs_live},
        {{JobState::kSucceeded, JobState::kFailed, JobState::kTimedOut,
          JobState::kCancelled},
         options_.jobs_ended},
    };
    for (const auto& list : lists) {
      storage::JobFilter filter;
      if (projects.has_value()) filter.project_ids = *projects;
      filter.states = list.states;
      filter.limit = list.limit;
      absl::StatusOr<std::vector<JobRecord>> page =
          sources_.store->jobs().ListJobs(filter);
      if (!page.ok()) return page.status();
      for (const JobRecord& j : *page) jobs.push_back(JobJson(j));
    }
  }
  return json{{"seq", seq},
              {"server_time_ms", now},
              {"hub_instance_id", sources_.hub_instance_id},
              {"jobs", std::move(jobs)}};
}

}  // namespace hub::console
