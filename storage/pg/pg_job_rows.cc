#include "storage/pg/pg_job_rows.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/pg/pg_rows.h"

namespace hub::storage::pg {
namespace {

JobRecord ReadJob(const Row& r) { return ReadJobColumns(r); }

absl::StatusOr<std::optional<JobRecord>> OneJob(absl::StatusOr<Result> r) {
  if (!r.ok()) return r.status();
  return ReadOne<JobRecord>(*r, ReadJob);
}
absl::StatusOr<std::vector<JobRecord>> EachJob(absl::StatusOr<Result> r) {
  if (!r.ok()) return r.status();
  return ReadAll<JobRecord>(*r, ReadJob);
}

Param StateWord(JobState state) { return std::string(JobStateName(state)); }

// triflux's status word that is read back as `state` (JobStateOfTrifluxStatus),
// or NULL for a state no triflux word is read as (blocked, offered,
// waiting_human, cancelled): what a row with no hub_state must have to match
// a fence on `state`.
Param TrifluxWordReadAs(JobState state) {
  const absl::string_view word = TrifluxJobStatus(state);
  if (JobStateOfTrifluxStatus(word) != state) return Null();
  return std::string(word);
}

// A row's state as the fence and the filters see it: hub_state, or for a row
// triflux wrote, the state its status names. Each of triflux's five status
// words names the hub state of the same word (records/job.h), and the status
// column holds no other (its domain), so the status itself is that state.
#define HUB_PG_JOB_STATE "COALESCE(hub_state, status)"

constexpr char kInsertJobSql[] =
    "INSERT INTO assign_jobs (" HUB_JOB_COLUMNS
    ", ttl_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
    "$13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, "
    "$27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $13)";

// $1..$20 the mutable columns of the job after the write, $21 the job, $22..
// $27 the fence.
constexpr char kUpdateFencedSql[] =
    "UPDATE assign_jobs SET status = $1, hub_state = $2, worker_agent = $3, "
    "attempt = $4, retry_count = $5, max_retries = $6, attempt_worker = $7, "
    "attempt_generation = $8, attempt_role_epoch = $9, not_before_ms = $10, "
    "deadline_ms = $11, cancel_requested = $12, progress_json = $13, "
    "result_json = $14, error_json = $15, updated_at_ms = $16, "
    "started_at_ms = $17, dispatched_at_ms = $18, completed_at_ms = $19, "
    "last_retry_at_ms = $20 "
    "WHERE job_id = $21 "
    "AND (hub_state = $22::text "
    "OR (hub_state IS NULL AND status = $23::text)) "
    "AND attempt = $24::bigint "
    "AND attempt_worker IS NOT DISTINCT FROM $25::text "
    "AND attempt_generation IS NOT DISTINCT FROM $26::bigint "
    "AND attempt_role_epoch IS NOT DISTINCT FROM $27::bigint";

// The idempotency key's lock ($3) is a filter on no column of the row:
// evaluated once, before the row is read, so it is taken when there is no
// row too (as PgRoleRows::LockScopeAndLoad's).
constexpr char kFindByIdempotencyKeySql[] =
    "WITH l AS MATERIALIZED (SELECT "
    "pg_advisory_xact_lock(hashtextextended($3, 0))) "
    "SELECT " HUB_JOB_COLUMNS
    " FROM assign_jobs WHERE project_id = $1 AND idempotency_key = $2 "
    "AND (SELECT true FROM l)";

}  // namespace

namespace sql {

// Through idx_hub_jobs_queued: the project's queued jobs in claim order,
// each checked for being due, of the topic and for this agent.
extern const char kClaimableJobsSql[] =
    "SELECT " HUB_JOB_COLUMNS
    " FROM assign_jobs WHERE hub_state = 'queued' AND project_id = $1 "
    "AND (not_before_ms IS NULL OR not_before_ms <= $2::bigint) "
    "AND ($3::text = '' OR topic = $3::text) "
    "AND ((worker_kind = 'agent' AND worker_agent = $4::text) "
    "OR (worker_kind = 'role' AND worker_role_wire = ANY($5::text[])) "
    "OR worker_kind = 'pool') "
    "ORDER BY priority DESC, created_at_ms, job_id "
    "LIMIT $6::bigint FOR UPDATE SKIP LOCKED";

// Through idx_hub_jobs_attempt_worker. "Live" is spelled so that it implies
// nothing about idx_hub_jobs_live_deadline's predicate: with statistics
// that saw few live attempts, the planner walked every live attempt
// filtered by worker instead (pg_plans_test). hub_state NULL is no live
// state either way.
extern const char kJobAttemptsOfSql[] =
    "SELECT " HUB_JOB_COLUMNS
    " FROM assign_jobs WHERE attempt_worker = $1 "
    "AND attempt_generation = $2::bigint "
    "AND COALESCE(hub_state, '') IN ('offered', 'running', 'waiting_human') "
    "ORDER BY job_id FOR UPDATE";

// Through idx_hub_jobs_live_deadline, earliest first.
extern const char kDueJobDeadlinesSql[] =
    "SELECT " HUB_JOB_COLUMNS
    " FROM assign_jobs WHERE hub_state IN ('offered', 'running', "
    "'waiting_human') AND deadline_ms <= $1::bigint "
    "ORDER BY deadline_ms, job_id LIMIT $2::bigint FOR UPDATE SKIP LOCKED";

}  // namespace sql

namespace {

// Filters bind NULL for "any"; lists bind as text[]; LIMIT NULL is no limit.
constexpr char kJobsPageSql[] =
    "SELECT " HUB_JOB_COLUMNS
    " FROM assign_jobs "
    "WHERE ($1::text[] IS NULL OR project_id = ANY($1::text[])) "
    "AND ($2::text IS NULL OR supervisor_agent = $2::text) "
    "AND ($3::text IS NULL OR worker_agent = $3::text) "
    "AND ($4::text[] IS NULL OR " HUB_PG_JOB_STATE
    " = ANY($4::text[])) "
    "AND ($5::text IS NULL OR trace_id = $5::text) "
    "AND ($6::text IS NULL OR correlation_id = $6::text) "
    "AND ($7::bigint IS NULL OR deadline_ms <= $7::bigint) "
    "AND ($8::bigint IS NULL OR (updated_at_ms, job_id) < "
    "($8::bigint, $9::text COLLATE \"C\")) "
    "ORDER BY updated_at_ms DESC, job_id DESC LIMIT $10::bigint";

// Each parent's state as the fence reads it.
constexpr char kParentsSql[] =
    "SELECT d.parent_id, j.hub_state, j.status "
    "FROM hub_job_dependencies d JOIN assign_jobs j ON j.job_id = d.parent_id "
    "WHERE d.job_id = $1 ORDER BY d.parent_id";

// A filter's field: "" is any (NULL).
Param AnyIfEmpty(const std::string& value) {
  return value.empty() ? Null() : P(value);
}

}  // namespace

absl::StatusOr<std::optional<JobRecord>> PgJobRows::Load(
    absl::string_view job_id, bool lock) {
  return OneJob(conn_.Run(
      lock ? "SELECT " HUB_JOB_COLUMNS " FROM assign_jobs WHERE job_id = $1 "
             "FOR UPDATE"
           : "SELECT " HUB_JOB_COLUMNS " FROM assign_jobs WHERE job_id = $1",
      {P(job_id)}));
}

absl::StatusOr<std::optional<JobRecord>> PgJobRows::FindByIdempotencyKey(
    absl::string_view project_id, absl::string_view key) {
  const std::string lock_key = absl::StrCat(
      "hub.job-idempotency:", project_id.size(), ":", project_id, ":", key);
  return OneJob(conn_.Run(kFindByIdempotencyKeySql,
                          {P(project_id), P(key), P(lock_key)}));
}

absl::Status PgJobRows::Insert(const JobRecord& j) {
  return conn_
      .Run(kInsertJobSql,
           {P(j.job_id),
            P(j.project_id),
            P(j.supervisor_agent),
            P(j.supervisor_role_wire),
            P(std::string(JobWorkerKindName(j.worker_kind))),
            P(j.worker_agent),
            P(j.worker_role_wire),
            P(PoolFilterJson(j)),
            P(j.topic),
            P(j.task),
            P(j.payload_json),
            P(j.priority),
            P(j.timeout_ms),
            P(j.max_retries),
            P(RetryPolicyJson(j.retry_policy)),
            P(std::string(JobDependencyFailureName(j.on_dependency_failure))),
            P(j.idempotency_key),
            P(j.trace_id),
            P(j.correlation_id),
            StateWord(j.state),
            P(std::string(TrifluxJobStatus(j.state))),
            P(j.attempt),
            P(j.retry_count),
            P(j.attempt_worker),
            P(j.attempt_generation),
            P(j.attempt_role_epoch),
            P(j.not_before_ms),
            P(j.deadline_ms),
            P(j.cancel_requested ? 1 : 0),
            P(j.progress_json),
            P(j.result_json),
            j.error.has_value() ? P(JobErrorJson(*j.error)) : Null(),
            P(j.created_at_ms),
            P(j.updated_at_ms),
            P(j.started_at_ms),
            P(j.dispatched_at_ms),
            P(j.completed_at_ms),
            P(j.last_retry_at_ms)})
      .status();
}

absl::StatusOr<bool> PgJobRows::UpdateFenced(const JobRecord& n,
                                             const JobRowFence& fence) {
  absl::StatusOr<Result> r =
      conn_.Run(kUpdateFencedSql,
                {P(std::string(TrifluxJobStatus(n.state))),
                 StateWord(n.state),
                 P(n.worker_agent),
                 P(n.attempt),
                 P(n.retry_count),
                 P(n.max_retries),
                 P(n.attempt_worker),
                 P(n.attempt_generation),
                 P(n.attempt_role_epoch),
                 P(n.not_before_ms),
                 P(n.deadline_ms),
                 P(n.cancel_requested ? 1 : 0),
                 P(n.progress_json),
                 P(n.result_json),
                 n.error.has_value() ? P(JobErrorJson(*n.error)) : Null(),
                 P(n.updated_at_ms),
                 P(n.started_at_ms),
                 P(n.dispatched_at_ms),
                 P(n.completed_at_ms),
                 P(n.last_retry_at_ms),
                 P(fence.job_id),
                 StateWord(fence.state),
                 TrifluxWordReadAs(fence.state),
                 P(fence.attempt),
                 P(fence.attempt_worker),
                 P(fence.attempt_generation),
                 P(fence.attempt_role_epoch)});
  if (!r.ok()) return r.status();
  return r->changed() == 1;
}

absl::Status PgJobRows::InsertDependency(absl::string_view job_id,
                                         absl::string_view parent_id) {
  return conn_
      .Run(
          "INSERT INTO hub_job_dependencies (job_id, parent_id) "
          "VALUES ($1, $2) ON CONFLICT (job_id, parent_id) DO NOTHING",
          {P(job_id), P(parent_id)})
      .status();
}

absl::StatusOr<std::vector<JobParent>> PgJobRows::Parents(
    absl::string_view job_id) {
  absl::StatusOr<Result> r = conn_.Run(kParentsSql, {P(job_id)});
  if (!r.ok()) return r.status();
  std::vector<JobParent> parents;
  parents.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    const Row row(*r, i);
    JobParent parent;
    parent.parent_id = row.Text(0);
    std::optional<JobState> state = row.IsNull(1)
                                        ? JobStateOfTrifluxStatus(row.Text(2))
                                        : ParseJobState(row.Text(1));
    // The domains admit no other word.
    parent.state = state.value_or(JobState::kFailed);
    parents.push_back(std::move(parent));
  }
  return parents;
}

absl::StatusOr<std::vector<std::string>> PgJobRows::Children(
    absl::string_view parent_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT job_id FROM hub_job_dependencies WHERE parent_id = $1 "
      "ORDER BY job_id",
      {P(parent_id)});
  if (!r.ok()) return r.status();
  std::vector<std::string> children;
  children.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) children.emplace_back(r->Text(i, 0));
  return children;
}

absl::Status PgJobRows::InsertLateResult(absl::string_view job_id,
                                         const JobLateResult& late) {
  return conn_
      .Run(
          "INSERT INTO hub_job_late_results (job_id, attempt, agent_id, "
          "result_json, error_json, reported_at_ms) "
          "VALUES ($1, $2, $3, $4, $5, $6) "
          "ON CONFLICT (job_id, attempt) DO NOTHING",
          {P(job_id), P(late.attempt), P(late.agent_id), P(late.result_json),
           late.error.has_value() ? P(JobErrorJson(*late.error)) : Null(),
           P(late.reported_at_ms)})
      .status();
}

absl::StatusOr<std::vector<JobLateResult>> PgJobRows::LateResults(
    absl::string_view job_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT attempt, agent_id, result_json, error_json, reported_at_ms "
      "FROM hub_job_late_results WHERE job_id = $1 "
      "ORDER BY reported_at_ms, attempt",
      {P(job_id)});
  if (!r.ok()) return r.status();
  std::vector<JobLateResult> results;
  results.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    const Row row(*r, i);
    JobLateResult late;
    late.attempt = row.Int(0);
    late.agent_id = row.Text(1);
    late.result_json = row.OptText(2);
    if (!row.IsNull(3)) late.error = ParseJobErrorJson(row.Text(3));
    late.reported_at_ms = row.Int(4);
    results.push_back(std::move(late));
  }
  return results;
}

absl::StatusOr<std::optional<JobWorkerRow>> PgJobRows::Worker(
    absl::string_view agent_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT presence_generation, status, project_id, capabilities_json, "
      "topics_json FROM agents WHERE agent_id = $1",
      {P(agent_id)});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return std::optional<JobWorkerRow>();
  const Row row(*r, 0);
  JobWorkerRow worker;
  worker.presence_generation = row.Int(0);
  worker.offline = row.Text(1) == "offline";
  worker.project_id = row.OptText(2);
  worker.capabilities = ParseStringListJson(row.Text(3));
  worker.topics = ParseStringListJson(row.Text(4));
  return std::optional<JobWorkerRow>(std::move(worker));
}

absl::StatusOr<std::vector<HeldRole>> PgJobRows::HeldRoles(
    absl::string_view agent_id, absl::string_view project_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT role_key_wire, epoch FROM role_registry "
      "WHERE holder_agent_id = $1 AND project_id = $2 AND state = 'active' "
      "ORDER BY role_key_wire",
      {P(agent_id), P(project_id)});
  if (!r.ok()) return r.status();
  std::vector<HeldRole> roles;
  roles.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    const Row row(*r, i);
    roles.push_back({row.Text(0), row.Int(1)});
  }
  return roles;
}

absl::StatusOr<std::vector<JobRecord>> PgJobRows::Claimable(
    absl::string_view project_id, absl::string_view agent_id,
    const std::vector<std::string>& role_wires, absl::string_view topic,
    int64_t now_ms, int64_t limit) {
  return EachJob(conn_.Run(sql::kClaimableJobsSql,
                           {P(project_id), P(now_ms), P(topic), P(agent_id),
                            P(TextArray(role_wires)), P(limit)}));
}

absl::StatusOr<std::vector<JobRecord>> PgJobRows::AttemptsOf(
    absl::string_view agent_id, int64_t generation) {
  return EachJob(
      conn_.Run(sql::kJobAttemptsOfSql, {P(agent_id), P(generation)}));
}

absl::StatusOr<std::vector<JobRecord>> PgJobRows::OrphanedAttempts(
    int64_t limit) {
  return EachJob(conn_.Run(
      "SELECT " HUB_JOB_COLUMNS
      " FROM assign_jobs j WHERE hub_state IN ('offered', 'running', "
      "'waiting_human') AND NOT EXISTS (SELECT 1 FROM agents a WHERE "
      "a.agent_id = j.attempt_worker AND a.presence_generation = "
      "j.attempt_generation AND a.status <> 'offline') ORDER BY job_id "
      "LIMIT $1::bigint FOR UPDATE OF j SKIP LOCKED",
      {P(limit)}));
}

absl::Status PgJobRows::InsertAttempt(const JobAttemptFence& f,
                                      int64_t claimed_at_ms) {
  absl::StatusOr<Result> r = conn_.Run(
      "INSERT INTO hub_job_attempts (job_id, attempt, agent_id, "
      "presence_generation, role_epoch, claimed_at_ms) VALUES ($1, "
      "$2::bigint, $3, $4::bigint, $5::bigint, $6::bigint)",
      {P(f.job_id), P(f.attempt), P(f.agent_id), P(f.presence_generation),
       f.role_epoch == 0 ? Null() : P(f.role_epoch), P(claimed_at_ms)});
  return r.status();
}

absl::StatusOr<std::optional<JobAttemptFence>> PgJobRows::AttemptHolder(
    absl::string_view job_id, int64_t attempt) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT job_id, attempt, agent_id, presence_generation, role_epoch "
      "FROM hub_job_attempts WHERE job_id = $1 AND attempt = $2::bigint",
      {P(job_id), P(attempt)});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return std::optional<JobAttemptFence>();
  JobAttemptFence f;
  f.job_id = std::string(r->Text(0, 0));
  f.attempt = r->Int(0, 1).value_or(0);
  f.agent_id = std::string(r->Text(0, 2));
  f.presence_generation = r->Int(0, 3).value_or(0);
  f.role_epoch = r->Int(0, 4).value_or(0);
  return std::optional<JobAttemptFence>(f);
}

absl::StatusOr<bool> PgJobRows::AnyDueDeadline(int64_t now_ms) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT 1 FROM assign_jobs WHERE hub_state IN ('offered', 'running', "
      "'waiting_human') AND deadline_ms <= $1::bigint LIMIT 1",
      {P(now_ms)});
  if (!r.ok()) return r.status();
  return r->rows() > 0;
}

absl::StatusOr<std::vector<JobRecord>> PgJobRows::DueDeadlines(int64_t now_ms,
                                                               int64_t limit) {
  return EachJob(conn_.Run(sql::kDueJobDeadlinesSql, {P(now_ms), P(limit)}));
}

absl::StatusOr<std::vector<JobRecord>> PgJobRows::Page(const JobFilter& f) {
  std::vector<std::string> states;
  states.reserve(f.states.size());
  for (JobState s : f.states) states.emplace_back(JobStateName(s));
  const bool after = f.after_updated_at_ms.has_value();
  return EachJob(conn_.Run(
      kJobsPageSql,
      {f.project_ids.empty() ? Null() : P(TextArray(f.project_ids)),
       AnyIfEmpty(f.supervisor_agent), AnyIfEmpty(f.worker_agent),
       states.empty() ? Null() : P(TextArray(states)), AnyIfEmpty(f.trace_id),
       AnyIfEmpty(f.correlation_id), P(f.deadline_before_ms),
       P(f.after_updated_at_ms), after ? P(f.after_job_id) : Null(),
       f.limit > 0 ? P(f.limit) : Null()}));
}

}  // namespace hub::storage::pg
