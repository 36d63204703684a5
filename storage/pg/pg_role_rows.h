// PostgreSQL's statements for RoleStore (storage/role_ops.h): one
// transaction's reads and writes of role_registry, role_candidates,
// hub_closed_scopes and a closed scope's backlog, under the locks
// role_ops.h orders. Another hub may write the same rows at any moment:
// every lock is held until the transaction ends, and every fence is in the
// WHERE clause of its UPDATE. See docs/design/postgres.md, "Roles,
// candidates and closed scopes".
#ifndef HUB_STORAGE_PG_PG_ROLE_ROWS_H_
#define HUB_STORAGE_PG_PG_ROLE_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/pg/pg_conn.h"
#include "storage/role_ops.h"

namespace hub::storage::pg {

class PostgresStore;

class PgRoleRows final : public RoleRows {
 public:
  explicit PgRoleRows(Connection& conn) : conn_(conn) {}
  // The form storage/role_store_calls.h constructs; the store adds nothing.
  PgRoleRows(Connection& conn, PostgresStore& store) : conn_(conn) {
    (void)store;
  }

  // The one-statement compare-and-set of a CAS that names every guard
  // (NamesEveryGuard): the scope's lock, then `cas.patch` applied by an
  // UPDATE whose WHERE clause carries the whole fence. PostgresStore
  // pipelines it with its group's neighbours and reads its answer with
  // CasedRole; CasIfFence runs it here.
  static Statement CasStatement(const RoleCas& cas);
  static CasAnswer CasedRole(absl::StatusOr<Result> answer);
  CasAnswer CasIfFence(const RoleCas& cas);

  // Transaction-scoped advisory locks on a 64-bit hash of the wire's
  // ScopeWireKey; a collision only makes two scopes wait for each other.
  absl::Status LockScope(absl::string_view wire, bool exclusive) override;
  // One statement (one round trip): the scope's lock is a filter the
  // executor evaluates once before it reads the role's row, so it is taken
  // first, and taken when there is no row.
  absl::StatusOr<std::optional<RoleRecord>> LockScopeAndLoad(
      absl::string_view wire) override;

  absl::StatusOr<std::optional<RoleRecord>> Load(absl::string_view wire,
                                                 RowLock lock) override;
  // ON CONFLICT DO NOTHING: another hub's first insert of the role (or of
  // its project, kind and scope) makes this one wait, then do nothing.
  absl::StatusOr<std::optional<RoleRecord>> Insert(
      const RoleRecord& first) override;
  absl::StatusOr<std::optional<RoleRecord>> UpdateIfFence(
      const RoleRecord& next, const roles::RoleFence& fence) override;
  // Candidates go with it (ON DELETE CASCADE), after the role row: the
  // lock order of CloseLeadScope.
  absl::StatusOr<bool> Delete(absl::string_view wire) override;
  // By wire in byte order ("C" collation, whatever the database's):
  // recovery locks them in this one order.
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
  // RoleStore::ListCandidatesOfRoles in one statement.
  absl::StatusOr<std::vector<CandidateRecord>> CandidatesOf(
      const std::vector<std::string>& wires);

  absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
      absl::string_view wire, absl::string_view project_id,
      absl::string_view scope_id) override;
  absl::Status InsertClosedScope(const ClosedScopeRecord& closed) override;
  absl::StatusOr<std::vector<ClosedScopeRecord>> ClosedScopePage(
      const ClosedScopeFilter& f) override;

  // Locked in id order (the order of any other writer's message locks),
  // then sorted into delivery order.
  absl::StatusOr<std::vector<MessageRecord>> ScopeBacklog(
      absl::string_view wire) override;
  absl::StatusOr<std::optional<bool>> DeadLetter(
      const MessageRecord& m, absl::string_view reason, int64_t now_ms,
      const std::string& last_error) override;
  // The inbox counts are rows the writer keeps (SettleRowsOf), undone with
  // the transaction: Undone has nothing to drop.
  absl::Status Settled(const std::vector<std::string>& ids) override;
  void Undone() override {}

 private:
  Connection& conn_;
};

// The text LockScope hashes into its advisory lock's key.
std::string ScopeWireKey(absl::string_view wire);

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_ROLE_ROWS_H_
