#include "hub/services/job_mapping.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "hub/services/struct_json.h"
#include "registry/agent_validation.h"
#include "registry/role_key.h"
#include "registry/role_registry.h"
#include "status/status.h"

namespace hub {

using job_limits::kMaxCapabilities;
using job_limits::kMaxDependencies;
using job_limits::kMaxNonRetryable;
using job_limits::kMaxPayloadBytes;
using job_limits::kMaxTaskBytes;
using job_limits::kMaxTimeoutMs;
using job_limits::kMaxWordBytes;
using job_limits::kMinTimeoutMs;

namespace {

absl::Status FieldError(absl::string_view reason, absl::string_view field,
                        absl::string_view message) {
  return WithMetadata(InvalidArgumentError(reason, message), "field", field);
}

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return FieldError("JOB_FIELD_INVALID", field, message);
}

absl::Status ValidateProject(absl::string_view project_id) {
  if (IsProjectId(project_id)) return absl::OkStatus();
  return FieldError("PROJECT_ID_INVALID", "project_id",
                    absl::StrCat("project_id \"", ErrorText(project_id),
                                 "\" is not prj_ and 22 characters "
                                 "[A-Za-z0-9_-]"));
}

absl::Status ValidateAgent(absl::string_view agent_id,
                           absl::string_view field) {
  absl::Status s = ValidateAgentId(agent_id);
  if (s.ok()) return s;
  return WithMetadata(std::move(s), "field", field);
}

absl::Status ValidateJobId(absl::string_view id, absl::string_view field) {
  if (!id.empty() && id.size() <= 64) return absl::OkStatus();
  return FieldError(
      "JOB_ID_INVALID", field,
      absl::StrCat(field, " must be 1..64 bytes, got ", id.size()));
}

absl::Status ValidateWord(absl::string_view value, absl::string_view field,
                          size_t max = kMaxWordBytes) {
  if (value.size() <= max) return absl::OkStatus();
  return Invalid(field, absl::StrCat(field, " is ", value.size(),
                                     " bytes; at most ", max));
}

// A Struct field as JSON text of at most `max` bytes.
absl::StatusOr<std::string> StructField(bool has,
                                        const google::protobuf::Struct& value,
                                        absl::string_view field, size_t max) {
  if (!has) return std::string("{}");
  absl::StatusOr<std::string> json = StructToJson(value);
  if (!json.ok()) return WithMetadata(json.status(), "field", field);
  if (json->size() > max) {
    return Invalid(field, absl::StrCat(field, " is ", json->size(),
                                       " bytes as JSON; at most ", max));
  }
  return json;
}

// A Timestamp between 1970 and 9999 with valid nanos.
absl::Status CheckTimestamp(const google::protobuf::Timestamp& t,
                            absl::string_view field) {
  if (t.seconds() >= 0 && t.seconds() <= 253402300799 && t.nanos() >= 0 &&
      t.nanos() < 1'000'000'000) {
    return absl::OkStatus();
  }
  return Invalid(field,
                 absl::StrCat(field, " must be a time between 1970 and 9999"));
}

absl::StatusOr<int64_t> DurationMs(const google::protobuf::Duration& d,
                                   absl::string_view field, int64_t min,
                                   int64_t max) {
  if (absl::Status s = CheckProtoDuration(d, std::string(field)); !s.ok()) {
    return Invalid(field, s.message());
  }
  const int64_t ms = absl::ToInt64Milliseconds(FromProtoDuration(d));
  if (ms < min || ms > max) {
    return Invalid(field, absl::StrCat(field, " must be ", min, " ms .. ", max,
                                       " ms, got ", ms, " ms"));
  }
  return ms;
}

absl::StatusOr<JobRetryPolicy> RetryPolicyOf(const hub::v1::JobRetryPolicy& p) {
  JobRetryPolicy policy;
  if (p.has_initial_backoff()) {
    absl::StatusOr<int64_t> ms = DurationMs(
        p.initial_backoff(), "retry_policy.initial_backoff", 0, 3'600'000);
    if (!ms.ok()) return ms.status();
    policy.initial_backoff_ms = *ms;
  }
  if (p.multiplier() != 0) {
    if (!(p.multiplier() >= 1 && p.multiplier() <= 10)) {
      return Invalid("retry_policy.multiplier", "multiplier must be 1 .. 10");
    }
    policy.multiplier = p.multiplier();
  }
  if (p.has_max_backoff()) {
    absl::StatusOr<int64_t> ms =
        DurationMs(p.max_backoff(), "retry_policy.max_backoff",
                   policy.initial_backoff_ms, kMaxTimeoutMs);
    if (!ms.ok()) return ms.status();
    policy.max_backoff_ms = *ms;
  }
  policy.max_backoff_ms =
      std::max(policy.max_backoff_ms, policy.initial_backoff_ms);
  if (!(p.jitter() >= 0 && p.jitter() <= 1)) {
    return Invalid("retry_policy.jitter", "jitter must be 0 .. 1");
  }
  policy.jitter = p.jitter();
  if (p.non_retryable_reasons_size() > kMaxNonRetryable) {
    return Invalid("retry_policy.non_retryable_reasons",
                   absl::StrCat("at most ", kMaxNonRetryable, " reasons"));
  }
  for (const std::string& r : p.non_retryable_reasons()) {
    if (r.empty() || r.size() > kMaxWordBytes) {
      return Invalid("retry_policy.non_retryable_reasons",
                     "a reason must be 1 .. 128 bytes");
    }
    policy.non_retryable_reasons.push_back(r);
  }
  return policy;
}

// A role named by a JobParty, validated; its wire.
absl::StatusOr<std::string> RoleOf(const hub::v1::JobParty& party,
                                   absl::string_view field,
                                   absl::string_view project_id) {
  absl::StatusOr<ResolvedRoleKey> role = ResolveRoleKey(ToRoleKeyRef(
      party.has_role_key(), party.role_key(), party.role_key_wire()));
  if (!role.ok()) {
    return WithMetadata(role.status(), "field",
                        absl::StrCat(field, ".",
                                     MetadataOf(role.status()).count("field")
                                         ? MetadataOf(role.status()).at("field")
                                         : "role_key"));
  }
  if (role->key.project_id != project_id) {
    return FieldError("JOB_WORKER_INVALID", field,
                      absl::StrCat(field, " names a role of another project"));
  }
  return role->wire;
}

absl::StatusOr<JobRecord> JobOf(const hub::v1::CreateJobRequest& r) {
  JobRecord job;
  if (absl::Status s = ValidateProject(r.project_id()); !s.ok()) return s;
  job.project_id = r.project_id();

  const hub::v1::JobParty& sup = r.supervisor();
  if (sup.target_case() == hub::v1::JobParty::kAgentId &&
      !sup.role_key_wire().empty()) {
    return FieldError("JOB_WORKER_INVALID", "supervisor",
                      "a supervisor is one agent or one role");
  }
  if (sup.has_pool()) {
    return FieldError("JOB_WORKER_INVALID", "supervisor",
                      "a pool cannot supervise a job");
  }
  if (sup.target_case() == hub::v1::JobParty::kAgentId) {
    if (absl::Status s = ValidateAgent(sup.agent_id(), "supervisor.agent_id");
        !s.ok()) {
      return s;
    }
    job.supervisor_agent = sup.agent_id();
  } else if (sup.has_role_key() || !sup.role_key_wire().empty()) {
    absl::StatusOr<std::string> wire =
        RoleOf(sup, "supervisor", job.project_id);
    if (!wire.ok()) return wire.status();
    job.supervisor_role_wire = *wire;
  } else {
    return FieldError("JOB_WORKER_INVALID", "supervisor",
                      "a job needs a supervisor: an agent or a role");
  }

  const hub::v1::JobParty& worker = r.worker();
  if (!worker.role_key_wire().empty() &&
      worker.target_case() != hub::v1::JobParty::kRoleKey &&
      worker.target_case() != hub::v1::JobParty::TARGET_NOT_SET) {
    return FieldError("JOB_WORKER_INVALID", "worker",
                      "a worker is one agent, one role or one pool");
  }
  switch (worker.target_case()) {
    case hub::v1::JobParty::kAgentId:
      if (absl::Status s = ValidateAgent(worker.agent_id(), "worker.agent_id");
          !s.ok()) {
        return s;
      }
      job.worker_kind = JobWorkerKind::kAgent;
      job.worker_agent = worker.agent_id();
      break;
    case hub::v1::JobParty::kPool: {
      if (worker.pool().capabilities_size() > kMaxCapabilities) {
        return FieldError(
            "JOB_WORKER_INVALID", "worker.pool.capabilities",
            absl::StrCat("at most ", kMaxCapabilities, " capabilities"));
      }
      for (const std::string& cap : worker.pool().capabilities()) {
        if (cap.empty() || cap.size() > kMaxWordBytes) {
          return FieldError("JOB_WORKER_INVALID", "worker.pool.capabilities",
                            "a capability must be 1 .. 128 bytes");
        }
        job.pool_capabilities.push_back(cap);
      }
      if (!worker.pool().topic().empty()) {
        if (absl::Status s = ValidateTopic(worker.pool().topic()); !s.ok()) {
          return WithMetadata(std::move(s), "field", "worker.pool.topic");
        }
      }
      job.pool_topic = worker.pool().topic();
      job.worker_kind = JobWorkerKind::kPool;
      break;
    }
    default:
      if (!worker.has_role_key() && worker.role_key_wire().empty()) {
        return FieldError("JOB_WORKER_INVALID", "worker",
                          "a job needs a worker: an agent, a role or a pool");
      }
      absl::StatusOr<std::string> wire =
          RoleOf(worker, "worker", job.project_id);
      if (!wire.ok()) return wire.status();
      job.worker_kind = JobWorkerKind::kRole;
      job.worker_role_wire = *wire;
  }

  if (r.task().empty() || r.task().size() > kMaxTaskBytes) {
    return Invalid("task", absl::StrCat("task must be 1 .. ", kMaxTaskBytes,
                                        " bytes, got ", r.task().size()));
  }
  job.task = r.task();
  if (!r.topic().empty()) {
    if (absl::Status s = ValidateTopic(r.topic()); !s.ok()) {
      return WithMetadata(std::move(s), "field", "topic");
    }
    job.topic = r.topic();
  }
  absl::StatusOr<std::string> payload =
      StructField(r.has_payload(), r.payload(), "payload", kMaxPayloadBytes);
  if (!payload.ok()) return payload.status();
  job.payload_json = *payload;
  if (r.priority() != 0 && (r.priority() < 1 || r.priority() > 9)) {
    return Invalid("priority",
                   absl::StrCat("priority must be 1 .. 9, got ", r.priority()));
  }
  job.priority = r.priority() == 0 ? 5 : r.priority();
  if (r.has_timeout()) {
    absl::StatusOr<int64_t> ms =
        DurationMs(r.timeout(), "timeout", kMinTimeoutMs, kMaxTimeoutMs);
    if (!ms.ok()) return ms.status();
    job.timeout_ms = *ms;
  }
  if (r.max_attempts() < 0 || r.max_attempts() > 100) {
    return Invalid("max_attempts", absl::StrCat("max_attempts must be 1 .. "
                                                "100, got ",
                                                r.max_attempts()));
  }
  job.max_retries = std::max(r.max_attempts(), 1) - 1;
  if (r.has_retry_policy()) {
    absl::StatusOr<JobRetryPolicy> policy = RetryPolicyOf(r.retry_policy());
    if (!policy.ok()) return policy.status();
    job.retry_policy = std::move(*policy);
  }
  if (r.has_not_before()) {
    if (absl::Status s = CheckTimestamp(r.not_before(), "not_before");
        !s.ok()) {
      return s;
    }
    job.not_before_ms = absl::ToUnixMillis(FromProtoTimestamp(r.not_before()));
  }
  if (r.depends_on_size() > kMaxDependencies) {
    return Invalid("depends_on",
                   absl::StrCat("at most ", kMaxDependencies, " dependencies"));
  }
  for (const std::string& id : r.depends_on()) {
    if (absl::Status s = ValidateJobId(id, "depends_on"); !s.ok()) return s;
    job.depends_on.push_back(id);
  }
  switch (r.on_dependency_failure()) {
    case hub::v1::JOB_DEPENDENCY_FAILURE_UNSPECIFIED:
    case hub::v1::JOB_DEPENDENCY_FAILURE_CANCEL:
      job.on_dependency_failure = JobDependencyFailure::kCancel;
      break;
    case hub::v1::JOB_DEPENDENCY_FAILURE_BLOCK:
      job.on_dependency_failure = JobDependencyFailure::kBlock;
      break;
    default:
      return Invalid("on_dependency_failure",
                     "not a JobDependencyFailure value");
  }
  for (const auto& [value, field] :
       {std::pair{&r.idempotency_key(), "idempotency_key"},
        std::pair{&r.trace_id(), "trace_id"},
        std::pair{&r.correlation_id(), "correlation_id"}}) {
    if (absl::Status s = ValidateWord(*value, field); !s.ok()) return s;
  }
  if (!r.idempotency_key().empty()) job.idempotency_key = r.idempotency_key();
  job.trace_id = r.trace_id();
  job.correlation_id = r.correlation_id();
  return job;
}

absl::StatusOr<JobAttemptFence> FenceOf(const hub::v1::JobAttempt& a) {
  if (absl::Status s = ValidateJobId(a.job_id(), "attempt.job_id"); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateAgent(a.agent_id(), "attempt.agent_id");
      !s.ok()) {
    return s;
  }
  if (a.attempt() < 1) {
    return Invalid("attempt.attempt", "attempt starts at 1");
  }
  JobAttemptFence f;
  f.job_id = a.job_id();
  f.attempt = a.attempt();
  f.agent_id = a.agent_id();
  f.presence_generation = a.presence_generation();
  f.role_epoch = a.role_epoch();
  return f;
}

hub::v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kBlocked:
      return hub::v1::JOB_STATE_BLOCKED;
    case JobState::kQueued:
      return hub::v1::JOB_STATE_QUEUED;
    case JobState::kOffered:
      return hub::v1::JOB_STATE_OFFERED;
    case JobState::kRunning:
      return hub::v1::JOB_STATE_RUNNING;
    case JobState::kWaitingHuman:
      return hub::v1::JOB_STATE_WAITING_HUMAN;
    case JobState::kSucceeded:
      return hub::v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return hub::v1::JOB_STATE_FAILED;
    case JobState::kTimedOut:
      return hub::v1::JOB_STATE_TIMED_OUT;
    case JobState::kCancelled:
      return hub::v1::JOB_STATE_CANCELLED;
  }
  return hub::v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> JobStateFromProto(int state) {
  for (const StoredWord<JobState>& entry : kJobStateWords) {
    if (JobStateToProto(entry.value) == state) return entry.value;
  }
  return std::nullopt;
}

google::protobuf::Timestamp Stamp(int64_t ms) {
  return ToProtoTimestamp(absl::FromUnixMillis(ms));
}

void FillRole(const std::string& wire, hub::v1::JobParty* party) {
  party->set_role_key_wire(wire);
  absl::StatusOr<RoleKey> key = DecodeRoleKey(wire);
  if (!key.ok()) return;
  hub::v1::RoleKey* out = party->mutable_role_key();
  out->set_project_id(key->project_id);
  out->set_kind(key->kind == RoleKind::kCto ? hub::v1::ROLE_KIND_CTO
                                            : hub::v1::ROLE_KIND_LEAD);
  out->set_scope_id(key->scope_id);
}

// A stored JSON object as a Struct; stored text that is not one (a triflux
// row's free-form value) is wrapped as {"value": ...}.
absl::StatusOr<google::protobuf::Struct> StructOf(const std::string& json) {
  absl::StatusOr<google::protobuf::Struct> s = JsonToStruct(json);
  if (s.ok()) return s;
  absl::StatusOr<google::protobuf::Value> v = JsonToValue(json);
  google::protobuf::Struct wrapped;
  if (v.ok()) {
    (*wrapped.mutable_fields())["value"] = *v;
  } else {
    (*wrapped.mutable_fields())["value"].set_string_value(json);
  }
  return wrapped;
}

absl::Status FillError(const JobError& e, hub::v1::JobError* out) {
  out->set_reason(e.reason);
  out->set_message(e.message);
  out->set_retryable(e.retryable);
  absl::StatusOr<google::protobuf::Struct> details = StructOf(e.details_json);
  if (!details.ok()) return details.status();
  *out->mutable_details() = std::move(*details);
  return absl::OkStatus();
}

std::string PageToken(const JobRecord& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(last.updated_at_ms, ":", last.job_id));
}

absl::Status ParsePageToken(const std::string& token,
                            storage::JobFilter* filter) {
  std::string raw;
  int64_t updated = 0;
  const size_t colon = [&] {
    if (!absl::WebSafeBase64Unescape(token, &raw)) return std::string::npos;
    return raw.find(':');
  }();
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(0, colon), &updated) ||
      colon + 1 >= raw.size()) {
    return FieldError("PAGE_TOKEN_INVALID", "page_token",
                      "page_token is not one ListJobs returned");
  }
  filter->after_updated_at_ms = updated;
  filter->after_job_id = raw.substr(colon + 1);
  return absl::OkStatus();
}

}  // namespace

absl::Status InvalidJobField(absl::string_view field,
                             absl::string_view message) {
  return Invalid(field, message);
}
absl::Status ValidateJobProject(absl::string_view project_id) {
  return ValidateProject(project_id);
}
absl::Status ValidateJobAgent(absl::string_view agent_id,
                              absl::string_view field) {
  return ValidateAgent(agent_id, field);
}
absl::Status ValidateJobIdField(absl::string_view id, absl::string_view field) {
  return ValidateJobId(id, field);
}
absl::Status ValidateJobText(absl::string_view value, absl::string_view field,
                             size_t max) {
  return ValidateWord(value, field, max);
}
absl::StatusOr<std::string> JobStructField(
    bool has, const google::protobuf::Struct& value, absl::string_view field,
    size_t max) {
  return StructField(has, value, field, max);
}
absl::Status CheckJobTimestamp(const google::protobuf::Timestamp& t,
                               absl::string_view field) {
  return CheckTimestamp(t, field);
}
absl::StatusOr<JobRecord> JobFromCreate(const hub::v1::CreateJobRequest& r) {
  return JobOf(r);
}
absl::StatusOr<JobAttemptFence> JobFenceOf(const hub::v1::JobAttempt& a) {
  return FenceOf(a);
}
std::optional<JobState> JobStateOfProto(int state) {
  return JobStateFromProto(state);
}
std::string JobPageToken(const JobRecord& last) { return PageToken(last); }
absl::Status ParseJobPageToken(const std::string& token,
                               storage::JobFilter* filter) {
  return ParsePageToken(token, filter);
}

absl::StatusOr<hub::v1::Job> JobToProto(const JobRecord& j) {
  hub::v1::Job p;
  p.set_job_id(j.job_id);
  p.set_project_id(j.project_id);
  if (j.supervisor_role_wire.has_value()) {
    FillRole(*j.supervisor_role_wire, p.mutable_supervisor());
  } else {
    p.mutable_supervisor()->set_agent_id(j.supervisor_agent);
  }
  switch (j.worker_kind) {
    case JobWorkerKind::kAgent:
      p.mutable_worker()->set_agent_id(j.worker_agent);
      break;
    case JobWorkerKind::kRole:
      FillRole(j.worker_role_wire.value_or(""), p.mutable_worker());
      break;
    case JobWorkerKind::kPool: {
      hub::v1::JobPool* pool = p.mutable_worker()->mutable_pool();
      for (const std::string& c : j.pool_capabilities)
        pool->add_capabilities(c);
      pool->set_topic(j.pool_topic);
      break;
    }
  }
  p.set_topic(j.topic);
  p.set_task(j.task);
  absl::StatusOr<google::protobuf::Struct> payload = StructOf(j.payload_json);
  if (!payload.ok()) return payload.status();
  *p.mutable_payload() = std::move(*payload);
  p.set_priority(static_cast<int32_t>(j.priority));
  *p.mutable_timeout() = ToProtoDuration(absl::Milliseconds(j.timeout_ms));
  p.set_max_attempts(static_cast<int32_t>(j.max_retries + 1));
  hub::v1::JobRetryPolicy* policy = p.mutable_retry_policy();
  *policy->mutable_initial_backoff() =
      ToProtoDuration(absl::Milliseconds(j.retry_policy.initial_backoff_ms));
  policy->set_multiplier(j.retry_policy.multiplier);
  *policy->mutable_max_backoff() =
      ToProtoDuration(absl::Milliseconds(j.retry_policy.max_backoff_ms));
  policy->set_jitter(j.retry_policy.jitter);
  for (const std::string& r : j.retry_policy.non_retryable_reasons) {
    policy->add_non_retryable_reasons(r);
  }
  for (const std::string& d : j.depends_on) p.add_depends_on(d);
  p.set_on_dependency_failure(j.on_dependency_failure ==
                                      JobDependencyFailure::kBlock
                                  ? hub::v1::JOB_DEPENDENCY_FAILURE_BLOCK
                                  : hub::v1::JOB_DEPENDENCY_FAILURE_CANCEL);
  p.set_idempotency_key(j.idempotency_key.value_or(""));
  p.set_trace_id(j.trace_id);
  p.set_correlation_id(j.correlation_id);
  p.set_state(JobStateToProto(j.state));
  hub::v1::JobAttempt* attempt = p.mutable_attempt();
  attempt->set_job_id(j.job_id);
  attempt->set_attempt(j.attempt);
  attempt->set_agent_id(j.attempt_worker.value_or(""));
  attempt->set_presence_generation(j.attempt_generation.value_or(0));
  attempt->set_role_epoch(j.attempt_role_epoch.value_or(0));
  if (j.not_before_ms) *p.mutable_not_before() = Stamp(*j.not_before_ms);
  if (j.deadline_ms) *p.mutable_deadline() = Stamp(*j.deadline_ms);
  p.set_cancel_requested(j.cancel_requested);
  if (j.progress_json) {
    absl::StatusOr<google::protobuf::Struct> s = StructOf(*j.progress_json);
    if (!s.ok()) return s.status();
    *p.mutable_progress() = std::move(*s);
  }
  if (j.result_json) {
    absl::StatusOr<google::protobuf::Struct> s = StructOf(*j.result_json);
    if (!s.ok()) return s.status();
    *p.mutable_result() = std::move(*s);
  }
  if (j.error) {
    if (absl::Status s = FillError(*j.error, p.mutable_error()); !s.ok()) {
      return s;
    }
  }
  for (const JobLateResult& late : j.late_results) {
    hub::v1::JobLateResult* out = p.add_late_results();
    out->set_attempt(late.attempt);
    out->set_agent_id(late.agent_id);
    if (late.result_json) {
      absl::StatusOr<google::protobuf::Struct> s = StructOf(*late.result_json);
      if (!s.ok()) return s.status();
      *out->mutable_result() = std::move(*s);
    }
    if (late.error) {
      if (absl::Status s = FillError(*late.error, out->mutable_error());
          !s.ok()) {
        return s;
      }
    }
    *out->mutable_reported_at() = Stamp(late.reported_at_ms);
  }
  *p.mutable_created_at() = Stamp(j.created_at_ms);
  *p.mutable_updated_at() = Stamp(j.updated_at_ms);
  if (j.started_at_ms) *p.mutable_started_at() = Stamp(*j.started_at_ms);
  if (j.completed_at_ms) *p.mutable_completed_at() = Stamp(*j.completed_at_ms);
  return p;
}

}  // namespace hub
