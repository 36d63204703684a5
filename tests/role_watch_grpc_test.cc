// WatchRoles through gRPC, and the fences under contention: exactly one
// compare-and-set (or reservation) succeeds per version.
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/role_grpc_fixture.h"

namespace hub::testing {
namespace {

using hub::v1::WatchRolesRequest;
using hub::v1::WatchRolesResponse;

class RoleWatchGrpcTest : public RoleGrpcTest {
 protected:
  std::unique_ptr<grpc::ClientReader<WatchRolesResponse>> Watch(
      grpc::ClientContext* context, const WatchRolesRequest& request) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return stub_->WatchRoles(context, request);
  }

  // Reads the snapshot; returns its roles.
  std::vector<Role> ReadSnapshot(grpc::ClientReader<WatchRolesResponse>* r) {
    std::vector<Role> roles;
    WatchRolesResponse item;
    while (r->Read(&item)) {
      if (item.has_snapshot_end()) {
        EXPECT_EQ(item.snapshot_end().role_count(),
                  static_cast<int64_t>(roles.size()));
        return roles;
      }
      EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_SNAPSHOT);
      roles.push_back(item.change().role());
    }
    ADD_FAILURE() << "stream ended before snapshot_end";
    return roles;
  }

  // Polls `done` for up to 30 s (a generous bound for a busy machine).
  bool WaitFor(const std::function<bool()>& done) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!done() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return done();
  }
};

TEST_F(RoleWatchGrpcTest, WatchSendsTheSnapshotThenOtherClientsChangesInOrder) {
  Role cto = ReserveOk(CtoKey());
  ReserveOk(LeadKey());
  grpc::ClientContext context;
  WatchRolesRequest request;
  request.set_project_id(kProject);
  auto reader = Watch(&context, request);
  std::vector<Role> snapshot = ReadSnapshot(reader.get());
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_LT(snapshot[0].role_key_wire(), snapshot[1].role_key_wire());

  // Another client reserves and activates the cto role.
  auto other = hub::v1::RoleService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  hub::v1::ReserveRoleRequest reserve;
  reserve.set_role_key_wire(cto.role_key_wire());
  reserve.mutable_patch()->set_holder_agent_id("agent-a");
  hub::v1::ReserveRoleResponse reserved;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(other->ReserveRole(&c, reserve, &reserved).ok());
  }
  hub::v1::CompareAndSetRoleRequest cas = CasFrom(reserved.role());
  cas.mutable_patch()->set_state(hub::v1::ROLE_STATE_ACTIVE);
  hub::v1::CompareAndSetRoleResponse activated;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(other->CompareAndSetRole(&c, cas, &activated).ok());
  }
  int64_t last_version = cto.version();
  WatchRolesResponse item;
  while (last_version < activated.role().version() && reader->Read(&item)) {
    ASSERT_TRUE(item.has_change());
    EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_UPDATED);
    EXPECT_GT(item.change().role().version(), last_version);
    last_version = item.change().role().version();
    if (last_version == 1) {
      EXPECT_EQ(item.change().previous_state(), hub::v1::ROLE_STATE_ELECTABLE);
      EXPECT_EQ(item.change().role().holder_agent_id(), "agent-a");
    }
  }
  EXPECT_EQ(last_version, 2);
  EXPECT_EQ(item.change().role().state(), hub::v1::ROLE_STATE_ACTIVE);
  context.TryCancel();
}

TEST_F(RoleWatchGrpcTest, AKeyFilterSeesOnlyThatRoleAndNewRolesAreCreated) {
  grpc::ClientContext context;
  WatchRolesRequest request;
  *request.mutable_role_key() = LeadKey();
  auto reader = Watch(&context, request);
  EXPECT_TRUE(ReadSnapshot(reader.get()).empty());
  ReserveOk(CtoKey());
  Role lead = ReserveOk(LeadKey());
  WatchRolesResponse item;
  ASSERT_TRUE(reader->Read(&item));
  EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_CREATED);
  EXPECT_EQ(item.change().role().role_key_wire(), lead.role_key_wire());
  EXPECT_EQ(item.change().previous_state(), hub::v1::ROLE_STATE_UNSPECIFIED);
  context.TryCancel();
}

TEST_F(RoleWatchGrpcTest, AWatcherThatFallsBehindStillEndsOnTheNewestVersion) {
  Role row = ReserveOk(CtoKey());
  grpc::ClientContext context;
  auto reader = Watch(&context, WatchRolesRequest());
  ReadSnapshot(reader.get());
  for (int i = 0; i < 100; ++i) {
    hub::v1::CompareAndSetRoleRequest cas = CasFrom(row);
    cas.mutable_patch()->set_retry_count(i);
    ASSERT_TRUE(Cas(cas, &row).ok());
  }
  int64_t last = 0;
  WatchRolesResponse item;
  while (last < row.version() && reader->Read(&item)) {
    EXPECT_GT(item.change().role().version(), last);  // gaps allowed
    last = item.change().role().version();
  }
  EXPECT_EQ(last, 100);
  context.TryCancel();
}

TEST_F(RoleWatchGrpcTest, ACancelledWatchFreesItsReactorAndRegistration) {
  grpc::ClientContext context;
  auto reader = Watch(&context, WatchRolesRequest());
  ReadSnapshot(reader.get());
  EXPECT_EQ(service_->ActiveWatches(), 1);
  EXPECT_EQ(registry_->WatchCount(), 1);
  context.TryCancel();
  WatchRolesResponse item;
  while (reader->Read(&item)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return service_->ActiveWatches() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return registry_->WatchCount() == 0; }));
  ReserveOk(CtoKey());  // nobody left to tell
}

TEST_F(RoleWatchGrpcTest, ShutdownEndsWatchesWithHubShuttingDown) {
  grpc::ClientContext context;
  auto reader = Watch(&context, WatchRolesRequest());
  ReadSnapshot(reader.get());
  service_->Shutdown();
  WatchRolesResponse item;
  while (reader->Read(&item)) {
  }
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Reason(s), "HUB_SHUTTING_DOWN");
  grpc::ClientContext later;
  auto refused = Watch(&later, WatchRolesRequest());
  while (refused->Read(&item)) {
  }
  EXPECT_EQ(Reason(refused->Finish()), "HUB_SHUTTING_DOWN");
}

TEST_F(RoleWatchGrpcTest, AWatchWithAKeyAndAProjectIsRefused) {
  grpc::ClientContext context;
  WatchRolesRequest request;
  *request.mutable_role_key() = CtoKey();
  request.set_project_id(kProject);
  auto reader = Watch(&context, request);
  WatchRolesResponse item;
  EXPECT_FALSE(reader->Read(&item));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "REQUEST_INVALID");
}

TEST_F(RoleWatchGrpcTest, ConcurrentWritersAreSeenInVersionOrderPerRole) {
  const std::string cto = ReserveOk(CtoKey()).role_key_wire();
  const std::string lead = ReserveOk(LeadKey()).role_key_wire();
  grpc::ClientContext context;
  WatchRolesRequest request;
  request.set_kind(hub::v1::ROLE_KIND_LEAD);
  auto lead_only = Watch(&context, request);
  grpc::ClientContext all_context;
  auto reader = Watch(&all_context, WatchRolesRequest());
  ReadSnapshot(reader.get());
  ReadSnapshot(lead_only.get());
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) ReserveOk(t % 2 == 0 ? CtoKey() : LeadKey());
    });
  }
  for (std::thread& w : writers) w.join();
  std::map<std::string, int64_t> last = {{cto, 0}, {lead, 0}};
  WatchRolesResponse item;
  while ((last[cto] < 40 || last[lead] < 40) && reader->Read(&item)) {
    const Role& role = item.change().role();
    EXPECT_GT(role.version(), last[role.role_key_wire()]);
    last[role.role_key_wire()] = role.version();
  }
  EXPECT_EQ(last[cto], 40);
  EXPECT_EQ(last[lead], 40);
  int64_t lead_last = 0;
  while (lead_last < 40 && lead_only->Read(&item)) {
    EXPECT_EQ(item.change().role().role_key_wire(), lead);
    EXPECT_GT(item.change().role().version(), lead_last);
    lead_last = item.change().role().version();
  }
  EXPECT_EQ(lead_last, 40);
  context.TryCancel();
  all_context.TryCancel();
}

// Runs `call` on 16 threads released together; returns their statuses.
std::vector<grpc::Status> Race(const std::function<grpc::Status(int)>& call) {
  constexpr int kThreads = 16;
  std::vector<grpc::Status> out(kThreads);
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      out[i] = call(i);
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  return out;
}

TEST_F(RoleWatchGrpcTest, ExactlyOneCompareAndSetSucceedsPerVersion) {
  Role row = ReserveOk(CtoKey(), "agent-a");
  for (int round = 0; round < 5; ++round) {
    std::vector<grpc::Status> results = Race([&](int i) {
      hub::v1::CompareAndSetRoleRequest cas = CasFrom(row);
      cas.mutable_patch()->set_retry_count(i);
      return Cas(cas);
    });
    int ok = 0;
    for (const grpc::Status& s : results) {
      if (s.ok()) {
        ++ok;
        continue;
      }
      const std::string reason = Reason(s);
      if (s.error_code() == grpc::StatusCode::ABORTED) {
        EXPECT_TRUE(reason == "STALE_VERSION" || reason == "CAS_CONFLICT")
            << reason;
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
        EXPECT_FALSE(reason.empty());
      }
    }
    EXPECT_EQ(ok, 1) << "round " << round;
    Role after = GetOk(row.role_key_wire());
    EXPECT_EQ(after.version(), row.version() + 1);
    EXPECT_EQ(after.epoch(), row.epoch());
    row = after;
  }
}

TEST_F(RoleWatchGrpcTest,
       ExactlyOneReservationSucceedsPerVersionAndEpochsRise) {
  Role row = ReserveOk(CtoKey());
  for (int round = 0; round < 5; ++round) {
    std::vector<grpc::Status> results = Race([&](int i) {
      hub::v1::ReserveRoleRequest reserve;
      reserve.set_role_key_wire(row.role_key_wire());
      reserve.set_expected_version(row.version());
      reserve.mutable_patch()->set_holder_agent_id(absl::StrCat("agent-", i));
      return Reserve(reserve);
    });
    int ok = 0;
    for (const grpc::Status& s : results) {
      if (s.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
        EXPECT_EQ(Reason(s), "STALE_VERSION");
      }
    }
    EXPECT_EQ(ok, 1);
    Role after = GetOk(row.role_key_wire());
    EXPECT_EQ(after.epoch(), row.epoch() + 1);
    EXPECT_EQ(after.activation_seq(), row.activation_seq() + 1);
    row = after;
  }
}

}  // namespace
}  // namespace hub::testing
