// Helpers shared by the in-process gRPC tests: reading a failure's
// google.rpc.ErrorInfo, a fresh database per test, and a HubServer tuned to
// run its timers fast.
#ifndef HUB_TESTS_HUB_TEST_UTIL_H_
#define HUB_TESTS_HUB_TEST_UTIL_H_

#include <grpcpp/support/status.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cpp/hub_client.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/role_service.pb.h"

namespace hub::testing {

// The ErrorInfo in a failed call's details (empty when there is none).
inline google::rpc::ErrorInfo ErrorInfoOf(const grpc::Status& status) {
  google::rpc::Status details;
  google::rpc::ErrorInfo info;
  if (!details.ParseFromString(status.error_details())) return info;
  for (const auto& any : details.details()) {
    if (any.UnpackTo(&info)) return info;
  }
  return info;
}

// The ErrorInfo.reason of a failed call ("" if none).
inline std::string Reason(const grpc::Status& status) {
  return ErrorInfoOf(status).reason();
}

// A CompareAndSetRole request guarded by exactly `row`'s four-part fence
// (version, epoch, activation_seq, activation_id or none); no patch.
inline hub::v1::CompareAndSetRoleRequest CasRequestGuardedBy(
    const hub::v1::Role& row) {
  return client::CasGuardedBy(row);
}

// A database path under $TEST_TMPDIR named after the running test, with any
// earlier file (and its -wal/-shm) removed.
inline std::string FreshTestDbPath() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(
      dir != nullptr ? dir : "/tmp", "/",
      ::testing::UnitTest::GetInstance()->current_test_info()->name(),
      ".sqlite");
  for (const char* ext : {"", "-wal", "-shm"}) {
    std::remove(absl::StrCat(path, ext).c_str());
  }
  return path;
}

// A HubServer on a free loopback port over `db_path`, with a short detach
// grace and a fast ticker so timing paths run in milliseconds.
inline HubServerOptions TestHubOptions(const std::string& db_path) {
  HubServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = db_path;
  options.presence.detach_grace = absl::Milliseconds(200);
  options.tick_interval = absl::Milliseconds(20);
  return options;
}

// StartTestHub with options changed from TestHubOptions.
inline std::unique_ptr<HubServer> StartTestHub(
    const HubServerOptions& options) {
  auto server = HubServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

inline std::unique_ptr<HubServer> StartTestHub(const std::string& db_path) {
  auto server = HubServer::Start(TestHubOptions(db_path));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

}  // namespace hub::testing

#endif  // HUB_TESTS_HUB_TEST_UTIL_H_
