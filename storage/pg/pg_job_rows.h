// PostgreSQL's statements for JobStore (storage/job_ops.h): one
// transaction's reads and writes of assign_jobs, hub_job_dependencies and
// hub_job_late_results, and the agent and role rows a claim reads. Another
// hub may write the same jobs at any moment: the rows a decision rests on
// are locked (FOR UPDATE) until the transaction ends, the queues a claim or
// the deadline sweep walks skip rows another transaction holds (SKIP
// LOCKED), and every write of a job carries its fence in the WHERE clause of
// its UPDATE and checks the changed-row count. Not responsible for any
// decision: job_ops.cc makes them, the same on both engines.
#ifndef HUB_STORAGE_PG_PG_JOB_ROWS_H_
#define HUB_STORAGE_PG_PG_JOB_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/job.h"
#include "storage/job_ops.h"
#include "storage/job_store.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

class PgJobRows final : public JobRows {
 public:
  explicit PgJobRows(Connection& conn) : conn_(conn) {}

  absl::StatusOr<std::optional<JobRecord>> Load(absl::string_view job_id,
                                                bool lock) override;
  // Takes a transaction-scoped advisory lock on the (project, key) pair
  // first, so two hubs creating a job with one key serialize: the second
  // waits for the first's commit and then finds its job, instead of failing
  // on idx_hub_jobs_idempotency.
  absl::StatusOr<std::optional<JobRecord>> FindByIdempotencyKey(
      absl::string_view project_id, absl::string_view key) override;
  absl::Status Insert(const JobRecord& job) override;
  // One UPDATE whose WHERE clause is the whole fence; a row with no
  // hub_state (one triflux wrote) matches the fence's state by its status.
  absl::StatusOr<bool> UpdateFenced(const JobRecord& next,
                                    const JobRowFence& fence) override;

  // A dependency stored already is left as it is.
  absl::Status InsertDependency(absl::string_view job_id,
                                absl::string_view parent_id) override;
  absl::StatusOr<std::vector<JobParent>> Parents(
      absl::string_view job_id) override;
  absl::StatusOr<std::vector<std::string>> Children(
      absl::string_view parent_id) override;

  // The first result an attempt reported is kept; a later one for the same
  // attempt changes nothing.
  absl::Status InsertLateResult(absl::string_view job_id,
                                const JobLateResult& late) override;
  absl::StatusOr<std::vector<JobLateResult>> LateResults(
      absl::string_view job_id) override;

  absl::StatusOr<std::optional<JobWorkerRow>> Worker(
      absl::string_view agent_id) override;
  absl::StatusOr<std::vector<HeldRole>> HeldRoles(
      absl::string_view agent_id, absl::string_view project_id) override;
  // Through idx_hub_jobs_queued (pg_plans_test checks the plan).
  absl::StatusOr<std::vector<JobRecord>> Claimable(
      absl::string_view project_id, absl::string_view agent_id,
      const std::vector<std::string>& role_wires, absl::string_view topic,
      int64_t now_ms, int64_t limit) override;
  // Locked in job id order, the order of any other writer's locks on them.
  absl::StatusOr<std::vector<JobRecord>> AttemptsOf(
      absl::string_view agent_id, int64_t generation) override;
  absl::StatusOr<std::vector<JobRecord>> OrphanedAttempts(
      int64_t limit) override;
  absl::StatusOr<bool> AnyDueDeadline(int64_t now_ms) override;
  absl::Status InsertAttempt(const JobAttemptFence& fence,
                             int64_t claimed_at_ms) override;
  absl::StatusOr<std::optional<JobAttemptFence>> AttemptHolder(
      absl::string_view job_id, int64_t attempt) override;
  absl::StatusOr<std::vector<JobRecord>> DueDeadlines(int64_t now_ms,
                                                      int64_t limit) override;
  // One prepared statement whatever the filter: an unset field binds NULL.
  absl::StatusOr<std::vector<JobRecord>> Page(const JobFilter& filter) override;

 private:
  Connection& conn_;
};

// The statements whose speed depends on the partial index the planner
// picks (pg_plans_test pins them): Claimable's ($1 project, $2 now, $3
// topic or '', $4 agent, $5 role wires, $6 limit), AttemptsOf's ($1 agent,
// $2 generation) and DueDeadlines' ($1 now, $2 limit).
namespace sql {
extern const char kClaimableJobsSql[];
extern const char kJobAttemptsOfSql[];
extern const char kDueJobDeadlinesSql[];
}  // namespace sql

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_JOB_ROWS_H_
