// PostgresStore's AgentStore: the shared AgentCalls over PgAgentRows, with
// one addition of PostgreSQL's: a registration with no owner to claim is
// its upsert alone, so its statement goes ahead with its group's other
// registrations in one round trip (storage/group_commit_writer.h).
#include <memory>
#include <utility>

#include "storage/agent_store_calls.h"
#include "storage/pg/pg_agent_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {

class PgAgentStore final : public AgentCalls<PostgresStore, PgAgentRows> {
 public:
  using AgentCalls::AgentCalls;

  void RegisterAgentAsync(const AgentRegistration& registration,
                          Callback<AgentRecord> done) override {
    if (registration.owner.has_value()) {
      AgentCalls::RegisterAgentAsync(registration, std::move(done));
      return;
    }
    std::optional<HubSeat> seat = engine().Seat();
    engine().WriteAsyncFirst<AgentRecord>(
        PgAgentRows::UpsertStatement(registration, seat),
        [seat](const Statement&, absl::StatusOr<Result> answer, Connection&) {
          return RegisteredAgent(PgAgentRows::UpsertedAgent(std::move(answer)),
                                 seat);
        },
        std::move(done));
  }
};

std::unique_ptr<AgentStore> PostgresStore::NewAgentStore() {
  return std::make_unique<PgAgentStore>(*this);
}

}  // namespace hub::storage::pg
