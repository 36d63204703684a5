// SqliteStore: checkpoints of leases renewed in memory.
#include <vector>

#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

absl::StatusOr<std::vector<bool>> SqliteStore::CheckpointLeases(
    const std::vector<LeaseCheckpoint>& leases) {
  using Result = std::vector<bool>;
  if (leases.empty()) return Result();
  return Write<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    Result written;
    written.reserve(leases.size());
    for (const LeaseCheckpoint& lease : leases) {
      // Fence: the generation that renewed the lease must still own the row,
      // and an agent that went offline meanwhile stays offline.
      absl::StatusOr<Stmt> stmt = conn.Prepare(
          "UPDATE agents SET last_seen_ms = ?3, lease_expires_ms = ?4, "
          "lease_ttl_ms = ?5 "
          "WHERE agent_id = ?1 AND presence_generation = ?2 "
          "AND status <> 'offline'");
      if (!stmt.ok()) return stmt.status();
      stmt->Bind(1, lease.agent_id)
          .Bind(2, lease.presence_generation)
          .Bind(3, lease.last_seen_ms)
          .Bind(4, lease.lease_expires_ms)
          .Bind(5, lease.lease_ttl_ms);
      if (absl::Status s = stmt->Run(); !s.ok()) return s;
      written.push_back(conn.Changes() == 1);
    }
    return written;
  });
}

}  // namespace hub::storage
