#include "registry/tmux_adapter.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "registry/subprocess.h"

namespace hub {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TransportLocator Locator(const std::string& session, const std::string& mux) {
  TransportLocator l;
  l.schema_version = "tfx.transport-locator.v1";
  l.transport_id = "trn_test";
  l.kind = std::string(kKindTmux);
  l.host_id = "hst_test";
  l.capabilities = {"probe", "wake", "activate"};
  l.locator = TmuxLocator{session, mux};
  return l;
}

// A private tmux server (its own socket in a temporary directory) with one
// session "work" whose program copies what it is typed into out.txt.
class TmuxAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Not $TEST_TMPDIR: a unix socket path must stay under 108 bytes.
    char dir[] = "/tmp/hubtmux.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/sock";
    out_ = dir_ + "/out.txt";
    CommandResult started = RunCommand(
        {"tmux", "-S", socket_, "new-session", "-d", "-s", "work", "-x", "200",
         "-y", "20", absl::StrCat("stty -echo; cat > ", out_)},
        absl::Seconds(10));
    ASSERT_TRUE(started.ok()) << started.output;
    options_.server_args =
        [this](
            const std::string& mux) -> std::optional<std::vector<std::string>> {
      if (mux == "mux_test") return std::vector<std::string>{"-S", socket_};
      if (mux == "mux_gone")
        return std::vector<std::string>{"-S", dir_ + "/none"};
      return std::nullopt;
    };
  }

  void TearDown() override {
    RunCommand({"tmux", "-S", socket_, "kill-server"}, absl::Seconds(10));
    RunCommand({"rm", "-rf", dir_}, absl::Seconds(10));
  }

  // Waits until out.txt holds `expected` (cat writes each line as it comes).
  std::string WaitForOutput(const std::string& expected) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::string got;
    while (absl::Now() < deadline) {
      got = ReadFile(out_);
      if (got == expected) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return got;
  }

  std::string dir_, socket_, out_;
  TmuxAdapterOptions options_;
};

TEST_F(TmuxAdapterTest, ProbeOfALiveSessionIsOk) {
  TmuxAdapter adapter(options_);
  TransportResult r =
      adapter.Probe(Locator("work", "mux_test"), absl::Seconds(5));
  EXPECT_EQ(r.code, "ok") << r.detail;
}

TEST_F(TmuxAdapterTest, ProbeOfAMissingSessionIsTargetNotFound) {
  TmuxAdapter adapter(options_);
  EXPECT_EQ(adapter.Probe(Locator("nosuch", "mux_test"), absl::Seconds(5)).code,
            "target_not_found");
  // Session names match exactly, never as a prefix of another session.
  EXPECT_EQ(adapter.Probe(Locator("wor", "mux_test"), absl::Seconds(5)).code,
            "target_not_found");
}

TEST_F(TmuxAdapterTest, ProbeOfAServerThatIsNotRunningIsTargetNotFound) {
  TmuxAdapter adapter(options_);
  EXPECT_EQ(adapter.Probe(Locator("work", "mux_gone"), absl::Seconds(5)).code,
            "target_not_found");
  EXPECT_EQ(
      adapter.Probe(Locator("work", "mux_unknown"), absl::Seconds(5)).code,
      "target_not_found");
}

TEST_F(TmuxAdapterTest, AMissingTmuxProgramIsAdapterUnavailable) {
  TmuxAdapterOptions options = options_;
  options.tmux = "/nonexistent/tmux";
  TmuxAdapter adapter(options);
  EXPECT_EQ(adapter.Probe(Locator("work", "mux_test"), absl::Seconds(5)).code,
            "adapter_unavailable");
}

TEST_F(TmuxAdapterTest, AHungTmuxIsATimeout) {
  const std::string hung = dir_ + "/hung-tmux";
  {
    std::ofstream script(hung);
    script << "#!/bin/sh\nexec sleep 30\n";
  }
  chmod(hung.c_str(), 0755);
  TmuxAdapterOptions options = options_;
  options.tmux = hung;
  TmuxAdapter adapter(options);
  const absl::Time start = absl::Now();
  EXPECT_EQ(
      adapter.Probe(Locator("work", "mux_test"), absl::Milliseconds(200)).code,
      "timeout");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(TmuxAdapterTest, ANonTmuxLocatorIsAProtocolMismatch) {
  TransportLocator uds = Locator("work", "mux_test");
  uds.kind = std::string(kKindClaudeUds);
  uds.locator = ClaudeUdsLocator{std::string("s"), std::nullopt, "b"};
  TmuxAdapter adapter(options_);
  EXPECT_EQ(adapter.Probe(uds, absl::Seconds(5)).code, "protocol_mismatch");
}

TEST_F(TmuxAdapterTest, WakeTypesTheEnvelopeLiterallyFollowedByEnter) {
  TmuxAdapter adapter(options_);
  // Shell and tmux key syntax inside the envelope stay plain text.
  const std::string envelope =
      R"({"schema":"tfx.role-activation.v1","epoch":3,"x":"$(touch pwned); C-c Enter"})";
  TransportResult r =
      adapter.Wake(Locator("work", "mux_test"), envelope, absl::Seconds(5));
  ASSERT_EQ(r.code, "ok") << r.detail;
  EXPECT_EQ(WaitForOutput(envelope + "\n"), envelope + "\n");
  EXPECT_NE(access((dir_ + "/pwned").c_str(), F_OK), 0);
}

TEST_F(TmuxAdapterTest, WakeOfAMissingSessionIsTargetNotFound) {
  TmuxAdapter adapter(options_);
  EXPECT_EQ(
      adapter.Wake(Locator("nosuch", "mux_test"), "{}", absl::Seconds(5)).code,
      "target_not_found");
}

}  // namespace
}  // namespace hub
