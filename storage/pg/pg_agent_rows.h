// PostgreSQL's statements for AgentStore (storage/agent_ops.h): one
// transaction's reads and writes of agents and hub_agent_owners. With a
// seat (this hub's membership, once joined), every presence write is also
// fenced by the seat being live (SeatLiveSql) and names it as the
// presence's holder.
#ifndef HUB_STORAGE_PG_PG_AGENT_ROWS_H_
#define HUB_STORAGE_PG_PG_AGENT_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/agent_ops.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

class PgAgentRows final : public AgentRows {
 public:
  PgAgentRows(Connection& conn, std::optional<HubSeat> seat)
      : conn_(conn), seat_(std::move(seat)) {}

  // The upsert of Upsert(), as one statement: PostgresStore pipelines it
  // when nothing else runs first (a registration without an owner to
  // claim), and reads its answer with UpsertedAgent.
  static Statement UpsertStatement(const AgentRegistration& r,
                                   const std::optional<HubSeat>& seat);
  static absl::StatusOr<std::optional<AgentRecord>> UpsertedAgent(
      absl::StatusOr<Result> answer);

  const std::optional<HubSeat>& seat() const override { return seat_; }
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
      int64_t lease_ttl_ms) override;
  absl::StatusOr<bool> Release(const LeaseCheckpoint& last) override;
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
  const std::optional<HubSeat> seat_;
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_AGENT_ROWS_H_
