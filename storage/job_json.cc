// The JSON columns of a job and the reader of its row (storage/job_ops.h).
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "storage/job_ops.h"

namespace hub::storage {
namespace {

using Json = nlohmann::json;

// Text a client sent is UTF-8 (proto3); should a byte sequence not be, it
// is replaced rather than thrown.
std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string RetryPolicyJson(const JobRetryPolicy& p) {
  Json j = {{"initial_backoff_ms", p.initial_backoff_ms},
            {"multiplier", p.multiplier},
            {"max_backoff_ms", p.max_backoff_ms},
            {"jitter", p.jitter},
            {"non_retryable_reasons", p.non_retryable_reasons}};
  return Dump(j);
}

JobRetryPolicy ParseRetryPolicyJson(absl::string_view text) {
  JobRetryPolicy p;
  Json j = Json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_object()) return p;
  auto num = [&](const char* key, auto fallback) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return fallback;
    return it->template get<decltype(fallback)>();
  };
  p.initial_backoff_ms = num("initial_backoff_ms", p.initial_backoff_ms);
  p.multiplier = num("multiplier", p.multiplier);
  p.max_backoff_ms = num("max_backoff_ms", p.max_backoff_ms);
  p.jitter = num("jitter", p.jitter);
  auto reasons = j.find("non_retryable_reasons");
  if (reasons != j.end() && reasons->is_array()) {
    for (const Json& r : *reasons) {
      if (r.is_string())
        p.non_retryable_reasons.push_back(r.get<std::string>());
    }
  }
  return p;
}

std::string JobErrorJson(const JobError& e) {
  Json details = Json::parse(e.details_json, nullptr, false);
  if (details.is_discarded()) details = Json::object();
  Json j = {{"reason", e.reason},
            {"message", e.message},
            {"retryable", e.retryable},
            {"details", details}};
  return Dump(j);
}

// triflux's error_json is whatever its worker sent; a string or an object
// without `reason` reads as reason "error" with the text as the message.
std::optional<JobError> ParseJobErrorJson(absl::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || j.is_null()) return std::nullopt;
  JobError e;
  e.reason = "error";
  if (j.is_object()) {
    auto str = [&](const char* key) -> std::optional<std::string> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    if (auto r = str("reason")) e.reason = *r;
    if (auto m = str("message")) e.message = *m;
    auto retryable = j.find("retryable");
    if (retryable != j.end() && retryable->is_boolean()) {
      e.retryable = retryable->get<bool>();
    }
    auto details = j.find("details");
    if (details != j.end() && details->is_object()) {
      e.details_json = details->dump();
    }
  } else if (j.is_string()) {
    e.message = j.get<std::string>();
  } else {
    e.message = j.dump();
  }
  return e;
}

std::string StringListJson(const std::vector<std::string>& values) {
  return Dump(Json(values));
}

std::vector<std::string> ParseStringListJson(absl::string_view text) {
  std::vector<std::string> out;
  Json j = Json::parse(text.begin(), text.end(), nullptr, false);
  if (!j.is_array()) return out;
  for (const Json& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

JobRecord ReadJobFields(const std::vector<std::optional<std::string>>& text,
                        const std::vector<std::optional<int64_t>>& ints) {
  auto t = [&](int i) { return text[i].value_or(""); };
  auto n = [&](int i, int64_t fallback) { return ints[i].value_or(fallback); };
  JobRecord job;
  job.job_id = t(0);
  job.project_id = t(1);
  job.supervisor_agent = t(2);
  job.supervisor_role_wire = text[3];
  job.worker_kind = ParseJobWorkerKind(t(4)).value_or(JobWorkerKind::kAgent);
  job.worker_agent = t(5);
  job.worker_role_wire = text[6];
  if (text[7].has_value()) {
    Json pool = Json::parse(*text[7], nullptr, false);
    if (pool.is_object()) {
      auto caps = pool.find("capabilities");
      if (caps != pool.end()) {
        job.pool_capabilities = ParseStringListJson(caps->dump());
      }
      auto topic = pool.find("topic");
      if (topic != pool.end() && topic->is_string()) {
        job.pool_topic = topic->get<std::string>();
      }
    }
  }
  job.topic = t(8);
  job.task = t(9);
  job.payload_json = text[10].value_or("{}");
  job.priority = n(11, 5);
  job.timeout_ms = n(12, 600000);
  job.max_retries = n(13, 0);
  if (text[14].has_value()) job.retry_policy = ParseRetryPolicyJson(*text[14]);
  job.on_dependency_failure =
      ParseJobDependencyFailure(t(15)).value_or(JobDependencyFailure::kCancel);
  job.idempotency_key = text[16];
  job.trace_id = t(17);
  job.correlation_id = t(18);
  // A row triflux wrote has no hub_state: its status names the state.
  std::optional<JobState> state;
  if (text[19].has_value()) state = ParseJobState(*text[19]);
  if (!state.has_value()) state = JobStateOfTrifluxStatus(t(20));
  job.state = state.value_or(JobState::kFailed);
  job.attempt = n(21, 1);
  job.retry_count = n(22, 0);
  job.attempt_worker = text[23];
  job.attempt_generation = ints[24];
  job.attempt_role_epoch = ints[25];
  job.not_before_ms = ints[26];
  job.deadline_ms = ints[27];
  job.cancel_requested = n(28, 0) != 0;
  job.progress_json = text[29];
  job.result_json = text[30];
  if (text[31].has_value()) job.error = ParseJobErrorJson(*text[31]);
  job.created_at_ms = n(32, 0);
  job.updated_at_ms = n(33, 0);
  job.started_at_ms = ints[34];
  job.dispatched_at_ms = ints[35];
  job.completed_at_ms = ints[36];
  job.last_retry_at_ms = ints[37];
  return job;
}

std::optional<std::string> PoolFilterJson(const JobRecord& job) {
  if (job.worker_kind != JobWorkerKind::kPool) return std::nullopt;
  const Json filter = {{"capabilities", job.pool_capabilities},
                       {"topic", job.pool_topic}};
  return Dump(filter);
}

}  // namespace hub::storage
