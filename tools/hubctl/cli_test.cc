#include "tools/hubctl/cli.h"

#include <cstdlib>
#include <sstream>

#include "absl/strings/match.h"
#include "clients/cpp/hub_error.h"
#include "google/protobuf/struct.pb.h"
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

TEST(ArgsTest, ARepeatedFlagKeepsEveryValueAndGetReturnsTheLast) {
  auto args = Args::Parse({"--addr=a", "--addr", "b", "--json"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->GetAll("addr"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(args->Get("addr"), "b");
  EXPECT_EQ(args->GetAll("json"), (std::vector<std::string>{""}));
  EXPECT_TRUE(args->GetAll("n").empty());
}

TEST(ArgsTest, NumbersAndTimesParseOrAreUsageErrors) {
  auto args =
      Args::Parse({"--n=1.5", "--addr=2026-01-02T03:04:05.250+01:00"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(**args->GetDouble("n"), 1.5);
  EXPECT_FALSE(args->GetDouble("json")->has_value());  // absent
  auto time = args->GetTime("addr");
  ASSERT_TRUE(time.ok()) << time.status();
  const google::protobuf::Timestamp t = ToProtoTimestamp(**time);
  EXPECT_EQ(t.seconds(), 1767319445);  // 2026-01-02T02:04:05Z
  EXPECT_EQ(t.nanos(), 250000000);
  EXPECT_EQ(FormatTimestamp(t), "2026-01-02T02:04:05.250Z");
  EXPECT_TRUE(IsUsageError(args->GetTime("n").status()));
  auto bad = Args::Parse({"--n=ten"}, kSpecs);
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(IsUsageError(bad->GetDouble("n").status()));
}

TEST(ToProtoTimestampTest, NanosAreNeverNegativeBefore1970) {
  const google::protobuf::Timestamp t =
      ToProtoTimestamp(absl::FromUnixMillis(-1));
  EXPECT_EQ(t.seconds(), -1);
  EXPECT_EQ(t.nanos(), 999000000);
}

TEST(FlagOrEnvTest, TheFlagWinsOverTheEnvironment) {
  const std::vector<FlagSpec> specs = {{"agent", "AGENT_ID", ""},
                                       {"project", "PROJECT_ID", ""}};
  setenv("HUB_AGENT_ID", "env-agent", 1);
  unsetenv("HUB_PROJECT_ID");
  auto none = Args::Parse({}, specs);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(AgentFromArgs(*none), "env-agent");
  EXPECT_EQ(ProjectFromArgs(*none), "");
  auto given = Args::Parse({"--agent=a", "--project=p"}, specs);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(AgentFromArgs(*given), "a");
  EXPECT_EQ(ProjectFromArgs(*given), "p");
  unsetenv("HUB_AGENT_ID");
}

TEST(JsonFlagTest, ParsesAnObjectAndRefusesAnythingElse) {
  const std::vector<FlagSpec> specs = {{"payload", "JSON", ""}};
  google::protobuf::Struct value;
  auto absent = Args::Parse({}, specs);
  ASSERT_TRUE(absent.ok());
  EXPECT_TRUE(JsonFlag(*absent, "payload", &value).ok());
  EXPECT_EQ(value.fields_size(), 0);
  auto good = Args::Parse({"--payload={\"target\":\"//...\",\"n\":2}"}, specs);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(JsonFlag(*good, "payload", &value).ok());
  EXPECT_EQ(value.fields().at("target").string_value(), "//...");
  EXPECT_EQ(value.fields().at("n").number_value(), 2);
  for (const char* text : {"--payload=[1]", "--payload={", "--payload=3"}) {
    auto bad = Args::Parse({text}, specs);
    ASSERT_TRUE(bad.ok());
    absl::Status s = JsonFlag(*bad, "payload", &value);
    EXPECT_TRUE(IsUsageError(s)) << text << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--payload")) << s;
  }
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
