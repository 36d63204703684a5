// The C++ client over TLS with a bearer token, against the real hubd started
// with --tls_cert/--tls_key/--tls_client_ca/--token_file and a throw-away PKI
// (tests/make_test_pki.sh): HubClient, PresenceSession and RoleWatcher.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/presence_session.h"
#include "clients/cpp/role_watcher.h"
#include "gtest/gtest.h"
#include "tests/hubd_process.h"

namespace hub::client {
namespace {

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kAgentToken[] = "cpp-client-agent-token-01";
constexpr char kOtherToken[] = "cpp-client-other-token-02";

class TlsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    pki_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/pki");
    const std::string make =
        absl::StrCat("sh tests/make_test_pki.sh '", pki_, "'");
    ASSERT_EQ(std::system(make.c_str()), 0);
    const std::string tokens = pki_ + "/tokens.json";
    std::ofstream(tokens) << absl::StrCat(
        R"({"tokens": [{"token": ")", kAgentToken,
        R"(", "principal": "builder", "kind": "agent", "projects": [")",
        kProject, R"("]}, {"token": ")", kOtherToken,
        R"(", "principal": "other", "kind": "agent", "projects": ["*"]}]})");
    hubd_ = std::make_unique<testing::HubdProcess>(
        testing::TempDbPath("tls"),
        std::vector<std::string>{"--tls_cert=" + pki_ + "/server.pem",
                                 "--tls_key=" + pki_ + "/server.key",
                                 "--tls_client_ca=" + pki_ + "/ca.pem",
                                 "--token_file=" + tokens});
    ASSERT_TRUE(hubd_->Start().ok());
  }

  HubClientOptions Options(const std::string& token) {
    HubClientOptions options;
    options.address = hubd_->address();
    options.tls_root_certs_pem = *ReadPemFile(pki_ + "/ca.pem");
    options.tls_cert_chain_pem = *ReadPemFile(pki_ + "/client.pem");
    options.tls_private_key_pem = *ReadPemFile(pki_ + "/client.key");
    options.tls_server_name = "localhost";
    options.token = token;
    return options;
  }

  std::string pki_;
  std::unique_ptr<testing::HubdProcess> hubd_;
};

TEST_F(TlsClientTest, ASessionAndAWatcherConnectWithTlsAndAToken) {
  HubClient client(Options(kAgentToken));
  absl::StatusOr<hub::v1::GetStatusResponse> status = client.GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();

  PresenceSessionOptions session_options;
  session_options.registration.set_agent_id("tls-agent");
  session_options.registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  session_options.registration.set_project_id(kProject);
  PresenceSession session(&client, session_options, {});
  ASSERT_TRUE(session.Start().ok());
  absl::Status attached = session.AwaitAttached(absl::Seconds(30));
  EXPECT_TRUE(attached.ok()) << attached;

  absl::Notification live;
  RoleWatcherCallbacks callbacks;
  callbacks.on_snapshot_end = [&live](const hub::v1::RoleSnapshotEnd&, bool) {
    if (!live.HasBeenNotified()) live.Notify();
  };
  RoleWatcher watcher(&client, {}, callbacks);
  ASSERT_TRUE(watcher.Start().ok());
  EXPECT_TRUE(live.WaitForNotificationWithTimeout(absl::Seconds(30)));
  watcher.Stop();
  session.Stop();
}

TEST_F(TlsClientTest, WithoutTheTokenOrTheRightCaTheHubRefuses) {
  HubClient no_token(Options(""));
  absl::StatusOr<hub::v1::GetStatusResponse> refused = no_token.GetStatus();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ReasonOf(refused.status()), "PRINCIPAL_REQUIRED");

  HubClientOptions wrong_ca = Options(kAgentToken);
  wrong_ca.tls_root_certs_pem = *ReadPemFile(pki_ + "/other_ca.pem");
  HubClient untrusted(wrong_ca);
  EXPECT_EQ(untrusted.GetStatus().status().code(),
            absl::StatusCode::kUnavailable);

  // A session of another principal's agent fails for good.
  HubClient owner(Options(kAgentToken));
  hub::v1::RegisterAgentRequest registration;
  registration.set_agent_id("owned-agent");
  registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  registration.set_project_id(kProject);
  ASSERT_TRUE(owner.RegisterAgent(registration).ok());
  HubClient other(Options(kOtherToken));
  PresenceSessionOptions session_options;
  session_options.registration = registration;
  PresenceSession session(&other, session_options, {});
  ASSERT_TRUE(session.Start().ok());
  absl::Status attached = session.AwaitAttached(absl::Seconds(30));
  EXPECT_EQ(attached.code(), absl::StatusCode::kPermissionDenied) << attached;
  EXPECT_FALSE(ReadPemFile(pki_ + "/missing.pem").ok());
}

}  // namespace
}  // namespace hub::client
