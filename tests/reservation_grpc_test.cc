// ReservationService through gRPC against an in-process HubServer: a
// reservation's round trip, conflicts with their ErrorInfo, bad input with
// its own reasons, reservations ending with their holder (stream gone,
// deregistered), limits, and exactly one winner among 64 racers.
#include <grpcpp/create_channel.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub::testing {
namespace {

using hub::v1::CheckReservationsRequest;
using hub::v1::CheckReservationsResponse;
using hub::v1::ReserveRequest;
using hub::v1::ReserveResponse;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

class ReservationGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestHubOptions(FreshTestDbPath())); }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }
  void Start(const HubServerOptions& options) {
    server_.reset();  // gives up its database's lock
    server_ = StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    reservations_ = hub::v1::ReservationService::NewStub(channel);
  }

  static ReserveRequest Request(
      const std::string& agent, std::vector<std::string> patterns,
      hub::v1::ReservationMode mode = hub::v1::RESERVATION_MODE_EXCLUSIVE) {
    ReserveRequest r;
    r.set_project_id(kProject);
    r.set_agent_id(agent);
    for (const std::string& p : patterns) r.add_patterns(p);
    r.set_mode(mode);
    r.set_reason("editing");
    return r;
  }
  grpc::Status Reserve(const ReserveRequest& r,
                       hub::v1::Reservation* out = nullptr) {
    grpc::ClientContext context;
    ReserveResponse response;
    grpc::Status s = reservations_->Reserve(&context, r, &response);
    if (out != nullptr) *out = response.reservation();
    return s;
  }
  hub::v1::Reservation ReserveOk(const ReserveRequest& r) {
    hub::v1::Reservation out;
    grpc::Status s = Reserve(r, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  CheckReservationsResponse Check(const std::vector<std::string>& paths,
                                  const std::string& agent = "") {
    CheckReservationsRequest r;
    r.set_project_id(kProject);
    r.set_agent_id(agent);
    for (const std::string& p : paths) r.add_patterns(p);
    r.set_mode(hub::v1::RESERVATION_MODE_SHARED);
    r.set_literal(true);
    grpc::ClientContext context;
    CheckReservationsResponse response;
    grpc::Status s = reservations_->CheckReservations(&context, r, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  // `n` distinct patterns: p/0, p/1, ...
  static std::vector<std::string> DistinctPatterns(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("p/", i));
    return out;
  }
  // Reads `agent`'s stream up to its next reservation_ended event; fails
  // the test if the stream ends first.
  static hub::v1::ReservationChange NextReservationEnd(AttachedAgent& agent) {
    hub::v1::AttachResponse frame;
    while (agent.stream->Read(&frame)) {
      if (frame.event().has_reservation_ended()) {
        return frame.event().reservation_ended();
      }
    }
    ADD_FAILURE() << "the stream ended without a reservation_ended event";
    return {};
  }
  // Waits (generous deadline) until no reservation conflicts with `path`.
  bool WaitUntilFree(const std::string& path) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (Check({path}).conflicts_size() == 0) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::ReservationService::Stub> reservations_;
};

TEST_F(ReservationGrpcTest,
       AReservationRoundTripsAndAnOverlappingOneConflicts) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  ReserveRequest request = Request("agent-a", {"src/net/", "docs/*.md"});
  request.mutable_ttl()->set_seconds(120);
  const hub::v1::Reservation a = ReserveOk(request);
  EXPECT_FALSE(a.reservation_id().empty());
  EXPECT_GT(a.token(), 0);
  EXPECT_EQ(a.patterns_size(), 2);
  EXPECT_EQ(a.patterns(0), "src/net");
  EXPECT_EQ(a.mode(), hub::v1::RESERVATION_MODE_EXCLUSIVE);
  EXPECT_EQ(a.expires_at().seconds() - a.created_at().seconds(), 120);

  grpc::Status s = Reserve(
      Request("agent-b", {"src/**/*.cc"}, hub::v1::RESERVATION_MODE_SHARED));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "RESERVATION_CONFLICT");
  google::rpc::ErrorInfo info = ErrorInfoOf(s);
  EXPECT_EQ(info.metadata().at("holder_agent_id"), "agent-a");
  EXPECT_EQ(info.metadata().at("reservation_id"), a.reservation_id());
  EXPECT_EQ(info.metadata().at("held_pattern"), "src/net");
  EXPECT_EQ(info.metadata().at("pattern"), "src/**/*.cc");
  EXPECT_EQ(info.metadata().at("token"), absl::StrCat(a.token()));

  // The dry run names the same holder; the holder itself is exempt.
  CheckReservationsResponse c = Check({"src/net/tcp.cc", "README.md"});
  ASSERT_EQ(c.conflicts_size(), 1);
  EXPECT_EQ(c.conflicts(0).holder_agent_id(), "agent-a");
  EXPECT_EQ(c.conflicts(0).pattern(), "src/net/tcp.cc");
  EXPECT_EQ(Check({"src/net/tcp.cc"}, "agent-a").conflicts_size(), 0);

  hub::v1::ListReservationsRequest list;
  list.set_project_id(kProject);
  list.set_path("docs/x.md");
  hub::v1::ListReservationsResponse listed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(reservations_->ListReservations(&context, list, &listed).ok());
  }
  ASSERT_EQ(listed.reservations_size(), 1);
  EXPECT_EQ(listed.reservations(0).reservation_id(), a.reservation_id());

  hub::v1::RenewReservationRequest renew;
  renew.set_reservation_id(a.reservation_id());
  renew.set_agent_id("agent-a");
  renew.set_token(a.token());
  renew.mutable_ttl()->set_seconds(600);
  hub::v1::RenewReservationResponse renewed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->RenewReservation(&context, renew, &renewed).ok());
  }
  EXPECT_GT(renewed.reservation().expires_at().seconds(),
            a.expires_at().seconds());
  renew.set_token(a.token() + 1);
  {
    grpc::ClientContext context;
    s = reservations_->RenewReservation(&context, renew, &renewed);
  }
  EXPECT_EQ(Reason(s), "RESERVATION_STALE_TOKEN");

  hub::v1::ReleaseReservationRequest release;
  release.set_reservation_id(a.reservation_id());
  release.set_agent_id("agent-a");
  release.add_patterns("src/net");
  hub::v1::ReleaseReservationResponse released;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->ReleaseReservation(&context, release, &released).ok());
  }
  EXPECT_FALSE(released.ended());
  EXPECT_EQ(released.reservation().patterns_size(), 1);
  const hub::v1::Reservation b = ReserveOk(Request("agent-b", {"src"}));
  EXPECT_GT(b.token(), a.token());
}

TEST_F(ReservationGrpcTest, BadRequestsAreInvalidArgumentWithTheirOwnReasons) {
  RegisterAgentOk(presence_.get(), "agent-a");
  struct Case {
    std::vector<std::string> patterns;
    const char* reason;
  };
  for (const Case& c : std::vector<Case>{
           {{"/etc/passwd"}, "RESERVATION_PATH_ABSOLUTE"},
           {{"src/../../x"}, "RESERVATION_PATH_PARENT"},
           {{""}, "RESERVATION_PATH_EMPTY"},
           {{"a//b"}, "RESERVATION_PATH_EMPTY"},
           {{"a\\b"}, "RESERVATION_PATH_INVALID"},
           {{}, "RESERVATION_TOO_MANY_PATTERNS"},
           {DistinctPatterns(65), "RESERVATION_TOO_MANY_PATTERNS"}}) {
    grpc::Status s = Reserve(Request("agent-a", c.patterns));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.reason;
    EXPECT_EQ(Reason(s), c.reason);
  }
  ReserveRequest bad_mode = Request("agent-a", {"src"});
  bad_mode.set_mode(static_cast<hub::v1::ReservationMode>(9));
  EXPECT_EQ(Reason(Reserve(bad_mode)), "RESERVATION_MODE_INVALID");
  ReserveRequest bad_ttl = Request("agent-a", {"src"});
  bad_ttl.mutable_ttl()->set_seconds(0);
  EXPECT_EQ(Reason(Reserve(bad_ttl)), "RESERVATION_TTL_INVALID");
  bad_ttl.mutable_ttl()->set_seconds(-1);
  EXPECT_EQ(Reserve(bad_ttl).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ReserveRequest bad_project = Request("agent-a", {"src"});
  bad_project.set_project_id("project-1");
  EXPECT_EQ(Reason(Reserve(bad_project)), "PROJECT_ID_INVALID");
  grpc::Status unknown = Reserve(Request("nobody-registered", {"src"}));
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(unknown), "AGENT_NOT_FOUND");
  // Nothing of them was written.
  EXPECT_EQ(Check({"src/x", "a/b", "x"}).conflicts_size(), 0);
}

TEST_F(ReservationGrpcTest,
       DuplicatesAfterNormalizationCountOnceTowardThePatternLimit) {
  RegisterAgentOk(presence_.get(), "agent-a");
  // 65 strings, 64 patterns: "./p/0" is "p/0" again.
  std::vector<std::string> patterns = DistinctPatterns(64);
  patterns.push_back("./p/0");
  const hub::v1::Reservation r = ReserveOk(Request("agent-a", patterns));
  ASSERT_EQ(r.patterns_size(), 64);
  EXPECT_EQ(r.patterns(0), "p/0");
  // The limit still holds for distinct patterns, however many strings.
  std::vector<std::string> too_many = DistinctPatterns(65);
  too_many.push_back("p/0/");
  grpc::Status s = Reserve(Request("agent-a", too_many));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "RESERVATION_TOO_MANY_PATTERNS");
  EXPECT_EQ(ErrorInfoOf(s).metadata().at("limit_value"), "64");
}

TEST_F(ReservationGrpcTest,
       AHolderIsToldOnItsStreamWhenItsReservationIsForcedOrExpires) {
  const int64_t a_generation = RegisterAgentOk(presence_.get(), "agent-a");
  const int64_t b_generation = RegisterAgentOk(presence_.get(), "agent-b");
  AttachedAgent a =
      AttachOk(presence_.get(), "agent-a", a_generation, absl::Seconds(60));
  AttachedAgent b =
      AttachOk(presence_.get(), "agent-b", b_generation, absl::Seconds(60));
  const hub::v1::Reservation forced = ReserveOk(Request("agent-a", {"src"}));
  const hub::v1::Reservation released = ReserveOk(Request("agent-a", {"doc"}));
  const hub::v1::Reservation bs = ReserveOk(Request("agent-b", {"tools"}));
  auto force = [this](const hub::v1::Reservation& r) {
    hub::v1::ForceReleaseReservationRequest request;
    request.set_reservation_id(r.reservation_id());
    hub::v1::ForceReleaseReservationResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->ForceReleaseReservation(&context, request, &response)
            .ok());
  };
  // Its own release is not news to the holder; a forced one is, and only
  // to the holder (the events follow the change log's order).
  {
    hub::v1::ReleaseReservationRequest release;
    release.set_reservation_id(released.reservation_id());
    release.set_agent_id("agent-a");
    hub::v1::ReleaseReservationResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->ReleaseReservation(&context, release, &response).ok());
  }
  force(forced);
  force(bs);
  const hub::v1::ReservationChange a_end = NextReservationEnd(a);
  EXPECT_EQ(a_end.kind(), hub::v1::RESERVATION_CHANGE_KIND_FORCE_RELEASED);
  EXPECT_EQ(a_end.reservation().reservation_id(), forced.reservation_id());
  EXPECT_EQ(a_end.reservation().agent_id(), "agent-a");
  EXPECT_EQ(a_end.reservation().token(), forced.token());
  ASSERT_EQ(a_end.reservation().patterns_size(), 1);
  EXPECT_EQ(a_end.reservation().patterns(0), "src");
  EXPECT_GT(a_end.seq(), 0);
  const hub::v1::ReservationChange b_end = NextReservationEnd(b);
  EXPECT_EQ(b_end.kind(), hub::v1::RESERVATION_CHANGE_KIND_FORCE_RELEASED);
  EXPECT_EQ(b_end.reservation().reservation_id(), bs.reservation_id());

  // A TTL that passes unrenewed ends it too (told once the hub deletes it).
  ReserveRequest brief = Request("agent-a", {"tmp"});
  brief.mutable_ttl()->set_seconds(1);
  const hub::v1::Reservation expiring = ReserveOk(brief);
  const hub::v1::ReservationChange expired = NextReservationEnd(a);
  EXPECT_EQ(expired.kind(), hub::v1::RESERVATION_CHANGE_KIND_EXPIRED);
  EXPECT_EQ(expired.reservation().reservation_id(), expiring.reservation_id());
  a.context->TryCancel();
  b.context->TryCancel();
}

TEST_F(ReservationGrpcTest, AReservationEndsWhenItsHoldersStreamIsGone) {
  const int64_t generation = RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  AttachedAgent stream = AttachOk(presence_.get(), "agent-a", generation);
  ReserveOk(Request("agent-a", {"src"}));
  ASSERT_EQ(Check({"src/a.cc"}).conflicts_size(), 1);
  // The stream ends; after the detach grace the holder is gone.
  stream.context->TryCancel();
  ASSERT_TRUE(WaitUntilFree("src/a.cc"));
  ReserveOk(Request("agent-b", {"src"}));
}

TEST_F(ReservationGrpcTest, DeregisteringEndsTheAgentsReservationsAtOnce) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  ReserveOk(Request("agent-a", {"src"}));
  hub::v1::DeregisterRequest deregister;
  deregister.set_agent_id("agent-a");
  hub::v1::DeregisterResponse gone;
  grpc::ClientContext context;
  ASSERT_TRUE(presence_->Deregister(&context, deregister, &gone).ok());
  // Offline is decided in the conflict check itself: no wait.
  ReserveOk(Request("agent-b", {"src/a.cc"}));
}

TEST_F(ReservationGrpcTest, ALimitPerAgentRefusesWithLimitExceeded) {
  HubServerOptions options = TestHubOptions(FreshTestDbPath());
  options.reservations.max_per_agent = 2;
  Start(options);
  RegisterAgentOk(presence_.get(), "agent-a");
  ReserveOk(Request("agent-a", {"a"}));
  ReserveOk(Request("agent-a", {"b"}));
  grpc::Status s = Reserve(Request("agent-a", {"c"}));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Reason(s), "LIMIT_EXCEEDED");
  EXPECT_EQ(ErrorInfoOf(s).metadata().at("limit"),
            "max_reservations_per_agent");
  EXPECT_EQ(ErrorInfoOf(s).metadata().at("limit_value"), "2");
}

TEST_F(ReservationGrpcTest, ForceReleaseEndsAnotherAgentsReservation) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  const hub::v1::Reservation a = ReserveOk(Request("agent-a", {"src"}));
  hub::v1::ForceReleaseReservationRequest force;
  force.set_reservation_id(a.reservation_id());
  hub::v1::ForceReleaseReservationResponse forced;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->ForceReleaseReservation(&context, force, &forced).ok());
  }
  EXPECT_EQ(forced.reservation().agent_id(), "agent-a");
  ReserveOk(Request("agent-b", {"src"}));
  grpc::ClientContext context;
  grpc::Status again =
      reservations_->ForceReleaseReservation(&context, force, &forced);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(again), "RESERVATION_NOT_FOUND");
}

TEST_F(ReservationGrpcTest, ExactlyOneOfSixtyFourRacersWinsEachRound) {
  constexpr int kRacers = 64;
  for (int i = 0; i < kRacers; ++i) {
    RegisterAgentOk(presence_.get(), absl::StrCat("racer-", i));
  }
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> won{0}, conflicted{0}, other{0};
    std::vector<std::string> winner(kRacers);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRacers; ++i) {
      threads.emplace_back([&, i] {
        static const char* kPatterns[] = {"src", "src/a.cc", "src/*.cc",
                                          "**/a.cc"};
        hub::v1::Reservation r;
        grpc::Status s =
            Reserve(Request(absl::StrCat("racer-", i), {kPatterns[i % 4]}), &r);
        if (s.ok()) {
          won++;
          winner[i] = r.reservation_id();
        } else if (Reason(s) == "RESERVATION_CONFLICT") {
          conflicted++;
        } else {
          other++;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    ASSERT_EQ(other.load(), 0);
    ASSERT_EQ(won.load(), 1) << "round " << round;
    ASSERT_EQ(conflicted.load(), kRacers - 1);
    for (int i = 0; i < kRacers; ++i) {
      if (winner[i].empty()) continue;
      hub::v1::ReleaseReservationRequest release;
      release.set_reservation_id(winner[i]);
      release.set_agent_id(absl::StrCat("racer-", i));
      hub::v1::ReleaseReservationResponse released;
      grpc::ClientContext context;
      ASSERT_TRUE(
          reservations_->ReleaseReservation(&context, release, &released).ok());
      EXPECT_TRUE(released.ended());
    }
  }
}

}  // namespace
}  // namespace hub::testing
