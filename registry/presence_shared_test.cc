// PresenceRegistry over a store that several hubs share (PostgreSQL with a
// membership, docs/design/multi-hub.md): what a hub tells its streams when
// the store refuses a write for the presence it holds.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "registry/clock.h"
#include "registry/presence.h"
#include "status/status.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_database.h"

namespace hub {
namespace {

constexpr char kHub[] = "01900000-0000-7000-8000-0000000000a1";
constexpr char kOtherHub[] = "01900000-0000-7000-8000-0000000000b2";

class FakeStream : public PresenceStream {
 public:
  void Fence(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    fences_.push_back(status);
  }
  bool DeliverActivation(const ActivationEnvelope&) override { return true; }
  std::vector<absl::Status> fences() {
    absl::MutexLock lock(&mu_);
    return fences_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> fences_;
};

class SharedPresenceTest : public storage::pg::testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    storage::pg::PostgresStoreOptions options;
    options.conninfo = server_->ConnInfo(database_);
    options.hub_id = kHub;
    auto store = storage::pg::PostgresStore::Open(std::move(options));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ASSERT_TRUE(store_->membership()->Join("a:1", 60'000).ok());
    registry_ = std::make_unique<PresenceRegistry>(
        &store_->agents(), store_->membership(), &clock_, PresenceConfig(),
        kHub, "pg:test");
    ASSERT_TRUE(registry_->shared());
    registry_->SetAuthorityCheck([this] {
      absl::MutexLock lock(&mu_);
      return seat_live_;
    });
  }

  // Registers `id` through this hub and attaches `stream` for it.
  void RegisterAndAttach(const std::string& id,
                         std::shared_ptr<FakeStream> stream) {
    RegisterInput in;
    in.agent_id = id;
    in.cli = "claude";
    in.ttl = absl::Seconds(30);
    absl::StatusOr<AgentView> view = registry_->Register(in);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_TRUE(registry_
                    ->Attach(id, view->record.presence_generation, {},
                             std::move(stream))
                    .ok());
  }

  // Ends this hub's seat in the database's clock, as a pause past the lease
  // does; `by_own_clock`: whether the hub has noticed yet.
  void EndSeat(bool by_own_clock) {
    std::unique_ptr<storage::pg::Connection> conn = Connect();
    ASSERT_TRUE(conn->Query("UPDATE hub_hubs SET lease_expires_at = "
                            "clock_timestamp() - interval '1 millisecond' "
                            "WHERE hub_id = $1",
                            {std::string(kHub)})
                    .ok());
    absl::MutexLock lock(&mu_);
    seat_live_ = !by_own_clock;
  }

  // Far enough for the attached agents' leases to be checkpointed.
  void RunPastACheckpoint() {
    clock_.Advance(absl::Seconds(20));
    registry_->Tick();
  }

  FakeClock clock_;
  std::unique_ptr<storage::pg::PostgresStore> store_;
  std::unique_ptr<PresenceRegistry> registry_;
  absl::Mutex mu_;
  bool seat_live_ ABSL_GUARDED_BY(mu_) = true;
};

// A hub resumed after a pause past its lease may checkpoint before its
// ticker finds the seat over, or after it joined again under a new seat. A
// checkpoint refused because the seat is over is no sign of another holder,
// whatever the hub's own clock says: the stream stays until the loss of the
// seat ends it with HUB_SEAT_LOST. Told PRESENCE_STREAM_REPLACED, a client
// would take itself as superseded and give up for good.
TEST_F(SharedPresenceTest,
       ACheckpointRefusedAfterTheSeatEndedLeavesTheStreamToTheSeatLoss) {
  auto stream = std::make_shared<FakeStream>();
  RegisterAndAttach("agent-a", stream);
  EndSeat(/*by_own_clock=*/false);
  RunPastACheckpoint();
  EXPECT_TRUE(stream->fences().empty());
  EndSeat(/*by_own_clock=*/true);
  RunPastACheckpoint();
  EXPECT_TRUE(stream->fences().empty());

  registry_->DropHolds(
      UnavailableError("HUB_SEAT_LOST", "lease_not_renewed_in_time"));
  ASSERT_EQ(stream->fences().size(), 1u);
  EXPECT_EQ(ReasonOf(stream->fences()[0]), "HUB_SEAT_LOST");
}

// A checkpoint refused while the seat is live means another hub holds the
// agent now (its attach took the presence): this hub's stream was
// replaced.
TEST_F(SharedPresenceTest, ACheckpointRefusedForAnotherHubsHoldEndsTheStream) {
  auto stream = std::make_shared<FakeStream>();
  RegisterAndAttach("agent-a", stream);
  storage::pg::PostgresStoreOptions options;
  options.conninfo = server_->ConnInfo(database_);
  options.hub_id = kOtherHub;
  auto other = storage::pg::PostgresStore::Open(std::move(options));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE((*other)->membership()->Join("b:1", 60'000).ok());
  absl::StatusOr<AgentRecord> row = store_->agents().GetAgent("agent-a");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_TRUE((*other)
                  ->agents()
                  .ClaimPresence("agent-a", row->presence_generation,
                                 UnixMillis(clock_.Now()), 30'000)
                  .ok());

  RunPastACheckpoint();
  ASSERT_EQ(stream->fences().size(), 1u);
  EXPECT_EQ(ReasonOf(stream->fences()[0]), "PRESENCE_STREAM_REPLACED");
}

}  // namespace
}  // namespace hub
