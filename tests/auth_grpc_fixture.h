// The in-process fixture shared by the authentication gRPC tests: a
// HubServer with a token file (five principals over two projects), optional
// TLS and mutual TLS from a throw-away PKI (tests/make_test_pki.sh), stubs,
// and helpers that call as a token.
#ifndef HUB_TESTS_AUTH_GRPC_FIXTURE_H_
#define HUB_TESTS_AUTH_GRPC_FIXTURE_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/admin.grpc.pb.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "status/status.h"
#include "tests/hub_test_util.h"

namespace hub::auth_grpc {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;
using testing::Reason;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kOtherProject[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";
constexpr char kAlice[] = "alice-agent-token-000001";     // agent, kProject
constexpr char kBob[] = "bob-agent-token-00000002";       // agent, kProject
constexpr char kCarol[] = "carol-agent-token-000003";     // agent, other
constexpr char kOps[] = "ops-operator-token-000004";      // operator, *
constexpr char kOtherOps[] = "otherops-token-000000005";  // operator, other
constexpr char kAdmin[] = "admin-token-0000000000006";    // admin, *

inline std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string TokenEntryJson(const std::string& token,
                                  const std::string& principal,
                                  const std::string& kind,
                                  const std::string& project) {
  return absl::StrCat(R"({"token": ")", token, R"(", "principal": ")",
                      principal, R"(", "kind": ")", kind,
                      R"(", "projects": [")", project, R"("]})");
}

inline std::string TokenFileJson(bool with_admin = true) {
  std::string entries = absl::StrCat(
      TokenEntryJson(kAlice, "alice", "agent", kProject), ",",
      TokenEntryJson(kBob, "bob", "agent", kProject), ",",
      TokenEntryJson(kCarol, "carol", "agent", kOtherProject), ",",
      TokenEntryJson(kOps, "ops", "operator", "*"), ",",
      TokenEntryJson(kOtherOps, "otherops", "operator", kOtherProject));
  if (with_admin) {
    absl::StrAppend(&entries, ",",
                    TokenEntryJson(kAdmin, "root", "admin", "*"));
  }
  return absl::StrCat(R"({"tokens": [)", entries, "]}");
}

inline hub::v1::RoleKey Cto(const std::string& project = kProject) {
  hub::v1::RoleKey key;
  key.set_project_id(project);
  key.set_kind(hub::v1::ROLE_KIND_CTO);
  return key;
}

// A client context carrying `token` ("" = none).
inline std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  }
  return context;
}

class AuthGrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new std::string(TmpDir() + "/pki");
    const std::string command =
        absl::StrCat("sh tests/make_test_pki.sh '", *pki_, "'");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static std::string Pki(const std::string& name) {
    return ReadFile(absl::StrCat(*pki_, "/", name));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  // Starts the hub with tokens, optionally TLS (and mTLS).
  // `tls_dir` holds server.pem, server.key and ca.pem (default: the PKI).
  void Start(bool tls, bool mtls = false, std::string tls_dir = "") {
    if (tls_dir.empty()) tls_dir = *pki_;
    token_file_ = absl::StrCat(TmpDir(), "/", Name(), ".tokens.json");
    std::ofstream(token_file_, std::ios::trunc) << TokenFileJson();
    HubServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = testing::FreshTestDbPath();
    options.presence.detach_grace = absl::Milliseconds(200);
    options.tick_interval = absl::Milliseconds(20);
    options.auth.token_file = token_file_;
    options.auth.poll_interval = absl::Milliseconds(50);
    if (edit_options_) edit_options_(options);
    if (tls) {
      options.tls.cert_file = tls_dir + "/server.pem";
      options.tls.key_file = tls_dir + "/server.key";
      if (mtls) options.tls.client_ca_file = tls_dir + "/ca.pem";
    }
    auto server = HubServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    if (!tls) Connect(grpc::InsecureChannelCredentials());
  }

  static std::string Name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  void Connect(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    grpc::ChannelArguments args;
    // The server certificate names localhost; the tests dial 127.0.0.1.
    args.SetSslTargetNameOverride("localhost");
    // Every Connect makes its own connections (a new TLS handshake).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel =
        grpc::CreateCustomChannel(server_->address(), credentials, args);
    hub_ = hub::v1::HubService::NewStub(channel);
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
    admin_ = hub::v1::AdminService::NewStub(channel);
    reservations_ = hub::v1::ReservationService::NewStub(channel);
  }

  static std::shared_ptr<grpc::ChannelCredentials> Tls(
      const std::string& ca, const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Pki(ca + ".pem");
    if (!client.empty()) {
      ssl.pem_cert_chain = Pki(client + ".pem");
      ssl.pem_private_key = Pki(client + ".key");
    }
    return grpc::SslCredentials(ssl);
  }

  grpc::Status Status(const std::string& token) {
    hub::v1::GetStatusResponse response;
    return hub_->GetStatus(As(token).get(), hub::v1::GetStatusRequest(),
                           &response);
  }

  grpc::Status Register(const std::string& token, const std::string& agent_id,
                        const std::string& project = kProject,
                        int64_t* generation = nullptr) {
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id(agent_id);
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    request.set_project_id(project);
    request.add_capabilities("role:cto:candidate");
    hub::v1::RegisterAgentResponse response;
    grpc::Status s =
        presence_->RegisterAgent(As(token).get(), request, &response);
    if (generation != nullptr) *generation = response.presence_generation();
    return s;
  }

  grpc::Status Heartbeat(const std::string& token, const std::string& agent) {
    hub::v1::HeartbeatRequest request;
    request.set_agent_id(agent);
    hub::v1::HeartbeatResponse response;
    return presence_->Heartbeat(As(token).get(), request, &response);
  }

  // Opens a presence stream as `token` and sends hello for `agent`: the
  // first answer frame, or the status the stream ended with.
  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReaderWriter<AttachRequest, AttachResponse>>
        stream;
    bool attached = false;
    grpc::Status status;
  };
  Stream Attach(const std::string& token, const std::string& agent,
                int64_t generation) {
    Stream s;
    s.context = As(token);
    s.context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Hours(1)));
    s.stream = presence_->Attach(s.context.get());
    AttachRequest hello;
    hello.mutable_hello()->set_agent_id(agent);
    hello.mutable_hello()->set_presence_generation(generation);
    s.stream->Write(hello);
    AttachResponse frame;
    if (s.stream->Read(&frame) && frame.has_attached()) {
      s.attached = true;
      return s;
    }
    s.stream->WritesDone();
    while (s.stream->Read(&frame)) {
    }
    s.status = s.stream->Finish();
    return s;
  }

  inline static std::string* pki_ = nullptr;
  // Applied to the options before Start() starts the hub (e.g. limits).
  std::function<void(HubServerOptions&)> edit_options_;
  std::string token_file_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::HubService::Stub> hub_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
  std::unique_ptr<hub::v1::AdminService::Stub> admin_;
  std::unique_ptr<hub::v1::ReservationService::Stub> reservations_;
};

}  // namespace hub::auth_grpc

#endif  // HUB_TESTS_AUTH_GRPC_FIXTURE_H_
