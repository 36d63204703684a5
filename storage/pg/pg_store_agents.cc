// PostgresStore: agents. IN PROGRESS: placeholders to be replaced.
#include <utility>

#include "status/status.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {
namespace {

absl::Status NotYet() {
  return ReasonError(absl::StatusCode::kUnimplemented, "NOT_YET",
                     "not implemented yet");
}

}  // namespace

absl::StatusOr<AgentRecord> PostgresStore::RegisterAgent(
    const AgentRegistration& registration) {
  return NotYet();
}

void PostgresStore::RegisterAgentAsync(const AgentRegistration& registration,
                                       Callback<AgentRecord> done) {
  std::move(done)(NotYet());
}

absl::StatusOr<PresenceWrite> PostgresStore::RefreshLeaseForGeneration(
    absl::string_view agent_id, std::optional<int64_t> generation,
    int64_t now_ms, int64_t lease_ttl_ms) {
  return NotYet();
}

absl::StatusOr<PresenceWrite> PostgresStore::SetAgentStatusForGeneration(
    absl::string_view agent_id, std::optional<int64_t> generation,
    absl::string_view status) {
  return NotYet();
}

absl::StatusOr<std::vector<PresenceTransition>>
PostgresStore::SweepAgentPresence(int64_t now_ms, int64_t offline_after_ms) {
  return NotYet();
}

absl::StatusOr<std::vector<bool>> PostgresStore::CheckpointLeases(
    const std::vector<LeaseCheckpoint>& leases) {
  return NotYet();
}

absl::StatusOr<AgentRecord> PostgresStore::GetAgent(
    absl::string_view agent_id) {
  return NotYet();
}

absl::StatusOr<std::vector<AgentRecord>> PostgresStore::ListAgents() {
  return NotYet();
}

absl::StatusOr<std::vector<AgentRecord>> PostgresStore::ListAgentsPage(
    const AgentPageQuery& query) {
  return NotYet();
}

absl::StatusOr<std::string> PostgresStore::ClaimAgentOwner(
    absl::string_view agent_id, absl::string_view principal, int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
PostgresStore::ListAgentOwners() {
  return NotYet();
}

}  // namespace hub::storage::pg
