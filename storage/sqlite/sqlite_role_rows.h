// SQLite's statements for RoleStore (storage/role_ops.h): one transaction's
// reads and writes of role_registry, role_candidates, hub_closed_scopes and
// a closed scope's backlog. SQLite's one writer holds the whole database
// for a transaction, so these take no lock of their own.
#ifndef HUB_STORAGE_SQLITE_SQLITE_ROLE_ROWS_H_
#define HUB_STORAGE_SQLITE_SQLITE_ROLE_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/role_ops.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

class SqliteRoleRows final : public RoleRows {
 public:
  // `store` keeps the pending inbox counts a dead letter changes.
  SqliteRoleRows(Connection& conn, SqliteStore& store)
      : conn_(conn), store_(store) {}

  absl::Status LockScope(absl::string_view wire, bool exclusive) override {
    (void)wire;
    (void)exclusive;
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<RoleRecord>> Load(absl::string_view wire,
                                                 RowLock lock) override;
  absl::StatusOr<std::optional<RoleRecord>> LockScopeAndLoad(
      absl::string_view wire) override {
    return Load(wire, RowLock::kUpdate);
  }
  absl::StatusOr<std::optional<RoleRecord>> Insert(
      const RoleRecord& first) override;
  absl::StatusOr<std::optional<RoleRecord>> UpdateIfFence(
      const RoleRecord& next, const roles::RoleFence& fence) override;
  absl::StatusOr<bool> Delete(absl::string_view wire) override;
  absl::StatusOr<std::vector<RoleRecord>> All(RowLock lock) override;
  absl::StatusOr<std::vector<RoleRecord>> Page(const RoleFilter& f) override;
  absl::StatusOr<std::vector<RoleRecord>> WithExpiredHolder(
      int64_t now_ms) override;
  absl::StatusOr<std::vector<MessageRecord>> Backlogs(int64_t now_ms) override;

  absl::StatusOr<std::optional<CandidateRecord>> LoadCandidate(
      absl::string_view wire, absl::string_view agent_id,
      RowLock lock) override;
  absl::StatusOr<std::optional<CandidateRecord>> MergeCandidate(
      const roles::CandidateMerge& merge) override;
  absl::StatusOr<std::optional<CandidateRecord>> UpdateProbe(
      const CandidateRecord& c) override;
  absl::StatusOr<bool> DeleteCandidate(absl::string_view wire,
                                       absl::string_view agent_id) override;
  absl::StatusOr<int64_t> DeleteCandidates(absl::string_view wire) override;
  absl::StatusOr<std::vector<CandidateRecord>> Candidates(
      absl::string_view wire) override;
  absl::StatusOr<std::vector<CandidateRecord>> CandidatePage(
      const CandidatePageQuery& q,
      const CandidatePageQuery::Key& start) override;

  absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
      absl::string_view wire, absl::string_view project_id,
      absl::string_view scope_id) override;
  absl::Status InsertClosedScope(const ClosedScopeRecord& closed) override;
  absl::StatusOr<std::vector<ClosedScopeRecord>> ClosedScopePage(
      const ClosedScopeFilter& f) override;

  absl::StatusOr<std::vector<MessageRecord>> ScopeBacklog(
      absl::string_view wire) override;
  // SqliteMessageRows::DeadLetterIfStatus, which adjusts the pending inbox
  // counts itself, so Settled has nothing left to do.
  absl::StatusOr<std::optional<bool>> DeadLetter(
      const MessageRecord& m, absl::string_view reason, int64_t now_ms,
      const std::string& last_error) override;
  absl::Status Settled(const std::vector<std::string>& ids) override {
    (void)ids;
    return absl::OkStatus();
  }
  void Undone() override;

 private:
  Connection& conn_;
  SqliteStore& store_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_ROLE_ROWS_H_
