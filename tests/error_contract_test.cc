// Black box: every error of the real hubd is readable by a default gRPC
// client (issue #16 §3, docs/design/contracts.md "Errors").
//
// For every RPC of every hub.v1 service that hubd lists by reflection (a
// new RPC is covered without touching this file), random well-formed
// requests built by reflection (tests/random_request.h) and garbage bytes
// go through a generic stub on a channel with gRPC's default limits. Every
// answer must keep the contract (ContractViolation); garbage that does not
// parse must be INVALID_ARGUMENT / REQUEST_MALFORMED; and afterwards hubd
// still serves, shuts down cleanly, and its database passes
// PRAGMA integrity_check.
//
// Seeded: the seed is printed, and HUB_ERROR_CONTRACT_SEED replays it
// (requests are a function of the seed, the RPC and the round);
// HUB_ERROR_CONTRACT_ROUNDS sets the rounds per RPC.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/error_contract_client.h"
#include "tests/hubd_process.h"
#include "tests/random_request.h"

namespace hub {
namespace {

using google::protobuf::MethodDescriptor;
using testing::CallOutcome;
using testing::ContractViolation;
using testing::GenericCaller;
using testing::HubdProcess;
using testing::ReasonOfStatus;

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  uint64_t value = 0;
  return text != nullptr && absl::SimpleAtoi(text, &value) ? value : fallback;
}

const MethodDescriptor* Method(const std::string& full_name) {
  const MethodDescriptor* method =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          full_name);
  EXPECT_NE(method, nullptr) << full_name;
  return method;
}

// The bytes of a `method` request written in text format.
std::string Request(const MethodDescriptor* method, const std::string& text) {
  std::unique_ptr<google::protobuf::Message> message(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(method->input_type())
          ->New());
  EXPECT_TRUE(
      google::protobuf::TextFormat::ParseFromString(text, message.get()))
      << text;
  return message->SerializeAsString();
}

bool Streams(const MethodDescriptor* method) {
  return method->client_streaming() || method->server_streaming();
}

// Starts a hubd of its own, on a database of its own. Its tmux commands
// talk to a tmux server of the test's, never to a real session.
std::unique_ptr<HubdProcess> StartHubd(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  setenv("TMUX_TMPDIR", tmp != nullptr ? tmp : "/tmp", 1);
  auto hubd = std::make_unique<HubdProcess>(
      testing::TempDbPath(name),
      std::vector<std::string>{"--log_level=warn", "--sweep_interval=200ms"});
  absl::Status started = hubd->Start();
  EXPECT_TRUE(started.ok()) << started;
  return hubd;
}

// ---- targeted cases: each one broke the contract before ----------------

class ErrorContractTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hubd_ = StartHubd("error_contract").release();
  }
  static void TearDownTestSuite() {
    delete hubd_;
    hubd_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(hubd_->running());
    channel_ = grpc::CreateChannel(hubd_->address(),
                                   grpc::InsecureChannelCredentials());
    caller_ = std::make_unique<GenericCaller>(channel_);
  }

  grpc::Status Call(const std::string& method, const std::string& text) {
    const MethodDescriptor* m = Method(method);
    return caller_->Call(m, {Request(m, text)}, absl::Seconds(20)).status;
  }

  grpc::Status CallBytes(const std::string& method, std::string bytes,
                         absl::Duration timeout = absl::Seconds(20)) {
    return caller_->Call(Method(method), {std::move(bytes)}, timeout).status;
  }

  static HubdProcess* hubd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GenericCaller> caller_;
};

HubdProcess* ErrorContractTest::hubd_ = nullptr;

TEST_F(ErrorContractTest, AMultiByteIdIsQuotedBackAsValidUtf8) {
  std::string id = "a";
  for (int i = 0; i < 100; ++i) id += "\xC3\xA9";
  grpc::Status s = Call("hub.v1.PresenceService.GetAgent",
                        absl::StrCat("agent_id: \"", absl::CEscape(id), "\""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ReasonOfStatus(s), "AGENT_ID_INVALID");
  EXPECT_EQ(ContractViolation(s), "");
}

TEST_F(ErrorContractTest,
       AHugeEchoedValueNeitherHidesTheReasonNorHarmsTheChannel) {
  ASSERT_TRUE(Call("hub.v1.PresenceService.RegisterAgent",
                   "agent_id: \"agent-huge\" cli: AGENT_CLI_CODEX")
                  .ok());
  const std::string huge(6000, 'h');
  grpc::Status s =
      Call("hub.v1.PresenceService.Heartbeat",
           absl::StrCat("agent_id: \"agent-huge\" hub_instance_id: \"", huge,
                        "\" store_fingerprint: \"", huge, "\""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << s.error_message();
  EXPECT_EQ(ContractViolation(s), "");
  // The echo is cut, not the explanation after it.
  EXPECT_TRUE(absl::StrContains(s.error_message(), "register again"))
      << s.error_message();
  s = Call("hub.v1.RoleService.ReserveRole",
           absl::StrCat("role_key { project_id: \"prj_AAAAAAAAAAAAAAAAAAAAAA\" "
                        "kind: ROLE_KIND_CTO } update_mask { paths: \"",
                        huge, "\" }"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ReasonOfStatus(s), "UPDATE_MASK_INVALID");
  EXPECT_EQ(ContractViolation(s), "");
  // The same channel still works.
  EXPECT_TRUE(Call("hub.v1.HubService.GetStatus", "").ok());
}

TEST_F(ErrorContractTest, UnaryRequestBytesThatDoNotParseAreRequestMalformed) {
  for (const std::string& bytes : {std::string("\x0a\x05"
                                               "ab",
                                               4),
                                   std::string("\x0f\x01", 2),
                                   std::string("\x0a\x03"
                                               "a\xC3(",
                                               5)}) {
    grpc::Status s = CallBytes("hub.v1.PresenceService.GetAgent", bytes);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(ReasonOfStatus(s), "REQUEST_MALFORMED") << s.error_message();
    EXPECT_EQ(ContractViolation(s), "");
  }
}

TEST_F(ErrorContractTest, StreamRequestBytesThatDoNotParseAreRequestMalformed) {
  for (const char* method :
       {"hub.v1.RoleService.WatchRoles", "hub.v1.PresenceService.Attach",
        "hub.v1.AdminService.BackupStore"}) {
    SCOPED_TRACE(method);
    grpc::Status s = CallBytes(method,
                               std::string("\x0a\x05"
                                           "ab",
                                           4),
                               absl::Seconds(10));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(ReasonOfStatus(s), "REQUEST_MALFORMED") << s.error_message();
  }
}

TEST_F(ErrorContractTest, APresenceStreamThatIsOnlyHalfClosedStillEndsOk) {
  CallOutcome outcome = caller_->Call(Method("hub.v1.PresenceService.Attach"),
                                      {}, absl::Seconds(10));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
}

// ---- the random sweep --------------------------------------------------

// One call of the sweep: the RPC, the round, and whether it sends garbage.
struct Probe {
  const MethodDescriptor* method;
  uint64_t round;
  bool garbage;
};

TEST(ErrorContractSweepTest, EveryRpcAnswersRandomAndGarbageRequestsReadably) {
  const uint64_t seed =
      EnvNumber("HUB_ERROR_CONTRACT_SEED",
                static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  const uint64_t rounds = EnvNumber("HUB_ERROR_CONTRACT_ROUNDS", 400);
  std::printf(
      "error contract sweep: HUB_ERROR_CONTRACT_SEED=%llu rounds=%llu\n",
      static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(rounds));
  // Garbage makes the local parse check log every invalid string.
  google::protobuf::SetLogHandler(nullptr);
  std::unique_ptr<HubdProcess> hubd = StartHubd("error_contract_sweep");
  ASSERT_TRUE(hubd->running());
  // gRPC's defaults, as any client has them.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(hubd->address(), grpc::InsecureChannelCredentials());

  std::vector<Probe> probes;
  int services = 0;
  for (const auto& [name, service] : testing::ListHubServices(channel)) {
    ASSERT_NE(service, nullptr) << name << " is served but not linked here";
    ++services;
    for (int m = 0; m < service->method_count(); ++m) {
      for (uint64_t r = 0; r < rounds; ++r) {
        probes.push_back({service->method(m), r, /*garbage=*/r % 3 == 2});
      }
    }
  }
  ASSERT_GE(services, 5) << "Hub, Presence, Role, Message and Admin services";

  absl::Mutex mu;
  std::vector<std::string> violations;
  std::atomic<size_t> next{0};
  std::atomic<int> calls{0}, failures{0}, timeouts{0};
  auto work = [&] {
    GenericCaller caller(channel);
    for (size_t i = next++; i < probes.size(); i = next++) {
      const Probe& probe = probes[i];
      const MethodDescriptor* method = probe.method;
      // The request is a function of (seed, RPC, round) only.
      testing::RandomRequests random(
          seed ^ (std::hash<std::string>()(method->full_name()) +
                  probe.round * 0x9E3779B97F4A7C15ull));
      std::string bytes =
          probe.garbage
              ? random.Garbage(method->input_type())
              : random.Message(method->input_type())->SerializeAsString();
      std::unique_ptr<google::protobuf::Message> parsed(
          google::protobuf::MessageFactory::generated_factory()
              ->GetPrototype(method->input_type())
              ->New());
      const bool parses = parsed->ParseFromString(bytes);
      // Streams and Ask may rightly wait: they end at the client's deadline.
      const bool may_wait = Streams(method) || method->name() == "Ask";
      const CallOutcome outcome =
          caller.Call(method, {bytes},
                      may_wait ? absl::Milliseconds(700) : absl::Seconds(30));
      const grpc::Status& s = outcome.status;
      ++calls;
      std::string violation;
      if (may_wait && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        ++timeouts;
      } else {
        violation = ContractViolation(s);
        if (violation.empty() && !parses &&
            (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT ||
             ReasonOfStatus(s) != "REQUEST_MALFORMED")) {
          violation = "bytes that do not parse are not REQUEST_MALFORMED";
        }
      }
      if (!s.ok()) ++failures;
      if (violation.empty()) continue;
      absl::MutexLock lock(&mu);
      violations.push_back(
          absl::StrCat(method->full_name(), " round ", probe.round,
                       probe.garbage ? " (garbage)" : "", ": ", violation,
                       " [code ", s.error_code(), " ",
                       absl::CHexEscape(s.error_message().substr(0, 200)),
                       "] request ", absl::CHexEscape(bytes.substr(0, 120))));
    }
  };
  const absl::Time started = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  std::printf(
      "error contract sweep: %d calls over %d services in %s, "
      "%d failed readably, %d ended at their deadline\n",
      calls.load(), services,
      absl::FormatDuration(absl::Now() - started).c_str(), failures.load(),
      timeouts.load());
  if (violations.size() > 20) violations.resize(20);
  EXPECT_TRUE(violations.empty()) << "seed " << seed << ":\n"
                                  << absl::StrJoin(violations, "\n");

  // hubd is still healthy, stops cleanly, and left a sound database.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::health::v1::HealthCheckResponse health_response;
  ASSERT_TRUE(health
                  ->Check(&context, grpc::health::v1::HealthCheckRequest(),
                          &health_response)
                  .ok());
  EXPECT_EQ(health_response.status(),
            grpc::health::v1::HealthCheckResponse::SERVING);
  const int exit_status = hubd->Terminate();
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
      << "hubd exit status " << exit_status;

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(hubd->db_path().c_str(), &db, SQLITE_OPEN_READONLY,
                            nullptr),
            SQLITE_OK);
  sqlite3_stmt* check = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &check, nullptr),
      SQLITE_OK);
  ASSERT_EQ(sqlite3_step(check), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(check, 0)),
               "ok");
  sqlite3_finalize(check);
  sqlite3_close(db);
}

}  // namespace
}  // namespace hub
