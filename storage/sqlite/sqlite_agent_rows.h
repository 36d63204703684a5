// SQLite's statements for AgentStore (storage/agent_ops.h): one
// transaction's reads and writes of agents and hub_agent_owners. A SQLite
// database belongs to one hub, so there is never a seat.
#ifndef HUB_STORAGE_SQLITE_SQLITE_AGENT_ROWS_H_
#define HUB_STORAGE_SQLITE_SQLITE_AGENT_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/agent_ops.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage {

class SqliteAgentRows final : public AgentRows {
 public:
  // `seat` is ignored: no hub shares a SQLite database.
  SqliteAgentRows(Connection& conn, const std::optional<HubSeat>& seat)
      : conn_(conn) {
    (void)seat;
  }

  const std::optional<HubSeat>& seat() const override { return no_seat_; }
  absl::StatusOr<std::optional<AgentRecord>> Load(
      absl::string_view agent_id) override;
  absl::StatusOr<std::optional<AgentRecord>> Upsert(
      const AgentRegistration& r) override;
  absl::StatusOr<std::optional<AgentRecord>> Refresh(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms, int64_t lease_ttl_ms) override;
  absl::StatusOr<std::optional<AgentRecord>> SetStatus(
      absl::string_view agent_id, std::optional<int64_t> generation,
      AgentStatus status) override;
  absl::StatusOr<std::optional<AgentRecord>> Claim(
      absl::string_view agent_id, int64_t generation, int64_t now_ms,
      int64_t lease_ttl_ms) override {
    return Refresh(agent_id, generation, now_ms, lease_ttl_ms);
  }
  absl::StatusOr<bool> Release(const LeaseCheckpoint& last) override {
    (void)last;
    return true;
  }
  absl::StatusOr<std::vector<PresenceTransition>> Sweep(
      int64_t now_ms, int64_t offline_after_ms) override;
  absl::StatusOr<std::vector<bool>> Checkpoint(
      const std::vector<LeaseCheckpoint>& leases) override;
  absl::StatusOr<std::vector<AgentRecord>> All() override;
  absl::StatusOr<std::vector<AgentRecord>> Page(
      const AgentPageQuery& q) override;
  absl::Status InsertOwner(absl::string_view agent_id,
                           absl::string_view principal,
                           int64_t now_ms) override;
  absl::StatusOr<std::optional<std::string>> Owner(
      absl::string_view agent_id) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Owners()
      override;

 private:
  Connection& conn_;
  const std::optional<HubSeat> no_seat_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_AGENT_ROWS_H_
