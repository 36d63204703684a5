// Per-principal limits with bearer tokens (docs/design/limits.md,
// "Principals"): two tokens calling from one host have a budget each, and a
// call without a valid token counts against its host, never against a
// principal, so a bad token neither escapes the limits nor spends someone
// else's budget.
#include <string>
#include <vector>

#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

constexpr char kUnknownToken[] = "not-a-token-of-this-hub-0000";

class AuthLimitsGrpcTest : public AuthGrpcTest {
 protected:
  void StartWithLimits(double requests_per_second, int64_t burst,
                       int64_t streams) {
    edit_options_ = [=](HubServerOptions& options) {
      options.limits.requests_per_second = requests_per_second;
      options.limits.request_burst = burst;
      options.limits.max_streams_per_principal = streams;
    };
    Start(/*tls=*/false);
  }

  // An RPC that takes its token from the bucket before it authenticates.
  grpc::Status CompareAndSet(const std::string& token) {
    hub::v1::CompareAndSetRoleRequest request;
    *request.mutable_role_key() = Cto();
    hub::v1::CompareAndSetRoleResponse response;
    return roles_->CompareAndSetRole(As(token).get(), request, &response);
  }

  static void ExpectRateLimited(const grpc::Status& s) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    EXPECT_EQ(Reason(s), "RATE_LIMITED") << s.error_message();
  }
};

TEST_F(AuthLimitsGrpcTest, TwoTokensOnOneHostHaveAStreamBudgetEach) {
  StartWithLimits(/*requests_per_second=*/0, /*burst=*/1, /*streams=*/2);
  std::vector<int64_t> generations(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        Register(kAlice, absl::StrCat("alice-", i), kProject, &generations[i])
            .ok());
  }
  int64_t bob_generation = 0;
  ASSERT_TRUE(Register(kBob, "bob-0", kProject, &bob_generation).ok());

  Stream a0 = Attach(kAlice, "alice-0", generations[0]);
  Stream a1 = Attach(kAlice, "alice-1", generations[1]);
  ASSERT_TRUE(a0.attached) << a0.status.error_message();
  ASSERT_TRUE(a1.attached) << a1.status.error_message();
  Stream a2 = Attach(kAlice, "alice-2", generations[2]);
  ASSERT_FALSE(a2.attached);
  EXPECT_EQ(a2.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Reason(a2.status), "LIMIT_EXCEEDED") << a2.status.error_message();

  // Bob calls from the same host; alice's full budget is not his.
  Stream b0 = Attach(kBob, "bob-0", bob_generation);
  EXPECT_TRUE(b0.attached) << b0.status.error_message();
  EXPECT_EQ(server_->call_gate()->OpenStreams("principal:alice"), 2);
  EXPECT_EQ(server_->call_gate()->OpenStreams("principal:bob"), 1);
  EXPECT_EQ(server_->call_gate()->OpenStreams("ipv4:127.0.0.1"), 0);
}

TEST_F(AuthLimitsGrpcTest, TwoTokensOnOneHostHaveARateBudgetEach) {
  // One token per 100 s: the burst is all this test can spend.
  StartWithLimits(/*requests_per_second=*/0.01, /*burst=*/3, /*streams=*/0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Status(kAlice).ok()) << "call " << i;
  }
  const grpc::Status refused = Status(kAlice);
  ExpectRateLimited(refused);
  EXPECT_NE(refused.error_message().find("principal:alice"), std::string::npos)
      << refused.error_message();

  grpc::Status first = Status(kBob);
  EXPECT_TRUE(first.ok()) << first.error_message();
}

TEST_F(AuthLimitsGrpcTest,
       CallsWithoutAValidTokenCountAgainstTheHostAndNeverAgainstAPrincipal) {
  StartWithLimits(/*requests_per_second=*/0.01, /*burst=*/3, /*streams=*/0);
  ASSERT_TRUE(Status(kAlice).ok());

  // A bad token is UNAUTHENTICATED, and what it spends is the host's budget:
  // inventing tokens gives no fresh budget...
  for (int i = 0; i < 3; ++i) {
    const grpc::Status s = CompareAndSet(kUnknownToken);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << "call " << i << ": " << s.error_message();
    EXPECT_EQ(Reason(s), "UNAUTHENTICATED");
  }
  ExpectRateLimited(CompareAndSet(kUnknownToken));
  // ...and a call without a token shares that same host budget.
  ExpectRateLimited(CompareAndSet(""));

  // Alice's budget is untouched: two calls left of her three.
  EXPECT_TRUE(Status(kAlice).ok());
  EXPECT_TRUE(Status(kAlice).ok());
  ExpectRateLimited(Status(kAlice));
  const grpc::Status bob = CompareAndSet(kBob);
  EXPECT_NE(Reason(bob), "RATE_LIMITED") << bob.error_message();
}

}  // namespace
}  // namespace hub::auth_grpc
