#include "registry/coordinator.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "registry/messaging.h"
#include "registry/role_key.h"
#include "registry/role_registry.h"
#include "registry/uuid.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// The real registries over a SQLite store; the coordinator's executor only
// queues (presence reports from whichever thread did it), so each test sees
// what runs on it and when.
class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(FreshDbPath());
    presence_ = std::make_unique<PresenceRegistry>(
        &store_->agents(), store_->membership(), &clock_, PresenceConfig(),
        "instance", "sqlite:test");
    ASSERT_TRUE(presence_->Recover().ok());
    roles_ = std::make_unique<RoleRegistry>(&store_->roles(), &clock_);
    reach_ = std::make_unique<PresenceStreamReach>(presence_.get());
    activator_ =
        std::make_unique<Activator>(roles_.get(), presence_.get(), reach_.get(),
                                    &clock_, ActivatorOptions());
    book_ = std::make_unique<ReservationBook>(&store_->reservations(), &clock_,
                                              ReservationLimits());
    coordinator_ = std::make_unique<Coordinator>(
        presence_.get(), activator_.get(), book_.get(), /*jobs=*/nullptr,
        [this](std::function<void()> reaction) {
          absl::MutexLock lock(&mu_);
          queued_.push_back(std::move(reaction));
        });
    coordinator_->Start();
  }

  // Reactions queued so far, waiting up to a while for at least `n`.
  size_t Queued(size_t n = 0) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n] {
      mu_.AssertHeld();
      return queued_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return queued_.size();
  }
  void RunQueued() {
    std::vector<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu_);
      run.swap(queued_);
    }
    for (std::function<void()>& reaction : run) reaction();
  }

  void Register(const std::string& agent_id,
                std::vector<std::string> capabilities = {}) {
    RegisterInput in;
    in.agent_id = agent_id;
    in.cli = "claude";
    in.capabilities = std::move(capabilities);
    ASSERT_TRUE(presence_->Register(in).ok());
  }

  static std::string Wire() {
    RoleKeyInput in;
    in.project_id = kProject;
    in.role_kind = "cto";
    return *EncodeRoleKey(*NormalizeRoleKey(in));
  }
  RoleRecord Row() { return *roles_->Get(RoleKeyRef{std::nullopt, Wire()}); }

  FakeClock clock_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<PresenceRegistry> presence_;
  std::unique_ptr<RoleRegistry> roles_;
  std::unique_ptr<PresenceStreamReach> reach_;
  std::unique_ptr<Activator> activator_;
  std::unique_ptr<ReservationBook> book_;
  std::unique_ptr<Coordinator> coordinator_;
  absl::Mutex mu_;
  std::vector<std::function<void()>> queued_ ABSL_GUARDED_BY(mu_);
};

TEST_F(CoordinatorTest,
       AnAgentThatGoesLosesItsRoleAndItsReservationsOnTheExecutor) {
  Register("agent-a");
  ReserveInput role;
  role.role.wire = Wire();
  role.patch.holder_agent_id = "agent-a";
  ASSERT_TRUE(roles_->Reserve(role).ok());
  ASSERT_EQ(Row().holder_agent_id, "agent-a");
  PathReserveInput paths;
  paths.project_id = kProject;
  paths.agent_id = "agent-a";
  paths.patterns = {"src"};
  paths.exclusive = true;
  absl::StatusOr<storage::ReservationRecord> held = book_->Reserve(paths);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(Queued(), 0u);  // no candidacy: no arrival

  ASSERT_TRUE(presence_->Deregister("agent-a", std::nullopt, {}).ok());
  // Reported, not yet done: the reactions wait for the executor (the
  // reservation no longer counts as live, its holder being gone, but its
  // row is still there).
  ASSERT_EQ(Queued(1), 1u);
  EXPECT_EQ(Row().holder_agent_id, "agent-a");
  EXPECT_EQ(book_->counters().holder_gone, 0);

  RunQueued();
  const RoleRecord row = Row();
  EXPECT_NE(row.holder_agent_id, "agent-a");
  EXPECT_EQ(row.previous_holder_agent_id, "agent-a");
  EXPECT_EQ(book_->counters().holder_gone, 1);  // its row deleted
  EXPECT_EQ(ReasonOf(book_->Get(held->reservation_id).status()),
            "RESERVATION_NOT_FOUND");
}

TEST_F(CoordinatorTest, AnAgentNamingACandidacyArrivesOnTheExecutor) {
  Register("agent-a");
  Register("agent-b", {"role:cto:candidate"});
  // Only agent-b may be a candidate: one reaction, run by the executor.
  ASSERT_EQ(Queued(1), 1u);
  RunQueued();  // OnCandidateArrived: no role waits for agent-b
  EXPECT_EQ(Queued(), 0u);
}

TEST_F(CoordinatorTest,
       ARoleThatBecomesActiveIsHandedTheBacklogThatWaitedForItsHolder) {
  UuidV7Generator ids(&clock_);
  Messaging messaging(&store_->messages(), presence_.get(), roles_.get(),
                      activator_.get(), &ids, &clock_);
  ActivatorOptions hooks;
  Messaging* current = nullptr;
  ConnectRolesToMessaging(hooks, [&current] { return current; });
  // Before the messaging exists nothing waits and nothing is handed.
  EXPECT_FALSE(hooks.has_backlog(Wire()));
  RoleRecord active;
  active.role_key_wire = Wire();
  active.state = RoleState::kActive;
  active.holder_agent_id = "agent-a";
  EXPECT_EQ(hooks.on_role_active(active).handed_over, 0);

  current = &messaging;
  Register("sender-1");
  Register("agent-a");
  PublishInput to_role;
  to_role.from_agent_id = "sender-1";
  to_role.to = "topic:role:" + Wire();
  ASSERT_TRUE(messaging.Publish(to_role).ok());
  EXPECT_TRUE(hooks.has_backlog(Wire()));
  EXPECT_EQ(hooks.on_role_active(active).handed_over, 1);
}

}  // namespace
}  // namespace hub
