// SQLite's statements for JobStore (storage/job_ops.h): one transaction's
// reads and writes of assign_jobs, hub_job_dependencies and
// hub_job_late_results. Writes run on the single writer, so no row needs a
// lock of its own.
#ifndef HUB_STORAGE_SQLITE_SQLITE_JOB_ROWS_H_
#define HUB_STORAGE_SQLITE_SQLITE_JOB_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/job_ops.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage {

class SqliteJobRows final : public JobRows {
 public:
  explicit SqliteJobRows(Connection& conn) : conn_(conn) {}

  absl::StatusOr<std::optional<JobRecord>> Load(absl::string_view job_id,
                                                bool lock) override;
  absl::StatusOr<std::optional<JobRecord>> FindByIdempotencyKey(
      absl::string_view project_id, absl::string_view key) override;
  absl::Status Insert(const JobRecord& job) override;
  absl::StatusOr<bool> UpdateFenced(const JobRecord& next,
                                    const JobRowFence& fence) override;
  absl::Status InsertDependency(absl::string_view job_id,
                                absl::string_view parent_id) override;
  absl::StatusOr<std::vector<JobParent>> Parents(
      absl::string_view job_id) override;
  absl::StatusOr<std::vector<std::string>> Children(
      absl::string_view parent_id) override;
  absl::Status InsertAttempt(const JobAttemptFence& fence,
                             int64_t claimed_at_ms) override;
  absl::StatusOr<std::optional<JobAttemptFence>> AttemptHolder(
      absl::string_view job_id, int64_t attempt) override;
  absl::Status InsertLateResult(absl::string_view job_id,
                                const JobLateResult& late) override;
  absl::StatusOr<std::vector<JobLateResult>> LateResults(
      absl::string_view job_id) override;
  absl::StatusOr<std::optional<JobWorkerRow>> Worker(
      absl::string_view agent_id) override;
  absl::StatusOr<std::vector<HeldRole>> HeldRoles(
      absl::string_view agent_id, absl::string_view project_id) override;
  absl::StatusOr<std::vector<JobRecord>> Claimable(
      absl::string_view project_id, absl::string_view agent_id,
      const std::vector<std::string>& role_wires, absl::string_view topic,
      int64_t now_ms, int64_t limit) override;
  absl::StatusOr<std::vector<JobRecord>> AttemptsOf(
      absl::string_view agent_id, int64_t generation) override;
  absl::StatusOr<std::vector<JobRecord>> OrphanedAttempts(
      int64_t limit) override;
  absl::StatusOr<bool> AnyDueDeadline(int64_t now_ms) override;
  absl::StatusOr<std::vector<JobRecord>> DueDeadlines(int64_t now_ms,
                                                      int64_t limit) override;
  absl::StatusOr<std::vector<JobRecord>> Page(const JobFilter& filter) override;

 private:
  Connection& conn_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_JOB_ROWS_H_
