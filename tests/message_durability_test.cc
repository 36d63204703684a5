// At-least-once, never lost: the real hubd as a child process takes
// publishes and acknowledgements, is killed with SIGKILL, and restarts on the
// same database. Every acknowledged publish is still pending for its
// recipients, acknowledged messages stay acknowledged, and a consumer that
// received a message but crashed before acknowledging it gets it again when
// it re-attaches.
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"

namespace hub {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

std::string HubdPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "hub", "/hub/hubd");
}

// A hubd child process serving `db` on a free port.
class Hubd {
 public:
  explicit Hubd(const std::string& db) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      const std::string hubd = HubdPath();
      const std::string db_flag = absl::StrCat("--db=", db);
      execl(hubd.c_str(), hubd.c_str(), "--listen=127.0.0.1:0", db_flag.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    // The first line: "hubd <version> serving on <address> db=..."
    std::string line;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (line.find('\n') == std::string::npos && absl::Now() < give_up) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char chunk[512];
      ssize_t n = read(fds[0], chunk, sizeof(chunk));
      if (n <= 0) break;
      line.append(chunk, static_cast<size_t>(n));
    }
    close(fds[0]);
    const size_t at = line.find("serving on ");
    EXPECT_NE(at, std::string::npos) << "hubd did not start: " << line;
    if (at == std::string::npos) return;
    const size_t start = at + 11;
    address_ = line.substr(start, line.find(' ', start) - start);
    auto channel =
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    presence = hub::v1::PresenceService::NewStub(channel);
    messages = hub::v1::MessageService::NewStub(channel);
  }

  ~Hubd() { Kill(); }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    pid_ = -1;
  }

  std::unique_ptr<hub::v1::PresenceService::Stub> presence;
  std::unique_ptr<hub::v1::MessageService::Stub> messages;

 private:
  pid_t pid_ = -1;
  std::string address_;
};

constexpr char kTrace[] = "durability-trace";

int64_t Register(Hubd& hub, const std::string& id) {
  grpc::ClientContext context;
  hub::v1::RegisterAgentRequest request;
  request.set_agent_id(id);
  request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  request.add_topics("build");
  hub::v1::RegisterAgentResponse response;
  grpc::Status s = hub.presence->RegisterAgent(&context, request, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return response.presence_generation();
}

std::set<std::string> PendingIds(Hubd& hub, const std::string& agent) {
  std::set<std::string> ids;
  std::string token;
  do {
    grpc::ClientContext context;
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent);
    request.set_peek(true);
    request.set_page_size(100);
    request.set_page_token(token);
    hub::v1::ListPendingResponse response;
    grpc::Status s = hub.messages->ListPending(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const auto& d : response.deliveries())
      ids.insert(d.message().message_id());
    token = response.next_page_token();
  } while (!token.empty());
  return ids;
}

TEST(MessageDurabilityTest, EveryAcknowledgedPublishSurvivesSigkill) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string db =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/durability.sqlite");
  std::set<std::string> pending_b, pending_c, acked;
  std::string redelivered;
  int64_t generation_c = 0;
  {
    Hubd hub(db);
    Register(hub, "agent-b");
    generation_c = Register(hub, "agent-c");
    for (int i = 0; i < 30; ++i) {
      grpc::ClientContext context;
      hub::v1::PublishRequest request;
      request.set_from_agent_id("sender-1");
      request.set_to(i % 3 == 0 ? "topic:build" : "agent-b");
      request.set_priority(1 + i % 9);
      request.set_trace_id(kTrace);
      hub::v1::PublishResponse response;
      grpc::Status s = hub.messages->Publish(&context, request, &response);
      ASSERT_TRUE(s.ok()) << s.error_message();
      pending_b.insert(response.message_id());
      if (i % 3 == 0) pending_c.insert(response.message_id());
    }
    // agent-b receives everything and acknowledges a third of it.
    grpc::ClientContext list_context;
    hub::v1::ListPendingRequest list;
    list.set_agent_id("agent-b");
    list.set_page_size(100);
    hub::v1::ListPendingResponse listed;
    ASSERT_TRUE(hub.messages->ListPending(&list_context, list, &listed).ok());
    ASSERT_EQ(listed.deliveries_size(), 30);
    grpc::ClientContext ack_context;
    hub::v1::AckRequest ack;
    ack.set_agent_id("agent-b");
    for (int i = 0; i < 10; ++i) {
      const std::string& id = listed.deliveries(i).message().message_id();
      ack.add_message_ids(id);
      pending_b.erase(id);
      if (pending_c.count(id) == 0) acked.insert(id);
    }
    hub::v1::AckResponse acknowledged;
    ASSERT_TRUE(hub.messages->Ack(&ack_context, ack, &acknowledged).ok());
    ASSERT_EQ(acknowledged.result().acked_message_ids_size(), 10);
    // agent-c receives one message on its stream and dies before acking.
    grpc::ClientContext attach_context;
    auto stream = hub.presence->Attach(&attach_context);
    AttachRequest hello;
    hello.mutable_hello()->set_agent_id("agent-c");
    hello.mutable_hello()->set_presence_generation(generation_c);
    ASSERT_TRUE(stream->Write(hello));
    AttachResponse frame;
    while (stream->Read(&frame)) {
      if (frame.event().has_message()) {
        redelivered = frame.event().message().message().message_id();
        break;
      }
    }
    ASSERT_FALSE(redelivered.empty());
    hub.Kill();
    attach_context.TryCancel();
  }

  Hubd hub(db);
  EXPECT_EQ(PendingIds(hub, "agent-b"), pending_b);
  EXPECT_EQ(PendingIds(hub, "agent-c"), pending_c);
  grpc::ClientContext trace_context;
  hub::v1::ListTraceRequest trace;
  trace.set_trace_id(kTrace);
  hub::v1::ListTraceResponse traced;
  ASSERT_TRUE(hub.messages->ListTrace(&trace_context, trace, &traced).ok());
  ASSERT_EQ(traced.messages_size(), 30);
  for (const auto& m : traced.messages()) {
    if (acked.count(m.message_id()) > 0) {
      EXPECT_EQ(m.status(), hub::v1::MESSAGE_STATUS_ACKED) << m.message_id();
    } else {
      EXPECT_NE(m.status(), hub::v1::MESSAGE_STATUS_ACKED) << m.message_id();
    }
  }

  grpc::ClientContext attach_context;
  auto stream = hub.presence->Attach(&attach_context);
  AttachRequest hello;
  hello.mutable_hello()->set_agent_id("agent-c");
  hello.mutable_hello()->set_presence_generation(generation_c);
  ASSERT_TRUE(stream->Write(hello));
  std::set<std::string> pushed;
  AttachResponse frame;
  while (pushed.size() < pending_c.size() && stream->Read(&frame)) {
    if (frame.event().has_message()) {
      pushed.insert(frame.event().message().message().message_id());
    }
  }
  EXPECT_EQ(pushed, pending_c);
  EXPECT_EQ(pushed.count(redelivered), 1u);
  attach_context.TryCancel();
}

}  // namespace
}  // namespace hub
