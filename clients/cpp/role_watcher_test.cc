// RoleWatcher against the real hubd binary: snapshot, live changes, and
// resuming after the hub is killed and restarted.
#include "clients/cpp/role_watcher.h"

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/hubd_process.h"

namespace hub::client {
namespace {

constexpr char kProject[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";

struct Seen {
  absl::Mutex mu;
  std::vector<hub::v1::RoleChange> changes ABSL_GUARDED_BY(mu);
  std::vector<bool> snapshot_ends ABSL_GUARDED_BY(mu);  // `resumed` flags
  std::vector<absl::Status> disconnects ABSL_GUARDED_BY(mu);

  RoleWatcherCallbacks Callbacks() {
    RoleWatcherCallbacks callbacks;
    callbacks.on_change = [this](const hub::v1::RoleChange& c) {
      absl::MutexLock lock(&mu);
      changes.push_back(c);
    };
    callbacks.on_snapshot_end = [this](const hub::v1::RoleSnapshotEnd&,
                                       bool resumed) {
      absl::MutexLock lock(&mu);
      snapshot_ends.push_back(resumed);
    };
    callbacks.on_disconnect = [this](const absl::Status& s, bool) {
      absl::MutexLock lock(&mu);
      disconnects.push_back(s);
    };
    return callbacks;
  }

  bool Await(std::function<bool()> done) {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30));
  }
};

hub::v1::RoleKey Lead(const std::string& scope) {
  hub::v1::RoleKey key;
  key.set_project_id(kProject);
  key.set_kind(hub::v1::ROLE_KIND_LEAD);
  key.set_scope_id(scope);
  return key;
}

class RoleWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hubd_ = std::make_unique<testing::HubdProcess>(testing::TempDbPath(
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    ASSERT_TRUE(hubd_->Start().ok());
    HubClientOptions options;
    options.address = hubd_->address();
    options.max_reconnect_backoff = absl::Milliseconds(500);
    client_ = std::make_unique<HubClient>(options);
  }

  // Reserves (creates, or fences to the next epoch) a role; its new epoch.
  int64_t Reserve(const hub::v1::RoleKey& key) {
    hub::v1::ReserveRoleRequest request;
    *request.mutable_role_key() = key;
    absl::StatusOr<hub::v1::ReserveRoleResponse> reserved =
        client_->ReserveRole(request);
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    return reserved.ok() ? reserved->role().epoch() : -1;
  }

  RoleWatcherOptions ProjectFilter() {
    RoleWatcherOptions options;
    options.filter.set_project_id(kProject);
    options.backoff.initial = absl::Milliseconds(50);
    options.backoff.max = absl::Milliseconds(500);
    return options;
  }

  std::unique_ptr<testing::HubdProcess> hubd_;
  std::unique_ptr<HubClient> client_;
};

TEST_F(RoleWatcherTest, SeesTheSnapshotThenARoleChange) {
  const hub::v1::RoleKey a = Lead("scp_AAAAAAAAAAAAAAAAAAAAAA");
  ASSERT_EQ(Reserve(a), 0);
  Seen seen;
  RoleWatcher watcher(client_.get(), ProjectFilter(), seen.Callbacks());
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.snapshot_ends.empty();
  }));
  {
    absl::MutexLock lock(&seen.mu);
    ASSERT_EQ(seen.changes.size(), 1u);
    EXPECT_EQ(seen.changes[0].kind(), hub::v1::ROLE_CHANGE_KIND_SNAPSHOT);
    EXPECT_FALSE(seen.snapshot_ends[0]);
  }
  ASSERT_EQ(Reserve(a), 1);
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return seen.changes.size() >= 2;
  }));
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.changes[1].kind(), hub::v1::ROLE_CHANGE_KIND_UPDATED);
  EXPECT_EQ(seen.changes[1].role().epoch(), 1);
}

TEST_F(RoleWatcherTest, ResumesAfterTheHubRestartsAndSkipsUnchangedRoles) {
  const hub::v1::RoleKey a = Lead("scp_AAAAAAAAAAAAAAAAAAAAAA");
  const hub::v1::RoleKey b = Lead("scp_BBBBBBBBBBBBBBBBBBBBBB");
  Reserve(a);
  Reserve(b);
  Seen seen;
  RoleWatcher watcher(client_.get(), ProjectFilter(), seen.Callbacks());
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.snapshot_ends.empty();
  }));

  hubd_->Kill();
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.disconnects.empty();
  }));
  ASSERT_TRUE(hubd_->Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return seen.snapshot_ends.size() >= 2;
  }));
  {
    absl::MutexLock lock(&seen.mu);
    EXPECT_TRUE(seen.snapshot_ends[1]);
  }
  EXPECT_EQ(watcher.live_streams(), 2);

  // Live changes flow again on the resumed stream.
  ASSERT_EQ(Reserve(b), 1);
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const hub::v1::RoleChange& c : seen.changes) {
      if (c.role().role_key().scope_id() == b.scope_id() &&
          c.role().epoch() == 1) {
        return true;
      }
    }
    return false;
  }));
  // A second restart: the recovery has nothing left to change, so the new
  // snapshot repeats nothing.
  size_t before = 0;
  {
    absl::MutexLock lock(&seen.mu);
    before = seen.changes.size();
  }
  hubd_->Kill();
  ASSERT_TRUE(hubd_->Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return seen.snapshot_ends.size() >= 3;
  }));
  // Only what changed while disconnected was delivered: no (role, version)
  // pair reached the callback twice.
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.changes.size(), before)
      << "roles unchanged across the second restart were redelivered";
  std::set<std::pair<std::string, int64_t>> delivered;
  for (const hub::v1::RoleChange& c : seen.changes) {
    EXPECT_TRUE(
        delivered.emplace(c.role().role_key_wire(), c.role().version()).second)
        << "delivered twice: " << c.ShortDebugString();
  }
}

TEST_F(RoleWatcherTest, AnInvalidFilterStopsTheWatcherWithItsReason) {
  RoleWatcherOptions options;
  options.filter.set_project_id("not-a-project");
  Seen seen;
  RoleWatcher watcher(client_.get(), options, seen.Callbacks());
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.disconnects.empty();
  }));
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.disconnects[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(seen.disconnects[0]), "PROJECT_ID_INVALID");
}

}  // namespace
}  // namespace hub::client
