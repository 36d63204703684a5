// JobStore over one engine, written once for SQLite and PostgreSQL: each
// method runs job_ops.h's operation in one of the engine's reads or writes
// over the engine's JobRows. What differs between the engines is only their
// statements (the Rows class).
#ifndef HUB_STORAGE_JOB_STORE_CALLS_H_
#define HUB_STORAGE_JOB_STORE_CALLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/job_ops.h"
#include "storage/job_store.h"

namespace hub::storage {

// `Engine` (a friend: its Read and Write are private) runs functions of its
// Connection; `Rows` is its JobRows over one Connection.
template <typename Engine, typename Rows>
class JobCalls final : public JobStore {
 public:
  explicit JobCalls(Engine& engine) : engine_(engine) {}

  absl::StatusOr<JobOutcome> CreateJob(const JobRecord& job) override {
    return Write<JobOutcome>(
        [&](Rows& rows) { return CreateJobWith(rows, job); });
  }
  absl::StatusOr<JobOutcome> ClaimJob(const JobClaim& claim) override {
    return Write<JobOutcome>(
        [&](Rows& rows) { return ClaimJobWith(rows, claim); });
  }
  absl::StatusOr<JobOutcome> HeartbeatJob(
      const JobAttemptFence& fence,
      const std::optional<std::string>& progress_json,
      int64_t now_ms) override {
    return Write<JobOutcome>([&](Rows& rows) {
      return HeartbeatJobWith(rows, fence, progress_json, now_ms);
    });
  }
  absl::StatusOr<JobOutcome> CompleteJob(const JobAttemptFence& fence,
                                         const std::string& result_json,
                                         int64_t now_ms) override {
    return Write<JobOutcome>([&](Rows& rows) {
      return CompleteJobWith(rows, fence, result_json, now_ms);
    });
  }
  absl::StatusOr<JobOutcome> FailJob(const JobAttemptFence& fence,
                                     const JobFailure& failure) override {
    return Write<JobOutcome>(
        [&](Rows& rows) { return FailJobWith(rows, fence, failure); });
  }
  absl::StatusOr<std::optional<JobRecord>> GetJob(
      absl::string_view job_id) override {
    return Read<std::optional<JobRecord>>(
        [&](Rows& rows) { return GetJobWith(rows, job_id); });
  }
  absl::StatusOr<std::vector<JobRecord>> ListJobs(
      const JobFilter& filter) override {
    return Read<std::vector<JobRecord>>(
        [&](Rows& rows) { return ListJobsWith(rows, filter); });
  }
  absl::StatusOr<JobOutcome> CancelJob(absl::string_view job_id,
                                       absl::string_view reason,
                                       int64_t now_ms) override {
    return Write<JobOutcome>([&](Rows& rows) {
      return CancelJobWith(rows, job_id, reason, now_ms);
    });
  }
  absl::StatusOr<JobOutcome> AddJobDependency(
      absl::string_view job_id, const std::vector<std::string>& parent_ids,
      int64_t now_ms) override {
    return Write<JobOutcome>([&](Rows& rows) {
      return AddJobDependencyWith(rows, job_id, parent_ids, now_ms);
    });
  }
  absl::StatusOr<JobOutcome> RetryJob(absl::string_view job_id,
                                      int64_t now_ms) override {
    return Write<JobOutcome>(
        [&](Rows& rows) { return RetryJobWith(rows, job_id, now_ms); });
  }
  absl::StatusOr<std::vector<JobRecord>> EndAttemptsOf(
      absl::string_view agent_id, int64_t generation, int64_t now_ms) override {
    return Write<std::vector<JobRecord>>([&](Rows& rows) {
      return EndAttemptsOfWith(rows, agent_id, generation, now_ms);
    });
  }
  absl::StatusOr<std::vector<JobRecord>> EndOrphanedAttempts(
      int64_t now_ms, int64_t limit) override {
    return Write<std::vector<JobRecord>>([&](Rows& rows) {
      return EndOrphanedAttemptsWith(rows, now_ms, limit);
    });
  }
  // A read first: the ticker calls this often, and most calls find nothing
  // due, which then costs no write.
  absl::StatusOr<std::vector<JobRecord>> SweepJobDeadlines(
      int64_t now_ms, int64_t limit) override {
    absl::StatusOr<bool> due =
        Read<bool>([&](Rows& rows) { return rows.AnyDueDeadline(now_ms); });
    if (!due.ok()) return due.status();
    if (!*due) return std::vector<JobRecord>();
    return Write<std::vector<JobRecord>>(
        [&](Rows& rows) { return SweepJobDeadlinesWith(rows, now_ms, limit); });
  }

 private:
  template <typename T, typename Fn>
  absl::StatusOr<T> Read(Fn fn) {
    return engine_.template Read<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn);
      return fn(rows);
    });
  }
  template <typename T, typename Fn>
  absl::StatusOr<T> Write(Fn fn) {
    return engine_.template Write<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn);
      return fn(rows);
    });
  }

  Engine& engine_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_JOB_STORE_CALLS_H_
