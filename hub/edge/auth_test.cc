#include "hub/edge/auth.h"

#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/test_util.h"

namespace hub {
namespace {

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kOtherProject[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";
constexpr char kAliceToken[] = "alice-secret-token-0001";
constexpr char kOpsToken[] = "ops-secret-token-000002";

std::string TokenFileText() {
  return std::string(R"({"tokens": [
    {"token": ")") +
         kAliceToken + R"(", "principal": "alice", "kind": "agent",
     "projects": [")" +
         kProject + R"("]},
    {"sha256": ")" +
         Sha256Hex(kOpsToken) +
         R"(", "principal": "ops", "kind": "operator", "projects": ["*"]}
  ]})";
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = storage::testing::FreshDbPath(name);
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

std::unique_ptr<Authority> Create(storage::Store* store,
                                  const std::string& file) {
  AuthOptions options;
  options.token_file = file;
  options.poll_interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<Authority>> authority =
      Authority::Create(options, &store->agents());
  EXPECT_TRUE(authority.ok()) << authority.status();
  return authority.ok() ? std::move(*authority) : nullptr;
}

TEST(TokenFile, PlainAndHashedTokensNameTheirPrincipals) {
  absl::StatusOr<std::vector<TokenEntry>> entries =
      ParseTokenFile(TokenFileText());
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].principal.name, "alice");
  EXPECT_EQ((*entries)[0].principal.kind, PrincipalKind::kAgent);
  EXPECT_TRUE((*entries)[0].principal.MayTouchProject(kProject));
  EXPECT_FALSE((*entries)[0].principal.MayTouchProject(kOtherProject));
  EXPECT_EQ((*entries)[1].principal.kind, PrincipalKind::kOperator);
  EXPECT_TRUE((*entries)[1].principal.MayTouchProject(kOtherProject));
}

TEST(TokenFile, ErrorsNameTheEntryButNeverTheToken) {
  const std::string secret = "very-secret-token-xyz";
  for (const std::string& text : {
           R"({"tokens": [{"token": ")" + secret +
               R"(", "principal": "a", "kind": "root", "projects": ["*"]}]})",
           R"({"tokens": [{"token": ")" + secret +
               R"(", "principal": "a", "kind": "agent", "projects": []}]})",
           R"({"tokens": [{"token": ")" + secret +
               R"(", "principal": "", "kind": "agent", "projects": ["*"]}]})",
           R"({"tokens": [{"token": ")" + secret +
               R"(", "principal": "a", "kind": "agent", "projects": ["*"],
               "extra": 1}]})",
           R"({"tokens": [{"token": ")" + secret + R"(" )",
           R"({"tokens": [{"token": ")" + secret +
               R"(", "sha256": "00", "principal": "a", "kind": "agent",
               "projects": ["*"]}]})",
           std::string(R"({"tokens": [{"token": "short", "principal": "a",
               "kind": "agent", "projects": ["*"]}]})"),
           R"({"tokens": [{"token": ")" + secret +
               R"(", "principal": "a", "kind": "agent", "projects": ["*"]},
               {"token": ")" +
               secret +
               R"(", "principal": "b", "kind": "agent", "projects": ["*"]}]})",
       }) {
    absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(text);
    ASSERT_FALSE(entries.ok()) << text;
    EXPECT_EQ(entries.status().message().find(secret), std::string::npos)
        << entries.status();
    EXPECT_NE(entries.status().message().find("token file"), std::string::npos);
  }
}

TEST(Authenticate, EachFailureHasItsReason) {
  auto store = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
  auto authority = Create(store.get(), WriteFile("tokens", TokenFileText()));
  ASSERT_NE(authority, nullptr);
  EXPECT_EQ(authority->token_count(), 2u);

  absl::StatusOr<Principal> none = authority->AuthenticateValues({});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ReasonOf(none.status()), "PRINCIPAL_REQUIRED");
  for (absl::string_view bad :
       {"Basic abc", "Bearer", "Bearer ", "Bearer a b", "bearer-x"}) {
    absl::StatusOr<Principal> p = authority->AuthenticateValues({bad});
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(ReasonOf(p.status()), "UNAUTHENTICATED") << bad;
  }
  absl::StatusOr<Principal> unknown =
      authority->AuthenticateValues({"Bearer not-a-known-token-123"});
  EXPECT_EQ(ReasonOf(unknown.status()), "UNAUTHENTICATED");
  EXPECT_EQ(unknown.status().message().find("not-a-known"), std::string::npos);
  const std::string alice = std::string("Bearer ") + kAliceToken;
  const std::string ops = std::string("bearer ") + kOpsToken;
  EXPECT_EQ(ReasonOf(authority->AuthenticateValues({alice, alice}).status()),
            "UNAUTHENTICATED");
  absl::StatusOr<Principal> a = authority->AuthenticateValues({alice});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "alice");
  EXPECT_FALSE(a->anonymous);
  absl::StatusOr<Principal> o = authority->AuthenticateValues({ops});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->name, "ops");
}

TEST(Authenticate, WithoutATokenFileEveryCallerIsAnAnonymousAdmin) {
  auto store = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
  auto authority = Create(store.get(), "");
  ASSERT_NE(authority, nullptr);
  EXPECT_FALSE(authority->enabled());
  absl::StatusOr<Principal> p = authority->AuthenticateValues({});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->anonymous);
  EXPECT_EQ(p->kind, PrincipalKind::kAdmin);
  EXPECT_TRUE(authority->CheckOwner(*p, "agent-1").ok());
  EXPECT_FALSE(authority->OwnerKnown("agent-1"));
}

TEST(Authority, ABadReloadKeepsThePreviousTokens) {
  auto store = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
  const std::string path = WriteFile("tokens", TokenFileText());
  auto authority = Create(store.get(), path);
  ASSERT_NE(authority, nullptr);
  std::ofstream(path, std::ios::trunc) << "{ not json";
  EXPECT_FALSE(authority->Reload().ok());
  EXPECT_TRUE(
      authority->AuthenticateValues({std::string("Bearer ") + kAliceToken})
          .ok());
  std::ofstream(path, std::ios::trunc) << R"({"tokens": []})";
  EXPECT_TRUE(authority->Reload().ok());
  EXPECT_FALSE(
      authority->AuthenticateValues({std::string("Bearer ") + kAliceToken})
          .ok());
}

TEST(Authority, TheFirstOwnerNotedStays) {
  auto store = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
  auto authority = Create(store.get(), WriteFile("tokens", TokenFileText()));
  ASSERT_NE(authority, nullptr);
  const Principal alice =
      *authority->AuthenticateValues({std::string("Bearer ") + kAliceToken});
  const Principal ops =
      *authority->AuthenticateValues({std::string("Bearer ") + kOpsToken});
  authority->RememberOwner("agent-1", alice.name);
  authority->RememberOwner("agent-1", ops.name);
  EXPECT_TRUE(authority->CheckOwner(alice, "agent-1").ok());
  EXPECT_EQ(authority->CheckOwner(ops, "agent-1").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(Authority, OwnersOnRecordAreKnownAfterARestart) {
  const std::string db = storage::testing::FreshDbPath();
  const std::string file = WriteFile("tokens", TokenFileText());
  Principal alice, ops;
  {
    auto store = storage::testing::OpenOrDie(db);
    auto authority = Create(store.get(), file);
    ASSERT_NE(authority, nullptr);
    alice =
        *authority->AuthenticateValues({std::string("Bearer ") + kAliceToken});
    ops = *authority->AuthenticateValues({std::string("Bearer ") + kOpsToken});
    // What a registration's transaction records (storage::AgentRegistration
    // ::owner).
    ASSERT_EQ(*store->agents().ClaimAgentOwner("agent-1", alice.name, 1),
              alice.name);
    EXPECT_EQ(ReasonOf(authority->CheckOwner(ops, "agent-2")),
              "PERMISSION_DENIED");
  }
  auto store = storage::testing::OpenOrDie(db);
  auto authority = Create(store.get(), file);
  ASSERT_NE(authority, nullptr);
  EXPECT_TRUE(authority->OwnerKnown("agent-1"));
  EXPECT_TRUE(authority->CheckOwner(alice, "agent-1").ok());
  absl::Status denied = authority->CheckOwner(ops, "agent-1");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(MetadataOf(denied).at("agent_id"), "agent-1");
}

TEST(Authority, KindsAndProjectsAreChecked) {
  Principal agent;
  agent.name = "alice";
  agent.anonymous = false;
  agent.kind = PrincipalKind::kAgent;
  agent.all_projects = false;
  agent.projects = {kProject};
  EXPECT_EQ(ReasonOf(RequireKind(agent, PrincipalKind::kOperator, "x")),
            "PERMISSION_DENIED");
  EXPECT_TRUE(RequireKind(agent, PrincipalKind::kAgent, "x").ok());
  EXPECT_TRUE(RequireProject(agent, kProject).ok());
  absl::Status other = RequireProject(agent, kOtherProject);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ReasonOf(other), "PROJECT_SCOPE_MISMATCH");
  Principal admin = agent;
  admin.kind = PrincipalKind::kAdmin;
  EXPECT_TRUE(RequireKind(admin, PrincipalKind::kOperator, "x").ok());
}

TEST(ListenRule, LoopbackIsRecognised) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:27889"));
  EXPECT_TRUE(IsLoopbackListen("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackListen("localhost:1"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:1"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:1"));
  EXPECT_FALSE(IsLoopbackListen("[::]:1"));
  EXPECT_FALSE(IsLoopbackListen("10.0.0.1:1"));
  EXPECT_FALSE(IsLoopbackListen("hub.example.com:1"));
}

TEST(ListenRule, NonLoopbackNeedsTlsAndTokensOrInsecure) {
  EXPECT_TRUE(CheckListenExposure("127.0.0.1:1", false, false, false).ok());
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:1", true, true, false).ok());
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:1", false, false, true).ok());
  absl::Status refused = CheckListenExposure("0.0.0.0:1", true, false, false);
  EXPECT_EQ(ReasonOf(refused), "INSECURE_LISTEN_REFUSED");
  EXPECT_NE(refused.message().find("--token_file"), std::string::npos);
  EXPECT_EQ(refused.message().find("--tls_cert"), std::string::npos);
  EXPECT_NE(CheckListenExposure("0.0.0.0:1", false, true, false)
                .message()
                .find("--tls_cert"),
            std::string::npos);
}

TEST(Tls, UnusableFilesAreRefusedNamingThem) {
  TlsOptions tls;
  tls.cert_file = "/nonexistent/cert.pem";
  tls.key_file = "/nonexistent/key.pem";
  auto creds = ReadTlsFiles(tls);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("/nonexistent/cert.pem"),
            std::string::npos);
  TlsOptions no_key;
  no_key.cert_file = WriteFile("cert", "not a pem");
  EXPECT_FALSE(ReadTlsFiles(no_key).ok());
  TlsOptions garbage;
  garbage.cert_file = no_key.cert_file;
  garbage.key_file = no_key.cert_file;
  auto bad = ReadTlsFiles(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no PEM certificate"),
            std::string::npos);
  auto plaintext = ReadTlsFiles(TlsOptions());
  ASSERT_TRUE(plaintext.ok());
  EXPECT_EQ(plaintext->cert_pem, "");
}

}  // namespace
}  // namespace hub
