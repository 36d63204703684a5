// StoreSnapshot: the rows of a hub's database the chaos checks read
// (agents, message_inbox, role_registry), as of one moment, whatever the
// engine. The Ledger compares it with what the clients saw acknowledged;
// the readers below fill it from SQLite or PostgreSQL (same table and
// column names in both schemas). Not responsible for deciding anything.
#ifndef TOOLS_CHAOS_STORE_SNAPSHOT_H_
#define TOOLS_CHAOS_STORE_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace hub::storage::pg {
class Connection;
}

namespace hub::chaos {

struct StoredRole {
  std::string project_id;
  std::string role_kind;
  std::string scope_id;
  std::string state;
  std::string holder;  // "" when NULL
  int64_t epoch = 0;
  int64_t version = 0;
};

struct StoreSnapshot {
  // agent_id -> presence_generation.
  std::map<std::string, int64_t> generations;
  // (message_id, agent_id) -> whether acked_at_ms is set.
  std::map<std::pair<std::string, std::string>, bool> inbox;
  // role_key_wire -> its row.
  std::map<std::string, StoredRole> roles;
};

// Reads the SQLite database at `path`, opened read-write as hubd opens it
// (which replays a WAL a crash left). REQUIRES: no hubd holds the file.
absl::StatusOr<StoreSnapshot> ReadSqliteSnapshot(const std::string& path);

// Reads the PostgreSQL database `conn` is connected to in one REPEATABLE
// READ transaction, so the three tables are one consistent moment while
// hubs keep writing.
absl::StatusOr<StoreSnapshot> ReadPostgresSnapshot(
    storage::pg::Connection* conn);

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_STORE_SNAPSHOT_H_
