// Fuzz target: every RPC of every hub.v1 service, through gRPC against one
// in-process HubServer (the real handlers, validation, mapping and store).
//
// Input: byte 0 picks the RPC (rpc_request_fuzz.h lists them in order), byte
// 1 says how the rest is read: 't' as a text-format request (the seed
// corpus is written that way), anything else as a binary one. For Attach the
// request is an AttachFrames message (its frames are written in order, then
// the stream is half-closed). Bytes that do not parse are ignored.
//
// Invariant: the hub never answers UNKNOWN or INTERNAL, and every refusal
// of a request's content carries an ErrorInfo reason (errors.proto).

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hub/server.h"
#include "tests/hub_test_util.h"
#include "tests/rpc_caller.h"

namespace hub::fuzz {
namespace {

struct Hub {
  std::unique_ptr<HubServer> server;
  std::unique_ptr<testing::HubStubs> stubs;
};

// One hub for the whole run: state accumulates across inputs, as it would
// in production.
Hub* TheHub() {
  static Hub* hub = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    HubServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = absl::StrCat(dir != nullptr ? dir : "/tmp",
                                   "/rpc_request_fuzz_", getpid(), ".sqlite");
    options.durability = storage::Durability::kProcessCrash;
    options.presence.detach_grace = absl::Milliseconds(50);
    options.tick_interval = absl::Milliseconds(20);
    options.limits.requests_per_second = 0;  // the fuzzer is one principal
    // Never wake a real tmux session from fuzz input.
    options.activator.cto_manager_enabled = false;
    options.activator.lead_manager_enabled = false;
    auto server = HubServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "rpc_request_fuzz: %s\n",
                   server.status().ToString().c_str());
      std::abort();
    }
    auto* h = new Hub;
    h->server = std::move(*server);
    h->stubs = std::make_unique<testing::HubStubs>(grpc::CreateChannel(
        h->server->address(), grpc::InsecureChannelCredentials()));
    return h;
  }();
  return hub;
}

void Check(const grpc::Status& status, int rpc) {
  const grpc::StatusCode code = status.error_code();
  bool ok =
      code != grpc::StatusCode::UNKNOWN && code != grpc::StatusCode::INTERNAL;
  if (ok && (code == grpc::StatusCode::INVALID_ARGUMENT ||
             code == grpc::StatusCode::NOT_FOUND ||
             code == grpc::StatusCode::FAILED_PRECONDITION ||
             code == grpc::StatusCode::ABORTED ||
             code == grpc::StatusCode::PERMISSION_DENIED)) {
    ok = !testing::Reason(status).empty();
  }
  if (!ok) {
    std::fprintf(stderr, "rpc_request_fuzz: %s answered %d (%s) reason '%s'\n",
                 testing::RpcName(rpc), static_cast<int>(code),
                 status.error_message().c_str(),
                 testing::Reason(status).c_str());
    std::abort();
  }
}

}  // namespace
}  // namespace hub::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int rpc = data[0] % static_cast<int>(hub::testing::Rpc::kCount);
  const bool text = data[1] == 't';
  const std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<grpc::Status> status =
      hub::testing::CallRpc(hub::fuzz::TheHub()->stubs.get(), rpc, bytes, text);
  if (status.has_value()) hub::fuzz::Check(*status, rpc);
  return 0;
}
