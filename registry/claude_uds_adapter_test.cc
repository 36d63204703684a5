#include "registry/claude_uds_adapter.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace hub {
namespace {

constexpr char kOkProbe[] =
    R"({"schema_version":"tfx-live.transport-probe.v1","ok":true,)"
    R"("reachable":true,"wakeable":true,"transport_selected":"claude-uds",)"
    R"("reason_code":"ok"})";

TransportLocator Uds(std::optional<std::string> session_id,
                     std::optional<std::string> short_id = std::nullopt) {
  TransportLocator l;
  l.schema_version = "tfx.transport-locator.v1";
  l.transport_id = "trn_uds";
  l.kind = std::string(kKindClaudeUds);
  l.host_id = "hst_test";
  l.capabilities = {"probe", "wake", "activate"};
  l.locator = ClaudeUdsLocator{session_id, short_id, "local-hub"};
  return l;
}

// A temporary directory holding a fake `tfx-live`: a real executable that
// records its argv (NUL-separated) in argv.bin, prints out.txt and exits
// with the code the test chose.
class ClaudeUdsAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    std::string pattern = base + "/uds.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    command_ = dir_ + "/tfx-live";
  }

  // Writes the fake command. `before_exit` runs in the script just before
  // it exits (e.g. a sleep).
  void Fake(int exit_code, const std::string& output,
            const std::string& before_exit = "") {
    std::ofstream(dir_ + "/out.txt") << output;
    std::ofstream script(command_);
    script << "#!/bin/sh\n"
           << "printf '%s\\0' \"$@\" > '" << dir_ << "/argv.bin'\n"
           << "cat '" << dir_ << "/out.txt'\n"
           << before_exit << "\n"
           << "exit " << exit_code << "\n";
    script.close();
    ASSERT_EQ(chmod(command_.c_str(), 0755), 0);
  }

  ClaudeUdsAdapter Adapter() {
    ClaudeUdsAdapterOptions options;
    options.command = {command_};
    return ClaudeUdsAdapter(options);
  }

  // The argv the fake command was started with, without argv[0]; empty
  // when it never ran.
  std::vector<std::string> RecordedArgv() {
    std::ifstream in(dir_ + "/argv.bin", std::ios::binary);
    if (!in) return {};
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    if (!text.empty() && text.back() == '\0') text.pop_back();
    return absl::StrSplit(text, '\0');
  }

  std::string dir_;
  std::string command_;
};

TEST_F(ClaudeUdsAdapterTest, ProbeRunsTheCommandWithTfxLiveArgvAndReportsOk) {
  Fake(0, kOkProbe);
  TransportResult r = Adapter().Probe(Uds("sess-1"), absl::Milliseconds(2500));
  EXPECT_EQ(r.code, "ok") << r.detail;
  EXPECT_EQ(RecordedArgv(), (std::vector<std::string>{
                                "probe", "--session-id", "sess-1", "--bridge",
                                "local-hub", "--timeout", "3"}));
}

TEST_F(ClaudeUdsAdapterTest, ProbeUsesTheShortIdWithoutASessionIdAndTheBridge) {
  Fake(0, kOkProbe);
  ClaudeUdsAdapterOptions options;
  options.command = {command_};
  options.bridge = "/opt/triflux/hub/bridge.mjs";
  ClaudeUdsAdapter adapter(options);
  EXPECT_TRUE(adapter.Probe(Uds(std::nullopt, "ab12"), absl::Seconds(10)).ok());
  EXPECT_EQ(RecordedArgv(),
            (std::vector<std::string>{"probe", "--short", "ab12", "--bridge",
                                      "/opt/triflux/hub/bridge.mjs",
                                      "--timeout", "10"}));
}

TEST_F(ClaudeUdsAdapterTest, ExitStatusOneIsTargetNotFound) {
  Fake(1, "no such session\n");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "target_not_found");
}

TEST_F(ClaudeUdsAdapterTest, OtherExitStatusesAreTransportErrors) {
  Fake(3, "bridge crashed\n");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "transport_error");
}

TEST_F(ClaudeUdsAdapterTest, AReasonCodeTheCommandReportsIsKept) {
  Fake(0, R"({"schema_version":"tfx-live.transport-probe.v1","ok":false,)"
          R"("reason_code":"permission_denied"})");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "permission_denied");
  Fake(2, R"({"ok":false,"reason_code":"timeout"})");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code, "timeout");
}

TEST_F(ClaudeUdsAdapterTest, LogLinesBeforeTheJsonResultAreSkipped) {
  Fake(0, absl::StrCat("connecting to bridge...\n", kOkProbe, "\n"));
  EXPECT_TRUE(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).ok());
}

TEST_F(ClaudeUdsAdapterTest,
       AnAnswerThatIsNotTheProbeSchemaIsAProtocolMismatch) {
  Fake(0, "reachable\n");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "protocol_mismatch");
  Fake(0, R"({"schema_version":"other.v9","ok":true})");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "protocol_mismatch");
  Fake(0, R"({"ok":false,"reason_code":"made_up"})");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "protocol_mismatch");
}

TEST_F(ClaudeUdsAdapterTest, ACommandThatDoesNotFinishInTimeIsKilled) {
  Fake(0, kOkProbe, "sleep 30");
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Milliseconds(300)).code,
            "timeout");
}

TEST_F(ClaudeUdsAdapterTest, OutputIsBoundedAndAFloodIsNotAResult) {
  // 1 MiB of noise, then the JSON: only the first 64 KiB are read.
  Fake(0, "",
       absl::StrCat("head -c 1048576 /dev/zero | tr '\\0' 'x'; echo '",
                    kOkProbe, "'"));
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(10)).code,
            "protocol_mismatch");
}

TEST_F(ClaudeUdsAdapterTest, AMissingCommandMakesTheAdapterUnavailable) {
  ClaudeUdsAdapterOptions options;
  options.command = {dir_ + "/not-there"};
  ClaudeUdsAdapter adapter(options);
  EXPECT_EQ(adapter.Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "adapter_unavailable");
}

TEST_F(ClaudeUdsAdapterTest, ANonExecutableCommandIsPermissionDenied) {
  Fake(0, kOkProbe);
  ASSERT_EQ(chmod(command_.c_str(), 0644), 0);
  EXPECT_EQ(Adapter().Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "permission_denied");
}

TEST_F(ClaudeUdsAdapterTest, WithoutACommandEveryCallIsAdapterUnavailable) {
  Fake(0, kOkProbe);
  ClaudeUdsAdapter adapter;
  EXPECT_EQ(adapter.Probe(Uds("sess-1"), absl::Seconds(5)).code,
            "adapter_unavailable");
  EXPECT_EQ(adapter.Wake(Uds("sess-1"), "{}", absl::Seconds(5)).code,
            "adapter_unavailable");
  EXPECT_TRUE(RecordedArgv().empty());  // nothing ran
}

TEST_F(ClaudeUdsAdapterTest, ATmuxLocatorIsNotServed) {
  Fake(0, kOkProbe);
  TransportLocator tmux = Uds("sess-1");
  tmux.kind = std::string(kKindTmux);
  tmux.locator = TmuxLocator{"work", "default"};
  EXPECT_EQ(Adapter().Probe(tmux, absl::Seconds(5)).code, "protocol_mismatch");
  EXPECT_TRUE(RecordedArgv().empty());
}

TEST_F(ClaudeUdsAdapterTest, WakeSendsTheActivationAsOnePromptArgument) {
  Fake(0, R"({"ok":true})");
  // Quotes, spaces and shell syntax arrive verbatim: no shell is involved.
  const std::string activation =
      R"({"schema":"tfx.role-activation.v1","note":"it's $(touch x); `id`"})";
  TransportResult r =
      Adapter().Wake(Uds("sess-1"), activation, absl::Seconds(10));
  EXPECT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(RecordedArgv(),
            (std::vector<std::string>{"ask", "--cli", "claude", "--transport",
                                      "uds", "--session-id", "sess-1",
                                      "--bridge", "local-hub", "--prompt",
                                      activation, "--timeout", "10"}));
  struct stat st;
  EXPECT_NE(stat((dir_ + "/x").c_str(), &st), 0);
}

TEST_F(ClaudeUdsAdapterTest, WakeReportsTheCommandsFailure) {
  Fake(0, R"({"ok":false,"reason_code":"target_not_found"})");
  EXPECT_EQ(Adapter().Wake(Uds("sess-1"), "{}", absl::Seconds(5)).code,
            "target_not_found");
  Fake(0, R"({"ok":false})");
  EXPECT_EQ(Adapter().Wake(Uds("sess-1"), "{}", absl::Seconds(5)).code,
            "transport_error");
  Fake(1, "");
  EXPECT_EQ(Adapter().Wake(Uds("sess-1"), "{}", absl::Seconds(5)).code,
            "target_not_found");
}

}  // namespace
}  // namespace hub
