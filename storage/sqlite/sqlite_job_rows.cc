#include "storage/sqlite/sqlite_job_rows.h"

#include <utility>

#include "storage/sqlite/sqlite_rows.h"

namespace hub::storage {
namespace {

#define HUB_JOB_LIVE "hub_state IN ('offered','running','waiting_human')"

JobRecord ReadJob(const Stmt& s) { return ReadJobColumns(s); }

std::optional<std::string> ErrorJson(const JobRecord& job) {
  if (!job.error.has_value()) return std::nullopt;
  return JobErrorJson(*job.error);
}

std::string StatesJson(const std::vector<JobState>& states) {
  std::vector<std::string> words;
  for (JobState s : states) words.emplace_back(JobStateName(s));
  return StringListJson(words);
}

}  // namespace

absl::StatusOr<std::optional<JobRecord>> SqliteJobRows::Load(
    absl::string_view job_id, bool lock) {
  (void)lock;  // the single writer
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS " FROM assign_jobs WHERE job_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job_id);
  return rows::ReadOne<JobRecord>(*stmt, ReadJob);
}

absl::StatusOr<std::optional<JobRecord>> SqliteJobRows::FindByIdempotencyKey(
    absl::string_view project_id, absl::string_view key) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("SELECT " HUB_JOB_COLUMNS
                    " FROM assign_jobs WHERE project_id = ? AND "
                    "idempotency_key = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, project_id).Bind(2, key);
  return rows::ReadOne<JobRecord>(*stmt, ReadJob);
}

absl::Status SqliteJobRows::Insert(const JobRecord& job) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO assign_jobs (job_id, project_id, supervisor_agent, "
      "supervisor_role_wire, worker_kind, worker_agent, worker_role_wire, "
      "pool_filter_json, topic, task, payload_json, priority, timeout_ms, "
      "ttl_ms, max_retries, retry_policy_json, on_dependency_failure, "
      "idempotency_key, trace_id, correlation_id, hub_state, status, "
      "attempt, retry_count, not_before_ms, deadline_ms, cancel_requested, "
      "error_json, created_at_ms, updated_at_ms, completed_at_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, "
      "?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, "
      "?28, ?29, ?30)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job.job_id)
      .Bind(2, job.project_id)
      .Bind(3, job.supervisor_agent)
      .Bind(4, job.supervisor_role_wire)
      .Bind(5, JobWorkerKindName(job.worker_kind))
      .Bind(6, job.worker_agent)
      .Bind(7, job.worker_role_wire)
      .Bind(8, PoolFilterJson(job))
      .Bind(9, job.topic)
      .Bind(10, job.task)
      .Bind(11, job.payload_json)
      .Bind(12, job.priority)
      .Bind(13, job.timeout_ms)
      .Bind(14, job.max_retries)
      .Bind(15, RetryPolicyJson(job.retry_policy))
      .Bind(16, JobDependencyFailureName(job.on_dependency_failure))
      .Bind(17, job.idempotency_key)
      .Bind(18, job.trace_id)
      .Bind(19, job.correlation_id)
      .Bind(20, JobStateName(job.state))
      .Bind(21, TrifluxJobStatus(job.state))
      .Bind(22, job.attempt)
      .Bind(23, job.retry_count)
      .Bind(24, job.not_before_ms)
      .Bind(25, job.deadline_ms)
      .Bind(26, static_cast<int64_t>(job.cancel_requested ? 1 : 0))
      .Bind(27, ErrorJson(job))
      .Bind(28, job.created_at_ms)
      .Bind(29, job.updated_at_ms)
      .Bind(30, job.completed_at_ms);
  return stmt->Run();
}

absl::StatusOr<bool> SqliteJobRows::UpdateFenced(const JobRecord& next,
                                                 const JobRowFence& fence) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "UPDATE assign_jobs SET hub_state = ?1, status = ?2, worker_agent = ?3, "
      "attempt = ?4, retry_count = ?5, max_retries = ?6, "
      "attempt_worker = ?7, attempt_generation = ?8, attempt_role_epoch = ?9, "
      "not_before_ms = ?10, deadline_ms = ?11, cancel_requested = ?12, "
      "progress_json = ?13, result_json = ?14, error_json = ?15, "
      "updated_at_ms = ?16, started_at_ms = ?17, dispatched_at_ms = ?18, "
      "completed_at_ms = ?19, last_retry_at_ms = ?20 "
      "WHERE job_id = ?21 AND hub_state = ?22 AND attempt = ?23 "
      "AND attempt_worker IS ?24 AND attempt_generation IS ?25 "
      "AND attempt_role_epoch IS ?26");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, JobStateName(next.state))
      .Bind(2, TrifluxJobStatus(next.state))
      .Bind(3, next.worker_agent)
      .Bind(4, next.attempt)
      .Bind(5, next.retry_count)
      .Bind(6, next.max_retries)
      .Bind(7, next.attempt_worker)
      .Bind(8, next.attempt_generation)
      .Bind(9, next.attempt_role_epoch)
      .Bind(10, next.not_before_ms)
      .Bind(11, next.deadline_ms)
      .Bind(12, static_cast<int64_t>(next.cancel_requested ? 1 : 0))
      .Bind(13, next.progress_json)
      .Bind(14, next.result_json)
      .Bind(15, ErrorJson(next))
      .Bind(16, next.updated_at_ms)
      .Bind(17, next.started_at_ms)
      .Bind(18, next.dispatched_at_ms)
      .Bind(19, next.completed_at_ms)
      .Bind(20, next.last_retry_at_ms)
      .Bind(21, fence.job_id)
      .Bind(22, JobStateName(fence.state))
      .Bind(23, fence.attempt)
      .Bind(24, fence.attempt_worker)
      .Bind(25, fence.attempt_generation)
      .Bind(26, fence.attempt_role_epoch);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return conn_.Changes() == 1;
}

absl::Status SqliteJobRows::InsertDependency(absl::string_view job_id,
                                             absl::string_view parent_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT OR IGNORE INTO hub_job_dependencies (job_id, parent_id) "
      "VALUES (?, ?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job_id).Bind(2, parent_id);
  return stmt->Run();
}

absl::StatusOr<std::vector<JobParent>> SqliteJobRows::Parents(
    absl::string_view job_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT d.parent_id, COALESCE(j.hub_state, j.status) "
      "FROM hub_job_dependencies d JOIN assign_jobs j "
      "ON j.job_id = d.parent_id WHERE d.job_id = ? ORDER BY d.parent_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job_id);
  return rows::ReadAll<JobParent>(*stmt, [](const Stmt& s) {
    JobParent p;
    p.parent_id = s.Text(0);
    p.state = ParseJobState(s.Text(1)).value_or(JobState::kFailed);
    return p;
  });
}

absl::StatusOr<std::vector<std::string>> SqliteJobRows::Children(
    absl::string_view parent_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT job_id FROM hub_job_dependencies WHERE parent_id = ? "
      "ORDER BY job_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, parent_id);
  return rows::ReadAll<std::string>(*stmt,
                                    [](const Stmt& s) { return s.Text(0); });
}

absl::Status SqliteJobRows::InsertAttempt(const JobAttemptFence& f,
                                          int64_t claimed_at_ms) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO hub_job_attempts (job_id, attempt, agent_id, "
      "presence_generation, role_epoch, claimed_at_ms) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, f.job_id)
      .Bind(2, f.attempt)
      .Bind(3, f.agent_id)
      .Bind(4, f.presence_generation)
      .Bind(5, f.role_epoch == 0 ? std::optional<int64_t>()
                                 : std::optional<int64_t>(f.role_epoch))
      .Bind(6, claimed_at_ms);
  return stmt->Run();
}

absl::StatusOr<std::optional<JobAttemptFence>> SqliteJobRows::AttemptHolder(
    absl::string_view job_id, int64_t attempt) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT job_id, attempt, agent_id, presence_generation, role_epoch "
      "FROM hub_job_attempts WHERE job_id = ? AND attempt = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job_id).Bind(2, attempt);
  return rows::ReadOne<JobAttemptFence>(*stmt, [](const Stmt& s) {
    JobAttemptFence f;
    f.job_id = s.Text(0);
    f.attempt = s.Int(1);
    f.agent_id = s.Text(2);
    f.presence_generation = s.Int(3);
    f.role_epoch = s.OptInt(4).value_or(0);
    return f;
  });
}

absl::Status SqliteJobRows::InsertLateResult(absl::string_view job_id,
                                             const JobLateResult& late) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO hub_job_late_results (job_id, attempt, agent_id, "
      "result_json, error_json, reported_at_ms) VALUES (?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (job_id, attempt) DO NOTHING");
  if (!stmt.ok()) return stmt.status();
  std::optional<std::string> error;
  if (late.error.has_value()) error = JobErrorJson(*late.error);
  stmt->Bind(1, job_id)
      .Bind(2, late.attempt)
      .Bind(3, late.agent_id)
      .Bind(4, late.result_json)
      .Bind(5, error)
      .Bind(6, late.reported_at_ms);
  return stmt->Run();
}

absl::StatusOr<std::vector<JobLateResult>> SqliteJobRows::LateResults(
    absl::string_view job_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT attempt, agent_id, result_json, error_json, reported_at_ms "
      "FROM hub_job_late_results WHERE job_id = ? "
      "ORDER BY reported_at_ms, attempt");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, job_id);
  return rows::ReadAll<JobLateResult>(*stmt, [](const Stmt& s) {
    JobLateResult late;
    late.attempt = s.Int(0);
    late.agent_id = s.Text(1);
    late.result_json = s.OptText(2);
    if (std::optional<std::string> e = s.OptText(3)) {
      late.error = ParseJobErrorJson(*e);
    }
    late.reported_at_ms = s.Int(4);
    return late;
  });
}

absl::StatusOr<std::optional<JobWorkerRow>> SqliteJobRows::Worker(
    absl::string_view agent_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT presence_generation, status, project_id, capabilities_json, "
      "topics_json FROM agents WHERE agent_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id);
  return rows::ReadOne<JobWorkerRow>(*stmt, [](const Stmt& s) {
    JobWorkerRow w;
    w.presence_generation = s.Int(0);
    w.offline = s.Text(1) == "offline";
    w.project_id = s.OptText(2);
    w.capabilities = ParseStringListJson(s.Text(3));
    w.topics = ParseStringListJson(s.Text(4));
    return w;
  });
}

absl::StatusOr<std::vector<HeldRole>> SqliteJobRows::HeldRoles(
    absl::string_view agent_id, absl::string_view project_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT role_key_wire, epoch FROM role_registry WHERE "
      "holder_agent_id = ? AND project_id = ? AND state = 'active'");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id).Bind(2, project_id);
  return rows::ReadAll<HeldRole>(*stmt, [](const Stmt& s) {
    HeldRole r;
    r.role_key_wire = s.Text(0);
    r.epoch = s.Int(1);
    return r;
  });
}

absl::StatusOr<std::vector<JobRecord>> SqliteJobRows::Claimable(
    absl::string_view project_id, absl::string_view agent_id,
    const std::vector<std::string>& role_wires, absl::string_view topic,
    int64_t now_ms, int64_t limit) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS
      " FROM assign_jobs INDEXED BY idx_hub_jobs_queued "
      "WHERE project_id = ?1 AND hub_state = 'queued' "
      "AND (not_before_ms IS NULL OR not_before_ms <= ?2) "
      "AND (?3 = '' OR topic = ?3) "
      "AND ((worker_kind = 'agent' AND worker_agent = ?4) "
      "OR (worker_kind = 'role' AND worker_role_wire IN "
      "(SELECT value FROM json_each(?5))) OR worker_kind = 'pool') "
      "ORDER BY priority DESC, created_at_ms, job_id LIMIT ?6");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, project_id)
      .Bind(2, now_ms)
      .Bind(3, topic)
      .Bind(4, agent_id)
      .Bind(5, StringListJson(role_wires))
      .Bind(6, limit);
  return rows::ReadAll<JobRecord>(*stmt, ReadJob);
}

absl::StatusOr<std::vector<JobRecord>> SqliteJobRows::AttemptsOf(
    absl::string_view agent_id, int64_t generation) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS
      " FROM assign_jobs WHERE attempt_worker = ? AND attempt_generation = ? "
      "AND " HUB_JOB_LIVE " ORDER BY job_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id).Bind(2, generation);
  return rows::ReadAll<JobRecord>(*stmt, ReadJob);
}

absl::StatusOr<std::vector<JobRecord>> SqliteJobRows::OrphanedAttempts(
    int64_t limit) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS " FROM assign_jobs j WHERE " HUB_JOB_LIVE
      " AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = "
      "j.attempt_worker AND a.presence_generation = j.attempt_generation "
      "AND a.status <> 'offline') ORDER BY job_id LIMIT ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, limit);
  return rows::ReadAll<JobRecord>(*stmt, ReadJob);
}

absl::StatusOr<bool> SqliteJobRows::AnyDueDeadline(int64_t now_ms) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("SELECT 1 FROM assign_jobs WHERE " HUB_JOB_LIVE
                    " AND deadline_ms <= ? LIMIT 1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms);
  absl::StatusOr<std::optional<int64_t>> row =
      rows::ReadOne<int64_t>(*stmt, [](const Stmt& s) { return s.Int(0); });
  if (!row.ok()) return row.status();
  return row->has_value();
}

absl::StatusOr<std::vector<JobRecord>> SqliteJobRows::DueDeadlines(
    int64_t now_ms, int64_t limit) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS " FROM assign_jobs WHERE " HUB_JOB_LIVE
      " AND deadline_ms <= ? ORDER BY deadline_ms LIMIT ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms).Bind(2, limit);
  return rows::ReadAll<JobRecord>(*stmt, ReadJob);
}

absl::StatusOr<std::vector<JobRecord>> SqliteJobRows::Page(const JobFilter& f) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_JOB_COLUMNS
      " FROM assign_jobs WHERE "
      "(?1 = '[]' OR project_id IN (SELECT value FROM json_each(?1))) "
      "AND (?2 = '' OR supervisor_agent = ?2) "
      "AND (?3 = '' OR worker_agent = ?3 OR attempt_worker = ?3) "
      "AND (?4 = '[]' OR COALESCE(hub_state, status) IN "
      "(SELECT value FROM json_each(?4))) "
      "AND (?5 = '' OR trace_id = ?5) AND (?6 = '' OR correlation_id = ?6) "
      "AND (?7 IS NULL OR deadline_ms <= ?7) "
      "AND (?8 IS NULL OR updated_at_ms < ?8 OR "
      "(updated_at_ms = ?8 AND job_id < ?9)) "
      "ORDER BY updated_at_ms DESC, job_id DESC LIMIT ?10");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, StringListJson(f.project_ids))
      .Bind(2, f.supervisor_agent)
      .Bind(3, f.worker_agent)
      .Bind(4, StatesJson(f.states))
      .Bind(5, f.trace_id)
      .Bind(6, f.correlation_id)
      .Bind(7, f.deadline_before_ms)
      .Bind(8, f.after_updated_at_ms)
      .Bind(9, f.after_job_id)
      .Bind(10, f.limit);
  return rows::ReadAll<JobRecord>(*stmt, ReadJob);
}

}  // namespace hub::storage
