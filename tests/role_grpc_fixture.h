// The in-process RoleService fixture shared by the role gRPC tests: a real
// gRPC server on 127.0.0.1 with RoleServiceImpl over a SqliteStore in
// $TEST_TMPDIR, and helpers that read ErrorInfo.
#ifndef HUB_TESTS_ROLE_GRPC_FIXTURE_H_
#define HUB_TESTS_ROLE_GRPC_FIXTURE_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "hub/blocking_pool.h"
#include "hub/services/role_service.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "registry/clock.h"
#include "registry/role_registry.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"
#include "tests/hub_test_util.h"

namespace hub::testing {

using hub::v1::CompareAndSetRoleRequest;
using hub::v1::ReserveRoleRequest;
using hub::v1::Role;

inline constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
inline constexpr char kScope[] = "scp_CCCCCCCCCCCCCCCCCCCCCC";

inline google::rpc::ErrorInfo InfoOf(const grpc::Status& status) {
  return ErrorInfoOf(status);
}

inline hub::v1::RoleKey CtoKey(const std::string& project = kProject) {
  hub::v1::RoleKey key;
  key.set_project_id(project);
  key.set_kind(hub::v1::ROLE_KIND_CTO);
  return key;
}

inline hub::v1::RoleKey LeadKey() {
  hub::v1::RoleKey key;
  key.set_project_id(kProject);
  key.set_kind(hub::v1::ROLE_KIND_LEAD);
  key.set_scope_id(kScope);
  return key;
}

inline std::string ProjectN(int n) {
  std::string id = absl::StrCat("prj_", std::string(21, 'P'), n % 10);
  return id;
}

class RoleGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = storage::testing::FreshDbPath();
    Start();
  }
  void TearDown() override { Stop(); }

  void Start() {
    store_ = storage::testing::OpenOrDie(db_path_);
    ASSERT_NE(store_, nullptr);
    registry_ = std::make_unique<RoleRegistry>(&store_->roles(), &clock_);
    pool_ = std::make_unique<BlockingPool>(8);
    service_ = std::make_unique<RoleServiceImpl>(registry_.get(), &clock_,
                                                 pool_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = hub::v1::RoleService::NewStub(channel_);
  }

  void Stop() {
    if (service_) service_->Shutdown();
    if (server_) server_->Shutdown();
    stub_.reset();
    channel_.reset();
    server_.reset();
    pool_.reset();
    service_.reset();
    registry_.reset();
    store_.reset();
  }

  grpc::Status Reserve(const ReserveRoleRequest& request, Role* role = nullptr,
                       bool* created = nullptr) {
    grpc::ClientContext context;
    hub::v1::ReserveRoleResponse response;
    grpc::Status s = stub_->ReserveRole(&context, request, &response);
    if (role != nullptr) *role = response.role();
    if (created != nullptr) *created = response.created();
    return s;
  }

  Role ReserveOk(const hub::v1::RoleKey& key, const std::string& holder = "") {
    ReserveRoleRequest request;
    *request.mutable_role_key() = key;
    if (!holder.empty()) request.mutable_patch()->set_holder_agent_id(holder);
    Role role;
    grpc::Status s = Reserve(request, &role);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return role;
  }

  // A CAS request guarded by exactly `row`'s fence.
  CompareAndSetRoleRequest CasFrom(const Role& row) {
    return CasRequestGuardedBy(row);
  }

  grpc::Status Cas(const CompareAndSetRoleRequest& request,
                   Role* role = nullptr) {
    grpc::ClientContext context;
    hub::v1::CompareAndSetRoleResponse response;
    grpc::Status s = stub_->CompareAndSetRole(&context, request, &response);
    if (role != nullptr) *role = response.role();
    return s;
  }

  grpc::Status Get(const hub::v1::GetRoleRequest& request, Role* role) {
    grpc::ClientContext context;
    hub::v1::GetRoleResponse response;
    grpc::Status s = stub_->GetRole(&context, request, &response);
    *role = response.role();
    return s;
  }

  Role GetOk(const std::string& wire) {
    hub::v1::GetRoleRequest request;
    request.set_role_key_wire(wire);
    Role role;
    grpc::Status s = Get(request, &role);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return role;
  }

  grpc::Status List(const hub::v1::ListRolesRequest& request,
                    hub::v1::ListRolesResponse* response) {
    grpc::ClientContext context;
    return stub_->ListRoles(&context, request, response);
  }

  RealClock clock_;
  int port_ = 0;
  std::string db_path_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<RoleRegistry> registry_;
  std::unique_ptr<BlockingPool> pool_;
  std::unique_ptr<RoleServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hub::v1::RoleService::Stub> stub_;
};

}  // namespace hub::testing

#endif  // HUB_TESTS_ROLE_GRPC_FIXTURE_H_
