// AgentStore over one engine, written once for SQLite and PostgreSQL: each
// method runs agent_ops.h's operation in one of the engine's reads or writes
// over the engine's AgentRows. What differs between the engines is only
// their statements (the Rows class) and the seat their writes are fenced by
// (Engine::Seat(): PostgreSQL's membership, none on SQLite).
#ifndef HUB_STORAGE_AGENT_STORE_CALLS_H_
#define HUB_STORAGE_AGENT_STORE_CALLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/agent_ops.h"
#include "storage/agent_store.h"

namespace hub::storage {

// `Engine` (a friend: its Read, Write and WriteAsync are private) runs
// functions of its Connection and names the seat of its writes (Seat());
// `Rows` is its AgentRows over one Connection and that seat.
template <typename Engine, typename Rows>
class AgentCalls : public AgentStore {
 public:
  explicit AgentCalls(Engine& engine) : engine_(engine) {}

  absl::StatusOr<AgentRecord> RegisterAgent(
      const AgentRegistration& r) override {
    return Write<AgentRecord>(
        [&](Rows& rows) { return RegisterWith(rows, r); });
  }
  void RegisterAgentAsync(const AgentRegistration& r,
                          Callback<AgentRecord> done) override {
    engine_.template WriteAsync<AgentRecord>(
        [r, seat = engine_.Seat()](auto& conn) {
          Rows rows(conn, seat);
          return RegisterWith(rows, r);
        },
        std::move(done));
  }
  absl::StatusOr<PresenceWrite> RefreshLeaseForGeneration(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms, int64_t lease_ttl_ms) override {
    return Write<PresenceWrite>([&](Rows& rows) {
      return PresenceOutcomeWith(
          rows, rows.Refresh(agent_id, generation, now_ms, lease_ttl_ms),
          agent_id);
    });
  }
  absl::StatusOr<PresenceWrite> ClaimPresence(absl::string_view agent_id,
                                              int64_t generation,
                                              int64_t now_ms,
                                              int64_t lease_ttl_ms) override {
    return Write<PresenceWrite>([&](Rows& rows) {
      return ClaimWith(rows, agent_id, generation, now_ms, lease_ttl_ms);
    });
  }
  absl::StatusOr<bool> ReleasePresence(const LeaseCheckpoint& last) override {
    // Without a seat nobody else may hold the presence: nothing to end.
    // The seat read here is the one the release is fenced by.
    std::optional<HubSeat> seat = engine_.Seat();
    if (!seat.has_value()) return true;
    return WriteAs<bool>(std::move(seat),
                         [&](Rows& rows) { return rows.Release(last); });
  }
  absl::StatusOr<PresenceWrite> SetAgentStatusForGeneration(
      absl::string_view agent_id, std::optional<int64_t> generation,
      AgentStatus status) override {
    return Write<PresenceWrite>([&](Rows& rows) {
      return PresenceOutcomeWith(
          rows, rows.SetStatus(agent_id, generation, status), agent_id);
    });
  }
  absl::StatusOr<std::vector<PresenceTransition>> SweepAgentPresence(
      int64_t now_ms, int64_t offline_after_ms) override {
    return Write<std::vector<PresenceTransition>>(
        [&](Rows& rows) { return SweepWith(rows, now_ms, offline_after_ms); });
  }
  absl::StatusOr<std::vector<bool>> CheckpointLeases(
      const std::vector<LeaseCheckpoint>& leases) override {
    if (leases.empty()) return std::vector<bool>();
    return Write<std::vector<bool>>(
        [&](Rows& rows) { return rows.Checkpoint(leases); });
  }
  absl::StatusOr<AgentRecord> GetAgent(absl::string_view agent_id) override {
    return Read<AgentRecord>(
        [&](Rows& rows) { return GetWith(rows, agent_id); });
  }
  absl::StatusOr<std::vector<AgentRecord>> ListAgents() override {
    return Read<std::vector<AgentRecord>>(
        [](Rows& rows) { return rows.All(); });
  }
  absl::StatusOr<std::vector<AgentRecord>> ListAgentsPage(
      const AgentPageQuery& query) override {
    return Read<std::vector<AgentRecord>>(
        [&](Rows& rows) { return rows.Page(query); });
  }
  absl::StatusOr<std::string> ClaimAgentOwner(absl::string_view agent_id,
                                              absl::string_view principal,
                                              int64_t now_ms) override {
    return Write<std::string>([&](Rows& rows) {
      return ClaimOwnerWith(rows, agent_id, principal, now_ms);
    });
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
  ListAgentOwners() override {
    return Read<std::vector<std::pair<std::string, std::string>>>(
        [](Rows& rows) { return rows.Owners(); });
  }

 protected:
  Engine& engine() { return engine_; }

 private:
  template <typename T, typename Fn>
  absl::StatusOr<T> Read(Fn fn) {
    return engine_.template Read<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, std::nullopt);
      return fn(rows);
    });
  }
  // The seat is read when the write is asked for, as the caller's fence.
  template <typename T, typename Fn>
  absl::StatusOr<T> Write(Fn fn) {
    return WriteAs<T>(engine_.Seat(), std::move(fn));
  }
  template <typename T, typename Fn>
  absl::StatusOr<T> WriteAs(std::optional<HubSeat> seat, Fn fn) {
    return engine_.template Write<T>(
        [&, seat = std::move(seat)](auto& conn) -> absl::StatusOr<T> {
          Rows rows(conn, seat);
          return fn(rows);
        });
  }

  Engine& engine_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_AGENT_STORE_CALLS_H_
