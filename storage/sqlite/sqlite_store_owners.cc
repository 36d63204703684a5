// SqliteStore: agent owners (hub_agent_owners). The first principal that
// claims an agent id keeps it; see docs/design/auth.md.
#include <string>
#include <utility>
#include <vector>

#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

absl::StatusOr<std::string> SqliteStore::ClaimAgentOwner(
    absl::string_view agent_id, absl::string_view principal, int64_t now_ms) {
  const std::string id(agent_id);
  const std::string who(principal);
  return Write<std::string>(
      [id, who, now_ms](Connection& conn) -> absl::StatusOr<std::string> {
        absl::StatusOr<Stmt> insert = conn.Prepare(
            "INSERT INTO hub_agent_owners(agent_id, principal, claimed_at_ms) "
            "VALUES (?, ?, ?) ON CONFLICT(agent_id) DO NOTHING");
        if (!insert.ok()) return insert.status();
        insert->Bind(1, id).Bind(2, who).Bind(3, now_ms);
        if (absl::Status s = insert->Run(); !s.ok()) return s;
        absl::StatusOr<Stmt> select = conn.Prepare(
            "SELECT principal FROM hub_agent_owners WHERE agent_id = ?");
        if (!select.ok()) return select.status();
        select->Bind(1, id);
        absl::StatusOr<bool> row = select->Step();
        if (!row.ok()) return row.status();
        if (!*row) return absl::InternalError("agent owner row vanished");
        return select->Text(0);
      });
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SqliteStore::ListAgentOwners() {
  using Result = std::vector<std::pair<std::string, std::string>>;
  return Read<Result>([](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "SELECT agent_id, principal FROM hub_agent_owners ORDER BY agent_id");
    if (!stmt.ok()) return stmt.status();
    Result out;
    while (true) {
      absl::StatusOr<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      out.emplace_back(stmt->Text(0), stmt->Text(1));
    }
    return out;
  });
}

}  // namespace hub::storage
