// RoleStore over one engine, written once for SQLite and PostgreSQL: each
// method runs role_ops.h's operation in one of the engine's reads or writes
// over the engine's RoleRows. What differs between the engines is their
// statements (the Rows class) and what PostgreSQL adds in its subclass
// (storage/pg/pg_store_roles.cc): a compare-and-set that names its whole
// fence is one statement, pipelined with its group's others; the role
// change log; the candidates of several roles in one statement.
#ifndef HUB_STORAGE_ROLE_STORE_CALLS_H_
#define HUB_STORAGE_ROLE_STORE_CALLS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/role_ops.h"
#include "storage/role_store.h"
#include "storage/role_updates.h"

namespace hub::storage {

// `Engine` (a friend: its Read, Write and WriteAsync are private) runs
// functions of its Connection; `Rows` is its RoleRows over one Connection
// of that engine. `new_id` draws the activation ids of reservations and
// recovery.
template <typename Engine, typename Rows>
class RoleCalls : public RoleStore {
 public:
  RoleCalls(Engine& engine, std::function<std::string()> new_id)
      : engine_(engine), new_id_(std::move(new_id)) {}

  absl::StatusOr<ScopeCloseResult> CloseLeadScope(
      const ScopeClose& close) override {
    return Write<ScopeCloseResult>(
        [&](Rows& rows) { return CloseScopeWith(rows, close); });
  }
  absl::StatusOr<std::optional<ClosedScopeRecord>> GetClosedScope(
      absl::string_view wire) override {
    return Read<std::optional<ClosedScopeRecord>>(
        [&](Rows& rows) { return rows.LoadClosedScope(wire, "", ""); });
  }
  absl::StatusOr<std::vector<ClosedScopeRecord>> ListClosedScopes(
      const ClosedScopeFilter& filter) override {
    return Read<std::vector<ClosedScopeRecord>>(
        [&](Rows& rows) { return rows.ClosedScopePage(filter); });
  }

  absl::StatusOr<RoleWrite> ReserveRole(const RoleReservation& r) override {
    return Write<RoleWrite>(
        [&](Rows& rows) { return ReserveRoleWith(rows, r, new_id_); });
  }
  absl::StatusOr<RoleWrite> CompareAndSetRole(const RoleCas& cas) override {
    return Write<RoleWrite>(
        [&](Rows& rows) { return CompareAndSetRoleWith(rows, cas); });
  }
  void ReserveRoleAsync(const RoleReservation& r,
                        Callback<RoleWrite> done) override {
    engine_.template WriteAsync<RoleWrite>(
        [this, r](auto& conn) {
          Rows rows(conn, engine_);
          return ReserveRoleWith(rows, r, new_id_);
        },
        std::move(done));
  }
  void CompareAndSetRoleAsync(const RoleCas& cas,
                              Callback<RoleWrite> done) override {
    engine_.template WriteAsync<RoleWrite>(
        [this, cas](auto& conn) {
          Rows rows(conn, engine_);
          return CompareAndSetRoleWith(rows, cas);
        },
        std::move(done));
  }
  absl::StatusOr<RecoveryResult> RecoverRoles(int64_t now_ms) override {
    return Write<RecoveryResult>(
        [&](Rows& rows) { return RecoverRolesWith(rows, now_ms, new_id_); });
  }
  absl::StatusOr<RoleOutcome> DeleteRole(absl::string_view wire) override {
    return Write<RoleOutcome>(
        [&](Rows& rows) { return DeleteRoleWith(rows, wire); });
  }
  absl::StatusOr<RoleRecord> GetRole(absl::string_view wire) override {
    return Read<RoleRecord>(
        [&](Rows& rows) { return GetRoleWith(rows, wire); });
  }
  absl::StatusOr<std::vector<RoleRecord>> ListRoles(
      const RoleFilter& filter) override {
    return Read<std::vector<RoleRecord>>(
        [&](Rows& rows) { return rows.Page(filter); });
  }
  absl::StatusOr<std::vector<RoleRecord>> ListRolesWithExpiredHolder(
      int64_t now_ms) override {
    return Read<std::vector<RoleRecord>>(
        [&](Rows& rows) { return rows.WithExpiredHolder(now_ms); });
  }

  absl::StatusOr<CandidateRecord> UpsertCandidate(
      const CandidateUpsert& upsert) override {
    return Write<CandidateRecord>(
        [&](Rows& rows) { return UpsertCandidateWith(rows, upsert); });
  }
  absl::StatusOr<bool> DeleteCandidate(absl::string_view wire,
                                       absl::string_view agent_id) override {
    return Write<bool>(
        [&](Rows& rows) { return rows.DeleteCandidate(wire, agent_id); });
  }
  absl::StatusOr<CandidateRecord> UpdateCandidateReachability(
      const ReachabilityUpdate& update) override {
    return Write<CandidateRecord>(
        [&](Rows& rows) { return UpdateReachabilityWith(rows, update); });
  }
  absl::StatusOr<std::vector<CandidateRecord>> ListCandidates(
      absl::string_view wire) override {
    return Read<std::vector<CandidateRecord>>(
        [&](Rows& rows) { return rows.Candidates(wire); });
  }
  // No read when no row can follow the query's key.
  absl::StatusOr<std::vector<CandidateRecord>> ListCandidatesPage(
      const CandidatePageQuery& query) override {
    const std::optional<CandidatePageQuery::Key> start =
        roles::CandidatePageStart(query);
    if (!start.has_value()) return std::vector<CandidateRecord>();
    return Read<std::vector<CandidateRecord>>(
        [&](Rows& rows) { return rows.CandidatePage(query, *start); });
  }

 protected:
  Engine& engine() { return engine_; }

  template <typename T, typename Fn>
  absl::StatusOr<T> Read(Fn fn) {
    return engine_.template Read<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, engine_);
      return fn(rows);
    });
  }
  template <typename T, typename Fn>
  absl::StatusOr<T> Write(Fn fn) {
    return engine_.template Write<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, engine_);
      return fn(rows);
    });
  }

 private:
  Engine& engine_;
  const std::function<std::string()> new_id_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_ROLE_STORE_CALLS_H_
