#include "tools/hubctl/cli.h"

#include <sstream>

#include "clients/cpp/hub_error.h"
#include "gtest/gtest.h"

namespace hub::hubctl {
namespace {

const std::vector<FlagSpec> kSpecs = {
    {"json", "", "switch"}, {"addr", "HOST:PORT", "valued"}, {"n", "N", ""}};

TEST(ArgsTest, ParsesFlagsInEveryFormAndKeepsPositionalOrder) {
  auto args =
      Args::Parse({"a", "--addr", "h:1", "b", "--json", "--n=5"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->positional(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(args->Get("addr"), "h:1");
  EXPECT_TRUE(args->Has("json"));
  EXPECT_EQ(**args->GetInt("n"), 5);
  EXPECT_FALSE(args->Has("absent"));
}

TEST(ArgsTest, UnknownFlagsMissingValuesAndBadNumbersAreUsageErrors) {
  EXPECT_TRUE(IsUsageError(Args::Parse({"--nope"}, kSpecs).status()));
  EXPECT_TRUE(IsUsageError(Args::Parse({"--addr"}, kSpecs).status()));
  EXPECT_TRUE(IsUsageError(Args::Parse({"--json=1"}, kSpecs).status()));
  auto args = Args::Parse({"--n=x"}, kSpecs);
  ASSERT_TRUE(args.ok());
  EXPECT_TRUE(IsUsageError(args->GetInt("n").status()));
}

TEST(ArgsTest, EverythingAfterDoubleDashIsPositional) {
  auto args = Args::Parse({"--", "--json"}, kSpecs);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(args->positional(), (std::vector<std::string>{"--json"}));
}

TEST(ExitCodeTest, FollowsTheGrpcCodeAndUsesSixtyFourForUsage) {
  EXPECT_EQ(ExitCodeOf(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeOf(absl::NotFoundError("x")), 5);
  EXPECT_EQ(ExitCodeOf(absl::FailedPreconditionError("x")), 9);
  EXPECT_EQ(ExitCodeOf(absl::UnavailableError("x")), 14);
  EXPECT_EQ(ExitCodeOf(UsageError("x")), kUsageExit);
}

TEST(EnumWordTest, RoundTripsBetweenWordsAndEnumValues) {
  EXPECT_EQ(
      EnumWord(hub::v1::RoleState_Name(hub::v1::ROLE_STATE_ELECTED_PROBING),
               "ROLE_STATE_"),
      "elected-probing");
  auto state = ParseEnumWord<hub::v1::RoleState>(
      "state", "elected-probing", "ROLE_STATE_", &hub::v1::RoleState_Parse);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, hub::v1::ROLE_STATE_ELECTED_PROBING);
  EXPECT_TRUE(IsUsageError(
      ParseEnumWord<hub::v1::RoleState>("state", "unspecified", "ROLE_STATE_",
                                        &hub::v1::RoleState_Parse)
          .status()));
}

TEST(TableTest, AlignsColumns) {
  Table table({"A", "BB"});
  table.Add({"xxx", "y"});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(), "A    BB\nxxx  y\n");
}

TEST(PrintErrorTest, JsonErrorsCarryReasonAndMetadata) {
  std::ostringstream err;
  PrintError(
      err,
      client::MakeHubError(absl::StatusCode::kNotFound, "AGENT_NOT_FOUND",
                           "no \"x\"", {{"agent_id", "x"}}),
      /*json=*/true);
  EXPECT_EQ(err.str(),
            "{\"code\":\"NOT_FOUND\",\"exitCode\":5,\"reason\":"
            "\"AGENT_NOT_FOUND\",\"message\":\"no \\\"x\\\"\",\"metadata\":{"
            "\"agent_id\":\"x\"}}\n");
}

}  // namespace
}  // namespace hub::hubctl
