// jobs create | claim | heartbeat | complete | fail | get | list | cancel |
// retry: one command per JobService RPC (docs/design/jobs.md, docs/api.md).
//
// The acting agent comes from --agent, else $HUB_AGENT_ID (a create's
// supervisor from --supervisor, else the same); the project from --project,
// else $HUB_PROJECT_ID. The worker's writes (heartbeat, complete, fail) name
// their attempt with --job, --attempt, --agent, --generation and
// --role-epoch, as the claim printed them: hubctl never fills in a fence, so
// a stale attempt is refused by the hub (ASSIGN_ATTEMPT_MISMATCH,
// ASSIGN_WORKER_MISMATCH, JOB_NOT_RUNNING: exit 9) exactly as a worker's
// would be. Values are checked by the hub, not here (priority 10 is the
// hub's JOB_FIELD_INVALID, exit 3); hubctl refuses only a command line it
// cannot turn into a request (exit 64).
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

// Every value of a repeatable flag, each also split at commas, empty words
// dropped: --state=queued,running --state=failed.
std::vector<std::string> ListFlag(const Args& args, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& value : args.GetAll(name)) {
    for (absl::string_view word :
         absl::StrSplit(value, ',', absl::SkipEmpty())) {
      out.emplace_back(word);
    }
  }
  return out;
}

// An int32 field's flag: the hub judges the value, hubctl only refuses what
// does not fit the field.
absl::StatusOr<std::optional<int32_t>> GetInt32(const Args& args,
                                                const std::string& name) {
  auto value = args.GetInt(name);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::optional<int32_t>();
  if (**value < std::numeric_limits<int32_t>::min() ||
      **value > std::numeric_limits<int32_t>::max()) {
    return UsageError(absl::StrCat("--", name, ": out of range: ", **value));
  }
  return std::optional<int32_t>(static_cast<int32_t>(**value));
}

std::string StateWord(hub::v1::JobState state) {
  return EnumWord(hub::v1::JobState_Name(state), "JOB_STATE_");
}

// An agent id, a role's wire, or "pool(cap,cap; topic=t)".
std::string PartyText(const hub::v1::JobParty& party) {
  switch (party.target_case()) {
    case hub::v1::JobParty::kAgentId:
      return party.agent_id();
    case hub::v1::JobParty::kPool: {
      std::string text = absl::StrCat(
          "pool(", absl::StrJoin(party.pool().capabilities(), ","));
      if (!party.pool().topic().empty()) {
        absl::StrAppend(&text, "; topic=", party.pool().topic());
      }
      return text + ")";
    }
    default:
      return party.role_key_wire().empty() ? "-" : party.role_key_wire();
  }
}

std::string OrDash(const std::string& value) {
  return value.empty() ? "-" : value;
}

// The job as "key: value" lines, after `fields` (a create's "created").
void PrintJob(Env& env, const hub::v1::Job& j,
              std::vector<std::pair<std::string, std::string>> fields = {}) {
  fields.insert(
      fields.end(),
      {{"job_id", j.job_id()},
       {"project_id", j.project_id()},
       {"state", StateWord(j.state())},
       {"task", j.task()},
       {"topic", j.topic()},
       {"supervisor", PartyText(j.supervisor())},
       {"worker", PartyText(j.worker())},
       {"priority", absl::StrCat(j.priority())},
       {"attempt",
        absl::StrCat(j.attempt().attempt(), " of ", j.max_attempts())},
       {"attempt_agent", OrDash(j.attempt().agent_id())},
       {"generation", absl::StrCat(j.attempt().presence_generation())},
       {"role_epoch", absl::StrCat(j.attempt().role_epoch())},
       {"timeout", FormatDuration(j.timeout())},
       {"deadline", FormatTimestamp(j.deadline())},
       {"not_before", FormatTimestamp(j.not_before())},
       {"cancel_requested", j.cancel_requested() ? "true" : "false"},
       {"depends_on", OrDash(absl::StrJoin(j.depends_on(), " "))}});
  if (!j.trace_id().empty()) fields.push_back({"trace_id", j.trace_id()});
  if (!j.correlation_id().empty()) {
    fields.push_back({"correlation_id", j.correlation_id()});
  }
  if (!j.idempotency_key().empty()) {
    fields.push_back({"idempotency_key", j.idempotency_key()});
  }
  if (j.payload().fields_size() > 0) {
    fields.push_back({"payload", ToJson(j.payload())});
  }
  if (j.has_progress()) fields.push_back({"progress", ToJson(j.progress())});
  if (j.has_result()) fields.push_back({"result", ToJson(j.result())});
  if (j.has_error()) {
    std::string error = j.error().reason();
    if (!j.error().message().empty()) {
      absl::StrAppend(&error, ": ", j.error().message());
    }
    fields.push_back({"error", error});
  }
  if (j.late_results_size() > 0) {
    fields.push_back({"late_results", absl::StrCat(j.late_results_size())});
  }
  fields.push_back({"created_at", FormatTimestamp(j.created_at())});
  fields.push_back({"updated_at", FormatTimestamp(j.updated_at())});
  PrintFields(*env.out, fields);
}

// Prints the `job` of a response (JSON: the whole response).
template <typename Response>
absl::Status PrintJobResponse(Env& env,
                              const absl::StatusOr<Response>& response) {
  if (!response.ok()) return response.status();
  if (env.json) {
    *env.out << ToJson(*response) << "\n";
  } else {
    PrintJob(env, response->job());
  }
  return absl::OkStatus();
}

// Supervisor and worker of a create: one kind each.
absl::Status PartiesFromArgs(const Args& args,
                             hub::v1::CreateJobRequest* request) {
  if (args.Has("supervisor") && args.Has("supervisor-role")) {
    return UsageError("give --supervisor or --supervisor-role, not both");
  }
  if (args.Has("supervisor-role")) {
    request->mutable_supervisor()->set_role_key_wire(
        args.Get("supervisor-role"));
  } else {
    request->mutable_supervisor()->set_agent_id(
        FlagOrEnv(args, "supervisor", "HUB_AGENT_ID"));
  }
  const bool pool = args.Has("pool") || args.Has("pool-topic");
  const int kinds = (args.Has("worker") ? 1 : 0) +
                    (args.Has("worker-role") ? 1 : 0) + (pool ? 1 : 0);
  if (kinds != 1) {
    return UsageError(
        "give one worker: --worker, --worker-role, or --pool/--pool-topic");
  }
  hub::v1::JobParty* worker = request->mutable_worker();
  if (args.Has("worker")) {
    worker->set_agent_id(args.Get("worker"));
  } else if (args.Has("worker-role")) {
    worker->set_role_key_wire(args.Get("worker-role"));
  } else {
    hub::v1::JobPool* p = worker->mutable_pool();
    for (const std::string& c : ListFlag(args, "pool")) p->add_capabilities(c);
    p->set_topic(args.Get("pool-topic"));
  }
  return absl::OkStatus();
}

absl::Status RetryPolicyFromArgs(const Args& args,
                                 hub::v1::CreateJobRequest* request) {
  hub::v1::JobRetryPolicy policy;
  auto initial = args.GetDuration("initial-backoff");
  if (!initial.ok()) return initial.status();
  if (initial->has_value()) {
    *policy.mutable_initial_backoff() = ToProtoDuration(**initial);
  }
  auto max = args.GetDuration("max-backoff");
  if (!max.ok()) return max.status();
  if (max->has_value()) *policy.mutable_max_backoff() = ToProtoDuration(**max);
  auto multiplier = args.GetDouble("backoff-multiplier");
  if (!multiplier.ok()) return multiplier.status();
  if (multiplier->has_value()) policy.set_multiplier(**multiplier);
  auto jitter = args.GetDouble("jitter");
  if (!jitter.ok()) return jitter.status();
  if (jitter->has_value()) policy.set_jitter(**jitter);
  for (const std::string& r : ListFlag(args, "non-retryable")) {
    policy.add_non_retryable_reasons(r);
  }
  // No policy flag: no policy, the hub's defaults.
  if (policy.ByteSizeLong() > 0) {
    *request->mutable_retry_policy() = std::move(policy);
  }
  return absl::OkStatus();
}

absl::Status Create(Env& env, const Args& args) {
  hub::v1::CreateJobRequest request;
  request.set_project_id(ProjectFromArgs(args));
  request.set_task(args.positional()[0]);
  request.set_topic(args.Get("topic"));
  if (absl::Status s = PartiesFromArgs(args, &request); !s.ok()) return s;
  if (absl::Status s = JsonFlag(args, "payload", request.mutable_payload());
      !s.ok()) {
    return s;
  }
  auto priority = GetInt32(args, "priority");
  if (!priority.ok()) return priority.status();
  if (priority->has_value()) request.set_priority(**priority);
  auto timeout = args.GetDuration("attempt-timeout");
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value()) {
    *request.mutable_timeout() = ToProtoDuration(**timeout);
  }
  auto max_attempts = GetInt32(args, "max-attempts");
  if (!max_attempts.ok()) return max_attempts.status();
  if (max_attempts->has_value()) request.set_max_attempts(**max_attempts);
  if (absl::Status s = RetryPolicyFromArgs(args, &request); !s.ok()) return s;
  auto not_before = args.GetTime("not-before");
  if (!not_before.ok()) return not_before.status();
  if (not_before->has_value()) {
    *request.mutable_not_before() = ToProtoTimestamp(**not_before);
  }
  for (const std::string& id : ListFlag(args, "depends-on")) {
    request.add_depends_on(id);
  }
  if (args.Has("on-dependency-failure")) {
    auto policy = ParseEnumWord<hub::v1::JobDependencyFailure>(
        "on-dependency-failure", args.Get("on-dependency-failure"),
        "JOB_DEPENDENCY_FAILURE_", &hub::v1::JobDependencyFailure_Parse);
    if (!policy.ok()) return policy.status();
    request.set_on_dependency_failure(*policy);
  }
  request.set_idempotency_key(args.Get("idempotency-key"));
  request.set_trace_id(args.Get("trace"));
  request.set_correlation_id(args.Get("correlation"));
  auto created = env.client->CreateJob(request);
  if (!created.ok()) return created.status();
  if (env.json) {
    *env.out << ToJson(*created) << "\n";
    return absl::OkStatus();
  }
  PrintJob(env, created->job(),
           {{"created", created->created() ? "true" : "false"}});
  return absl::OkStatus();
}

absl::Status Claim(Env& env, const Args& args) {
  hub::v1::ClaimJobRequest request;
  request.set_agent_id(AgentFromArgs(args));
  if (!args.positional().empty()) request.set_job_id(args.positional()[0]);
  request.set_project_id(ProjectFromArgs(args));
  request.set_topic(args.Get("topic"));
  auto generation = args.GetInt("generation");
  if (!generation.ok()) return generation.status();
  if (generation->has_value()) request.set_presence_generation(**generation);
  auto claimed = env.client->ClaimJob(request);
  if (!claimed.ok()) return claimed.status();
  if (env.json) {
    *env.out << ToJson(*claimed) << "\n";
  } else if (!claimed->has_job()) {
    *env.out << "no claimable job\n";
  } else {
    PrintJob(env, claimed->job());
  }
  return absl::OkStatus();
}

// The attempt a worker's write names: every part from its flag.
absl::Status AttemptFromArgs(const Args& args, hub::v1::JobAttempt* attempt) {
  for (const char* flag : {"job", "attempt", "generation"}) {
    if (!args.Has(flag)) {
      return UsageError(absl::StrCat(
          "--", flag, " is required (the attempt as `jobs claim` printed it)"));
    }
  }
  attempt->set_job_id(args.Get("job"));
  attempt->set_agent_id(AgentFromArgs(args));
  for (const auto& [flag, set] :
       {std::pair{"attempt", &hub::v1::JobAttempt::set_attempt},
        std::pair{"generation", &hub::v1::JobAttempt::set_presence_generation},
        std::pair{"role-epoch", &hub::v1::JobAttempt::set_role_epoch}}) {
    auto value = args.GetInt(flag);
    if (!value.ok()) return value.status();
    if (value->has_value()) (attempt->*set)(**value);
  }
  return absl::OkStatus();
}

absl::Status Heartbeat(Env& env, const Args& args) {
  hub::v1::HeartbeatJobRequest request;
  if (absl::Status s = AttemptFromArgs(args, request.mutable_attempt());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = JsonFlag(args, "progress", request.mutable_progress());
      !s.ok()) {
    return s;
  }
  auto beat = env.client->HeartbeatJob(request);
  if (!beat.ok()) return beat.status();
  if (env.json) {
    *env.out << ToJson(*beat) << "\n";
    return absl::OkStatus();
  }
  PrintFields(*env.out, {{"job_id", request.attempt().job_id()},
                         {"cancel_requested",
                          beat->cancel_requested() ? "true" : "false"},
                         {"deadline", FormatTimestamp(beat->deadline())}});
  return absl::OkStatus();
}

absl::Status Complete(Env& env, const Args& args) {
  hub::v1::CompleteJobRequest request;
  if (absl::Status s = AttemptFromArgs(args, request.mutable_attempt());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = JsonFlag(args, "result", request.mutable_result());
      !s.ok()) {
    return s;
  }
  return PrintJobResponse(env, env.client->CompleteJob(request));
}

absl::Status Fail(Env& env, const Args& args) {
  hub::v1::FailJobRequest request;
  if (absl::Status s = AttemptFromArgs(args, request.mutable_attempt());
      !s.ok()) {
    return s;
  }
  if (!args.Has("reason")) return UsageError("--reason is required");
  hub::v1::JobError* error = request.mutable_error();
  error->set_reason(args.Get("reason"));
  error->set_message(args.Get("message"));
  error->set_retryable(!args.Has("no-retry"));
  if (absl::Status s = JsonFlag(args, "details", error->mutable_details());
      !s.ok()) {
    return s;
  }
  return PrintJobResponse(env, env.client->FailJob(request));
}

absl::Status Get(Env& env, const Args& args) {
  hub::v1::GetJobRequest request;
  request.set_job_id(args.positional()[0]);
  return PrintJobResponse(env, env.client->GetJob(request));
}

// A job's row of `jobs list`: the task's first line, cut to 50 characters.
std::vector<std::string> JobRow(const hub::v1::Job& j) {
  std::string task(absl::string_view(j.task()).substr(0, j.task().find('\n')));
  if (task.size() > 50) task = task.substr(0, 47) + "...";
  return {j.job_id(),
          StateWord(j.state()),
          absl::StrCat(j.priority()),
          absl::StrCat(j.attempt().attempt(), "/", j.max_attempts()),
          PartyText(j.worker()),
          OrDash(j.attempt().agent_id()),
          FormatTimestamp(j.updated_at()),
          task};
}

absl::Status List(Env& env, const Args& args) {
  hub::v1::ListJobsRequest request;
  request.set_project_id(ProjectFromArgs(args));
  request.set_supervisor_agent_id(args.Get("supervisor"));
  request.set_worker_agent_id(args.Get("worker"));
  for (const std::string& word : ListFlag(args, "state")) {
    auto state = ParseEnumWord<hub::v1::JobState>("state", word, "JOB_STATE_",
                                                  &hub::v1::JobState_Parse);
    if (!state.ok()) return state.status();
    request.add_states(*state);
  }
  request.set_trace_id(args.Get("trace"));
  request.set_correlation_id(args.Get("correlation"));
  auto before = args.GetTime("deadline-before");
  if (!before.ok()) return before.status();
  if (before->has_value()) {
    *request.mutable_deadline_before() = ToProtoTimestamp(**before);
  }
  auto page_size = GetInt32(args, "page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(page_size->value_or(0));
  request.set_page_token(args.Get("page-token"));
  // --all follows next_page_token to the end and prints one listing.
  hub::v1::ListJobsResponse listed;
  for (;;) {
    auto page = env.client->ListJobs(request);
    if (!page.ok()) return page.status();
    listed.mutable_jobs()->MergeFrom(page->jobs());
    listed.set_next_page_token(page->next_page_token());
    if (!args.Has("all") || page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  if (env.json) {
    *env.out << ToJson(listed) << "\n";
    return absl::OkStatus();
  }
  Table table({"JOB_ID", "STATE", "PRIORITY", "ATTEMPT", "WORKER", "HOLDER",
               "UPDATED_AT", "TASK"});
  for (const hub::v1::Job& j : listed.jobs()) table.Add(JobRow(j));
  table.Print(*env.out);
  if (!listed.next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed.next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Cancel(Env& env, const Args& args) {
  hub::v1::CancelJobRequest request;
  request.set_job_id(args.positional()[0]);
  request.set_reason(args.Get("reason"));
  request.set_agent_id(AgentFromArgs(args));
  return PrintJobResponse(env, env.client->CancelJob(request));
}

absl::Status Retry(Env& env, const Args& args) {
  hub::v1::RetryJobRequest request;
  request.set_job_id(args.positional()[0]);
  request.set_agent_id(AgentFromArgs(args));
  return PrintJobResponse(env, env.client->RetryJob(request));
}

const FlagSpec kAgentFlag = {"agent", "AGENT_ID",
                             "the worker agent (default $HUB_AGENT_ID)"};
const FlagSpec kProjectFlag = {"project", "PROJECT_ID",
                               "the project (default $HUB_PROJECT_ID)"};
const FlagSpec kSupervisorAgentFlag = {
    "agent", "AGENT_ID",
    "the job's supervisor agent acting (default $HUB_AGENT_ID; an operator "
    "needs none)"};

// The attempt's fence, for heartbeat, complete and fail.
std::vector<FlagSpec> WithAttemptFlags(std::vector<FlagSpec> more) {
  std::vector<FlagSpec> flags = {
      {"job", "JOB_ID", "the job"},
      {"attempt", "N", "the attempt number the claim returned"},
      kAgentFlag,
      {"generation", "N", "the worker's presence generation at the claim"},
      {"role-epoch", "N", "for a role worker: the role's epoch at the claim"}};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

constexpr char kAttemptHelp[] =
    "--job, --attempt and --generation are required: the attempt as `jobs "
    "claim` printed it (attempt, attempt_agent, generation, role_epoch). A "
    "write of an attempt that is not the job's current one exits 9 "
    "(FAILED_PRECONDITION: ASSIGN_ATTEMPT_MISMATCH, ASSIGN_WORKER_MISMATCH "
    "or JOB_NOT_RUNNING) and changes nothing.";

}  // namespace

std::vector<Command> JobCommands() {
  return {
      {"jobs create",
       "TASK",
       "Create a job: TASK for one worker (an agent, a role or a pool).",
       "The worker is --worker, --worker-role, or a pool (--pool and/or "
       "--pool-topic). With --depends-on the job is blocked until each "
       "parent succeeded. An --idempotency-key the project used before "
       "returns that job (created: false).",
       {kProjectFlag,
        {"supervisor", "AGENT_ID",
         "the supervising agent (default $HUB_AGENT_ID)"},
        {"supervisor-role", "WIRE", "a role (rk2. wire) supervises instead"},
        {"worker", "AGENT_ID", "the worker: one agent"},
        {"worker-role", "WIRE", "the worker: whoever holds this role"},
        {"pool", "CAP[,CAP...]",
         "the worker: any agent of the project with these capabilities "
         "(--pool= : any agent)"},
        {"pool-topic", "TOPIC", "a pool's agents must have this topic"},
        {"topic", "TOPIC", "the job's topic (default assign.job)"},
        {"payload", "JSON", "the job's payload, a JSON object"},
        {"priority", "N", "1 (low) .. 9 (high), default 5"},
        {"attempt-timeout", "DURATION",
         "each attempt's deadline, 1s .. 24h (default 10m)"},
        {"max-attempts", "N", "1 .. 100 (default 1)"},
        {"initial-backoff", "DURATION",
         "the first retry's wait, 0 .. 1h (default 1s)"},
        {"backoff-multiplier", "X", "each next wait's factor, 1 .. 10 (2)"},
        {"max-backoff", "DURATION", "the longest wait (default 5m)"},
        {"jitter", "X", "0 .. 1: a wait is scaled by [1 - X, 1]"},
        {"non-retryable", "REASON[,REASON...]",
         "fail reasons that end the job at once (repeatable)"},
        {"not-before", "TIME", "not claimable before (RFC 3339)"},
        {"depends-on", "JOB_ID", "a parent that must succeed (repeatable)"},
        {"on-dependency-failure", "cancel|block",
         "when a parent fails (default cancel)"},
        {"idempotency-key", "KEY", "one job per key and project"},
        {"trace", "ID", "trace id"},
        {"correlation", "ID", "correlation id"}},
       1,
       1,
       Create},
      {"jobs claim",
       "[JOB_ID]",
       "Claim JOB_ID, or the next claimable job, for a worker agent.",
       "Prints the job with its attempt (attempt, attempt_agent, generation, "
       "role_epoch), which heartbeat, complete and fail name; 'no claimable "
       "job' (JSON: {}) when there is none. A JOB_ID that is not claimable "
       "exits 9 (JOB_NOT_CLAIMABLE).",
       {kAgentFlag,
        {"project", "PROJECT_ID",
         "only jobs of this project (default $HUB_PROJECT_ID, else the "
         "agent's)"},
        {"topic", "TOPIC", "only jobs of this topic"},
        {"generation", "N", "refuse unless the agent is at this generation"}},
       0,
       1,
       Claim},
      {"jobs heartbeat", "",
       "Report a running attempt's progress and keep its deadline.",
       kAttemptHelp,
       WithAttemptFlags({{"progress", "JSON", "the progress, a JSON object"}}),
       0, 0, Heartbeat},
      {"jobs complete", "",
       "End a running attempt with a result: the job succeeded.", kAttemptHelp,
       WithAttemptFlags({{"result", "JSON", "the result, a JSON object"}}), 0,
       0, Complete},
      {"jobs fail", "",
       "End a running attempt with an error; retried as its policy allows.",
       kAttemptHelp,
       WithAttemptFlags(
           {{"reason", "REASON", "a stable word for the error (required)"},
            {"message", "TEXT", "what went wrong"},
            {"details", "JSON", "more, a JSON object"},
            {"no-retry", "", "the error is not retryable: the job fails"}}),
       0, 0, Fail},
      {"jobs get", "JOB_ID", "Show one job.", "", {}, 1, 1, Get},
      {"jobs list",
       "",
       "List jobs, the most recently changed first.",
       "Prints one page (the next with --page-token), or every page with "
       "--all.",
       {kProjectFlag,
        {"supervisor", "AGENT_ID", "only jobs this agent supervises"},
        {"worker", "AGENT_ID",
         "only jobs this agent works on (or that target it)"},
        {"state", "S[,S...]",
         "only these states: blocked, queued, offered, running, "
         "waiting-human, succeeded, failed, timed-out, cancelled"},
        {"trace", "ID", "only this trace id"},
        {"correlation", "ID", "only this correlation id"},
        {"deadline-before", "TIME",
         "only jobs whose deadline is at or before (RFC 3339)"},
        {"page-size", "N", "jobs per page (default 50, at most 1000)"},
        {"page-token", "TOKEN", "the next page"},
        {"all", "", "every page"}},
       0,
       0,
       List},
      {"jobs cancel",
       "JOB_ID",
       "Cancel a job (operators, or its supervisor agent).",
       "A blocked or queued job ends cancelled at once; a running one is "
       "marked cancel_requested, its worker learns it from its next "
       "heartbeat, and it ends cancelled when the worker completes or fails "
       "it or its deadline passes.",
       {kSupervisorAgentFlag, {"reason", "TEXT", "why, kept on the job"}},
       1,
       1,
       Cancel},
      {"jobs retry",
       "JOB_ID",
       "Queue a failed, timed-out or cancelled job again (a new attempt).",
       "Any other state exits 9 (JOB_NOT_ENDED).",
       {kSupervisorAgentFlag},
       1,
       1,
       Retry},
  };
}

}  // namespace hub::hubctl
