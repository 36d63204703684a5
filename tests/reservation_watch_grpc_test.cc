// ReservationService.WatchReservations through gRPC against an in-process
// HubServer: the snapshot, then every kind of change in commit order with
// its fencing token; the agent filter; bad requests; and watchers that
// start while writers race, each of which ends with exactly the live
// reservations (nothing missed between snapshot and changes, nothing
// twice).
#include <grpcpp/create_channel.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
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

using hub::v1::ReservationChange;
using hub::v1::ReserveRequest;
using hub::v1::WatchReservationsRequest;
using hub::v1::WatchReservationsResponse;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// One watch stream with a generous deadline.
struct Watch {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<WatchReservationsResponse>> reader;
  std::vector<hub::v1::Reservation> snapshot;
  int64_t snapshot_seq = 0;

  // The next change; fails the test when the stream ends first.
  ReservationChange Next() {
    WatchReservationsResponse item;
    if (!reader->Read(&item)) {
      ADD_FAILURE() << "the watch ended: " << reader->Finish().error_message();
      return {};
    }
    EXPECT_TRUE(item.has_change());
    return item.change();
  }
};

class ReservationWatchGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = FreshTestDbPath();
    Start(TestHubOptions(db_path_));
  }
  // (Re)starts the hub and the stubs.
  void Start(const HubServerOptions& options) {
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
    server_.reset();  // gives up its database's lock
    server_ = StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    reservations_ = hub::v1::ReservationService::NewStub(channel);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  // Opens a watch and reads its snapshot.
  std::unique_ptr<Watch> StartWatch(const std::string& agent = "") {
    auto w = std::make_unique<Watch>();
    w->context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    WatchReservationsRequest request;
    request.set_project_id(kProject);
    request.set_agent_id(agent);
    w->reader = reservations_->WatchReservations(&w->context, request);
    WatchReservationsResponse item;
    while (w->reader->Read(&item)) {
      if (item.has_snapshot_end()) {
        EXPECT_EQ(item.snapshot_end().reservation_count(),
                  static_cast<int64_t>(w->snapshot.size()));
        w->snapshot_seq = item.snapshot_end().seq();
        return w;
      }
      EXPECT_EQ(item.change().kind(),
                hub::v1::RESERVATION_CHANGE_KIND_SNAPSHOT);
      w->snapshot.push_back(item.change().reservation());
    }
    ADD_FAILURE() << "the watch ended before its snapshot: "
                  << w->reader->Finish().error_message();
    return w;
  }

  static ReserveRequest Request(const std::string& agent,
                                std::vector<std::string> patterns,
                                int64_t ttl_seconds = 300) {
    ReserveRequest r;
    r.set_project_id(kProject);
    r.set_agent_id(agent);
    for (const std::string& p : patterns) r.add_patterns(p);
    r.set_mode(hub::v1::RESERVATION_MODE_EXCLUSIVE);
    r.set_reason("editing");
    r.mutable_ttl()->set_seconds(ttl_seconds);
    return r;
  }
  hub::v1::Reservation ReserveOk(const ReserveRequest& r) {
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    grpc::Status s = reservations_->Reserve(&context, r, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.reservation();
  }
  grpc::Status Release(const hub::v1::Reservation& r,
                       std::vector<std::string> patterns = {}) {
    hub::v1::ReleaseReservationRequest release;
    release.set_reservation_id(r.reservation_id());
    release.set_agent_id(r.agent_id());
    for (const std::string& p : patterns) release.add_patterns(p);
    hub::v1::ReleaseReservationResponse released;
    grpc::ClientContext context;
    return reservations_->ReleaseReservation(&context, release, &released);
  }

  grpc::Status Renew(const hub::v1::Reservation& r, int64_t ttl_seconds) {
    hub::v1::RenewReservationRequest renew;
    renew.set_reservation_id(r.reservation_id());
    renew.set_agent_id(r.agent_id());
    renew.set_token(r.token());
    renew.mutable_ttl()->set_seconds(ttl_seconds);
    hub::v1::RenewReservationResponse renewed;
    grpc::ClientContext context;
    return reservations_->RenewReservation(&context, renew, &renewed);
  }

  std::string db_path_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::ReservationService::Stub> reservations_;
};

TEST_F(ReservationWatchGrpcTest,
       AWatchSendsTheLiveReservationsThenEveryChangeInCommitOrder) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  RegisterAgentOk(presence_.get(), "agent-c");
  const hub::v1::Reservation before = ReserveOk(Request("agent-a", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  ASSERT_EQ(w->snapshot.size(), 1u);
  EXPECT_EQ(w->snapshot[0].reservation_id(), before.reservation_id());
  EXPECT_EQ(w->snapshot[0].token(), before.token());
  EXPECT_EQ(w->snapshot[0].patterns(0), "src");

  // Every kind of change, made by other clients.
  const hub::v1::Reservation b =
      ReserveOk(Request("agent-b", {"docs", "lib/*.cc"}));
  ASSERT_TRUE(Renew(b, 900).ok());
  ASSERT_TRUE(Release(b, {"docs"}).ok());
  ASSERT_TRUE(Release(before).ok());
  {
    hub::v1::ForceReleaseReservationRequest force;
    force.set_reservation_id(b.reservation_id());
    hub::v1::ForceReleaseReservationResponse forced;
    grpc::ClientContext context;
    ASSERT_TRUE(
        reservations_->ForceReleaseReservation(&context, force, &forced).ok());
  }
  const hub::v1::Reservation c = ReserveOk(Request("agent-c", {"tools"}));
  // Granted before the deregistration, whose reservations the gone listener
  // ends asynchronously (within milliseconds; this one's TTL is a second).
  const hub::v1::Reservation shortlived =
      ReserveOk(Request("agent-a", {"tmp"}, /*ttl_seconds=*/1));
  {
    hub::v1::DeregisterRequest deregister;
    deregister.set_agent_id("agent-c");
    hub::v1::DeregisterResponse gone;
    grpc::ClientContext context;
    ASSERT_TRUE(presence_->Deregister(&context, deregister, &gone).ok());
  }

  struct Expected {
    hub::v1::ReservationChangeKind kind;
    std::string reservation_id;
    int64_t token;
  };
  const std::vector<Expected> expected = {
      {hub::v1::RESERVATION_CHANGE_KIND_GRANTED, b.reservation_id(), b.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_RENEWED, b.reservation_id(), b.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_NARROWED, b.reservation_id(),
       b.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_RELEASED, before.reservation_id(),
       before.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_FORCE_RELEASED, b.reservation_id(),
       b.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_GRANTED, c.reservation_id(), c.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_GRANTED, shortlived.reservation_id(),
       shortlived.token()},
      {hub::v1::RESERVATION_CHANGE_KIND_HOLDER_GONE, c.reservation_id(),
       c.token()},
      // The sweep (every 5 s) deletes it once its TTL passed.
      {hub::v1::RESERVATION_CHANGE_KIND_EXPIRED, shortlived.reservation_id(),
       shortlived.token()},
  };
  int64_t last_seq = w->snapshot_seq;
  for (const Expected& e : expected) {
    const ReservationChange change = w->Next();
    EXPECT_EQ(change.kind(), e.kind) << e.reservation_id;
    EXPECT_EQ(change.reservation().reservation_id(), e.reservation_id);
    EXPECT_EQ(change.reservation().token(), e.token);
    EXPECT_GT(change.seq(), last_seq);
    last_seq = change.seq();
    if (change.kind() == hub::v1::RESERVATION_CHANGE_KIND_RENEWED) {
      EXPECT_GT(change.reservation().expires_at().seconds(),
                b.expires_at().seconds());
    }
    if (change.kind() == hub::v1::RESERVATION_CHANGE_KIND_NARROWED) {
      ASSERT_EQ(change.reservation().patterns_size(), 1);
      EXPECT_EQ(change.reservation().patterns(0), "lib/*.cc");
    }
  }
}

// ---- Resuming a watch ------------------------------------------------------

// A watch resumed after `after_seq`; `first` is its first item.
struct Resumed {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<WatchReservationsResponse>> reader;
  WatchReservationsResponse first;
};

class ReservationResumeGrpcTest : public ReservationWatchGrpcTest {
 protected:
  std::unique_ptr<Resumed> Resume(int64_t after_seq) {
    auto r = std::make_unique<Resumed>();
    r->context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    WatchReservationsRequest request;
    request.set_project_id(kProject);
    request.set_after_seq(after_seq);
    r->reader = reservations_->WatchReservations(&r->context, request);
    EXPECT_TRUE(r->reader->Read(&r->first))
        << r->reader->Finish().error_message();
    return r;
  }
  // The next change of a resumed watch.
  static ReservationChange Next(Resumed& r) {
    WatchReservationsResponse item;
    if (!r.reader->Read(&item)) {
      ADD_FAILURE() << "the watch ended: "
                    << r.reader->Finish().error_message();
      return {};
    }
    EXPECT_TRUE(item.has_change()) << item.DebugString();
    return item.change();
  }
  // Four changes: a grant, a renewal, a narrowing, a release.
  std::vector<std::string> FourChanges(const std::string& agent) {
    const hub::v1::Reservation r = ReserveOk(Request(agent, {"a", "b"}));
    EXPECT_TRUE(Renew(r, 600).ok());
    EXPECT_TRUE(Release(r, {"b"}).ok());
    EXPECT_TRUE(Release(r).ok());
    return {"granted", "renewed", "narrowed", "released"};
  }
};

std::string KindWord(const ReservationChange& c) {
  switch (c.kind()) {
    case hub::v1::RESERVATION_CHANGE_KIND_GRANTED:
      return "granted";
    case hub::v1::RESERVATION_CHANGE_KIND_RENEWED:
      return "renewed";
    case hub::v1::RESERVATION_CHANGE_KIND_NARROWED:
      return "narrowed";
    case hub::v1::RESERVATION_CHANGE_KIND_RELEASED:
      return "released";
    default:
      return hub::v1::ReservationChangeKind_Name(c.kind());
  }
}

TEST_F(ReservationResumeGrpcTest,
       AWatchCutMidStreamAndResumedGetsExactlyTheChangesItMissedOnce) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  std::unique_ptr<Watch> w = StartWatch();
  FourChanges("agent-a");
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) last = w->Next().seq();
  w->context.TryCancel();  // cut: the client saw up to `last`
  w->reader->Finish().IgnoreError();

  const std::vector<std::string> missed = FourChanges("agent-b");
  std::unique_ptr<Resumed> r = Resume(last);
  ASSERT_TRUE(r->first.has_resume()) << r->first.DebugString();
  EXPECT_TRUE(r->first.resume().resumed());
  EXPECT_EQ(r->first.resume().after_seq(), last);
  EXPECT_LE(r->first.resume().oldest_seq(), w->snapshot_seq);
  std::vector<std::string> got;
  int64_t seq = last;
  for (size_t i = 0; i < missed.size(); ++i) {
    const ReservationChange c = Next(*r);
    EXPECT_EQ(c.seq(), seq + 1);  // no hole, no repeat
    seq = c.seq();
    EXPECT_EQ(c.reservation().agent_id(), "agent-b");
    got.push_back(KindWord(c));
  }
  EXPECT_EQ(got, missed);
  // Then the live changes, as any watch.
  const hub::v1::Reservation later = ReserveOk(Request("agent-a", {"c"}));
  const ReservationChange c = Next(*r);
  EXPECT_EQ(c.seq(), seq + 1);
  EXPECT_EQ(c.reservation().reservation_id(), later.reservation_id());

  // Resumed at the head: nothing until the next change.
  std::unique_ptr<Resumed> at_head = Resume(c.seq());
  ASSERT_TRUE(at_head->first.has_resume());
  EXPECT_TRUE(at_head->first.resume().resumed());
  ASSERT_TRUE(Release(later).ok());
  const ReservationChange released = Next(*at_head);
  EXPECT_EQ(released.seq(), c.seq() + 1);
  EXPECT_EQ(released.kind(), hub::v1::RESERVATION_CHANGE_KIND_RELEASED);
}

TEST_F(ReservationResumeGrpcTest,
       ACursorFromBeforeTheHubRestartedGetsTheSignalThenAFreshSnapshot) {
  RegisterAgentOk(presence_.get(), "agent-a");
  std::unique_ptr<Watch> w = StartWatch();
  const hub::v1::Reservation kept = ReserveOk(Request("agent-a", {"kept"}));
  const int64_t seen = w->Next().seq();
  w->context.TryCancel();
  w->reader->Finish().IgnoreError();
  const hub::v1::Reservation gone = ReserveOk(Request("agent-a", {"gone"}));
  ASSERT_TRUE(Release(gone).ok());
  // The hub restarts over the same database: it kept nothing from before.
  Start(TestHubOptions(db_path_));
  RegisterAgentOk(presence_.get(), "agent-b");

  std::unique_ptr<Resumed> r = Resume(seen);
  ASSERT_TRUE(r->first.has_resume()) << r->first.DebugString();
  EXPECT_FALSE(r->first.resume().resumed());
  EXPECT_EQ(r->first.resume().reason(), "RESERVATION_CURSOR_EXPIRED");
  EXPECT_GT(r->first.resume().oldest_seq(), seen);
  // A fresh snapshot follows, then the changes after it.
  WatchReservationsResponse item;
  std::vector<std::string> snapshot;
  while (r->reader->Read(&item) && !item.has_snapshot_end()) {
    EXPECT_EQ(item.change().kind(), hub::v1::RESERVATION_CHANGE_KIND_SNAPSHOT);
    snapshot.push_back(item.change().reservation().reservation_id());
  }
  ASSERT_TRUE(item.has_snapshot_end());
  EXPECT_EQ(snapshot, std::vector<std::string>{kept.reservation_id()});
  const int64_t head = item.snapshot_end().seq();
  const hub::v1::Reservation after = ReserveOk(Request("agent-b", {"after"}));
  const ReservationChange c = Next(*r);
  EXPECT_GT(c.seq(), head);
  EXPECT_EQ(c.reservation().reservation_id(), after.reservation_id());
}

TEST_F(ReservationResumeGrpcTest,
       ACursorOlderThanTheChangesTheHubKeepsIsRefused) {
  // A hub keeping 3 changes in memory.
  HubServerOptions options = TestHubOptions(FreshTestDbPath());
  options.reservation_changes_kept = 3;
  Start(options);
  RegisterAgentOk(presence_.get(), "agent-a");
  std::unique_ptr<Watch> w = StartWatch();
  const int64_t start = w->snapshot_seq;
  FourChanges("agent-a");
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) last = w->Next().seq();
  // The last 3 are kept: resuming after the first works, after the start
  // (4 back) does not.
  std::unique_ptr<Resumed> ok = Resume(start + 1);
  ASSERT_TRUE(ok->first.has_resume());
  EXPECT_TRUE(ok->first.resume().resumed());
  EXPECT_EQ(Next(*ok).seq(), start + 2);
  std::unique_ptr<Resumed> old = Resume(start);
  ASSERT_TRUE(old->first.has_resume());
  EXPECT_FALSE(old->first.resume().resumed());
  EXPECT_EQ(old->first.resume().oldest_seq(), start + 1);
  EXPECT_EQ(last, start + 4);
}

TEST_F(ReservationResumeGrpcTest, ANegativeOrFutureCursorIsInvalidArgument) {
  RegisterAgentOk(presence_.get(), "agent-a");
  ReserveOk(Request("agent-a", {"x"}));
  std::unique_ptr<Watch> w = StartWatch();
  for (const int64_t after_seq : {int64_t{-1}, w->snapshot_seq + 1000}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    WatchReservationsRequest request;
    request.set_project_id(kProject);
    request.set_after_seq(after_seq);
    auto reader = reservations_->WatchReservations(&context, request);
    WatchReservationsResponse item;
    EXPECT_FALSE(reader->Read(&item)) << item.DebugString();
    grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << after_seq;
    EXPECT_EQ(Reason(s), "RESERVATION_CURSOR_INVALID");
  }
}

TEST_F(ReservationWatchGrpcTest, AnAgentFilterSendsOnlyThatHoldersChanges) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  ReserveOk(Request("agent-b", {"b0"}));
  std::unique_ptr<Watch> w = StartWatch("agent-a");
  EXPECT_TRUE(w->snapshot.empty());
  ReserveOk(Request("agent-b", {"b1"}));
  const hub::v1::Reservation a = ReserveOk(Request("agent-a", {"a1"}));
  const ReservationChange change = w->Next();
  EXPECT_EQ(change.kind(), hub::v1::RESERVATION_CHANGE_KIND_GRANTED);
  EXPECT_EQ(change.reservation().reservation_id(), a.reservation_id());
  EXPECT_EQ(change.reservation().agent_id(), "agent-a");
}

TEST_F(ReservationWatchGrpcTest, BadWatchRequestsEndWithTheirReasons) {
  for (const auto& [project, agent, reason] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", "", "PROJECT_ID_INVALID"},
           {"project-1", "", "PROJECT_ID_INVALID"},
           {kProject, std::string(300, 'a'), "AGENT_ID_INVALID"}}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    WatchReservationsRequest request;
    request.set_project_id(project);
    request.set_agent_id(agent);
    auto reader = reservations_->WatchReservations(&context, request);
    WatchReservationsResponse item;
    EXPECT_FALSE(reader->Read(&item));
    grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << reason;
    EXPECT_EQ(Reason(s), reason);
  }
}

TEST_F(ReservationWatchGrpcTest,
       WatchersStartedWhileWritersRaceEndWithExactlyTheLiveReservations) {
  constexpr int kWriters = 4;
  constexpr int kWatchers = 6;
  for (int i = 0; i < kWriters; ++i) {
    RegisterAgentOk(presence_.get(), absl::StrCat("w-", i));
  }
  RegisterAgentOk(presence_.get(), "marker");
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      const std::string agent = absl::StrCat("w-", i);
      std::vector<hub::v1::Reservation> held;
      for (int k = 0; !stop.load() && k < 2000; ++k) {
        if (held.size() < 3) {
          held.push_back(
              ReserveOk(Request(agent, {absl::StrCat("d", i, "/f", k)})));
        } else {
          EXPECT_TRUE(Release(held.front()).ok());
          held.erase(held.begin());
        }
      }
    });
  }
  // Each watcher keeps the live set its stream describes.
  std::vector<std::unique_ptr<Watch>> watches;
  std::vector<std::map<std::string, int64_t>> live(kWatchers);
  std::vector<std::thread> readers;
  const std::string marker_pattern = "zz-marker";
  for (int i = 0; i < kWatchers; ++i) {
    watches.push_back(StartWatch());
    for (const hub::v1::Reservation& r : watches.back()->snapshot) {
      live[i][r.reservation_id()] = r.token();
    }
    // The reader keeps its own pointer: `watches` grows (and may move its
    // elements) while earlier readers run.
    readers.emplace_back([&, i, watch = watches.back().get()] {
      std::set<int64_t> seqs;
      int64_t last = watch->snapshot_seq;
      for (;;) {
        const ReservationChange c = watch->Next();
        if (c.seq() == 0) return;  // failed
        EXPECT_GT(c.seq(), last);
        last = c.seq();
        const std::string& id = c.reservation().reservation_id();
        if (c.kind() == hub::v1::RESERVATION_CHANGE_KIND_GRANTED) {
          EXPECT_EQ(live[i].count(id), 0u) << "granted twice: " << id;
          live[i][id] = c.reservation().token();
          if (c.reservation().patterns(0) == marker_pattern) return;
        } else if (c.kind() == hub::v1::RESERVATION_CHANGE_KIND_RELEASED) {
          EXPECT_EQ(live[i].erase(id), 1u) << "released unknown " << id;
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(20));  // spread the starts over the run
  }
  stop = true;
  for (std::thread& t : writers) t.join();
  ReserveOk(Request("marker", {marker_pattern}));
  for (std::thread& t : readers) t.join();

  hub::v1::ListReservationsRequest list;
  list.set_project_id(kProject);
  list.set_page_size(1000);
  hub::v1::ListReservationsResponse listed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(reservations_->ListReservations(&context, list, &listed).ok());
  }
  std::map<std::string, int64_t> expected;
  for (const hub::v1::Reservation& r : listed.reservations()) {
    expected[r.reservation_id()] = r.token();
  }
  ASSERT_GE(expected.size(), 1u);  // the marker, and what writers hold
  for (int i = 0; i < kWatchers; ++i) {
    EXPECT_EQ(live[i], expected) << "watcher " << i;
  }
}

// ---- Reserve with `wait` ---------------------------------------------------

// A Reserve with `wait` running on its own thread.
struct Pending {
  std::thread thread;
  grpc::Status status;
  hub::v1::Reservation reservation;
  std::atomic<bool> done{false};
  void Join() {
    if (thread.joinable()) thread.join();
  }
  ~Pending() { Join(); }
};

// Reads the watch until a change of `kind` for `agent` (other changes are
// skipped); returns it.
ReservationChange NextOf(Watch& w, hub::v1::ReservationChangeKind kind,
                         const std::string& agent) {
  for (;;) {
    ReservationChange c = w.Next();
    if (c.seq() == 0) return c;  // the stream failed
    if (c.kind() == kind && c.reservation().agent_id() == agent) return c;
  }
}

class ReservationWaitGrpcTest : public ReservationWatchGrpcTest {
 protected:
  std::unique_ptr<Pending> ReserveWaiting(
      const std::string& agent, std::vector<std::string> patterns,
      absl::Duration wait, absl::Duration call_deadline = absl::Seconds(60)) {
    auto p = std::make_unique<Pending>();
    ReserveRequest r = Request(agent, std::move(patterns));
    r.mutable_wait()->set_seconds(absl::ToInt64Seconds(wait));
    r.mutable_wait()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(
        wait - absl::Seconds(absl::ToInt64Seconds(wait)))));
    Pending* raw = p.get();
    p->thread = std::thread([this, raw, r, call_deadline] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + call_deadline));
      hub::v1::ReserveResponse response;
      raw->status = reservations_->Reserve(&context, r, &response);
      raw->reservation = response.reservation();
      raw->done = true;
    });
    return p;
  }
};

TEST_F(ReservationWaitGrpcTest,
       WaitersForAPathAreGrantedItFirstComeFirstServedAsItIsFreed) {
  for (const char* a : {"holder", "first", "second", "other"}) {
    RegisterAgentOk(presence_.get(), a);
  }
  const hub::v1::Reservation held = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  std::unique_ptr<Pending> first =
      ReserveWaiting("first", {"src"}, absl::Seconds(60));
  const ReservationChange queued =
      NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "first");
  EXPECT_EQ(queued.reservation().patterns(0), "src");
  EXPECT_EQ(queued.reservation().token(), 0);
  // It names what it waits behind.
  ASSERT_EQ(queued.reservation().waits_for_size(), 1);
  EXPECT_EQ(queued.reservation().waits_for(0), held.reservation_id());
  std::unique_ptr<Pending> second =
      ReserveWaiting("second", {"src/a.cc"}, absl::Seconds(60));
  // The second waits behind the reservation and the first waiter.
  const ReservationChange second_waits =
      NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "second");
  std::set<std::string> behind(second_waits.reservation().waits_for().begin(),
                               second_waits.reservation().waits_for().end());
  EXPECT_EQ(behind,
            (std::set<std::string>{held.reservation_id(),
                                   queued.reservation().reservation_id()}));
  // Unrelated paths are not held up by the queue.
  ReserveOk(Request("other", {"docs"}));

  ASSERT_TRUE(Release(held).ok());
  first->Join();
  ASSERT_TRUE(first->status.ok()) << first->status.error_message();
  EXPECT_EQ(first->reservation.agent_id(), "first");
  EXPECT_GT(first->reservation.token(), held.token());
  EXPECT_FALSE(second->done.load());  // now behind the first's reservation
  const ReservationChange granted =
      NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_GRANTED, "first");
  EXPECT_EQ(granted.reservation().reservation_id(),
            first->reservation.reservation_id());
  // The second's retry now waits behind the first's reservation, and says
  // so under the same waiter id.
  const ReservationChange again =
      NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "second");
  EXPECT_EQ(again.reservation().reservation_id(),
            second_waits.reservation().reservation_id());
  ASSERT_EQ(again.reservation().waits_for_size(), 1);
  EXPECT_EQ(again.reservation().waits_for(0),
            first->reservation.reservation_id());

  ASSERT_TRUE(Release(first->reservation).ok());
  second->Join();
  ASSERT_TRUE(second->status.ok()) << second->status.error_message();
  EXPECT_GT(second->reservation.token(), first->reservation.token());
}

TEST_F(ReservationWaitGrpcTest,
       AWaitingReserveJumpsNoQueueAndANonWaitingOneIsBehindIt) {
  for (const char* a : {"holder", "first", "late"}) {
    RegisterAgentOk(presence_.get(), a);
  }
  const hub::v1::Reservation held = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  std::unique_ptr<Pending> first =
      ReserveWaiting("first", {"src"}, absl::Seconds(60));
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "first");
  ASSERT_TRUE(Release(held).ok());
  first->Join();
  ASSERT_TRUE(first->status.ok()) << first->status.error_message();
  ASSERT_TRUE(Release(first->reservation).ok());

  // Queued again behind a holder: a reserve that does not wait names the
  // waiter ahead of it once the holder is gone.
  const hub::v1::Reservation again = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Pending> queued =
      ReserveWaiting("first", {"src"}, absl::Seconds(60));
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "first");
  ASSERT_TRUE(Release(again).ok());
  queued->Join();
  ASSERT_TRUE(queued->status.ok());
  grpc::ClientContext context;
  hub::v1::ReserveResponse response;
  grpc::Status late =
      reservations_->Reserve(&context, Request("late", {"src/x"}), &response);
  EXPECT_EQ(Reason(late), "RESERVATION_CONFLICT");
  EXPECT_EQ(ErrorInfoOf(late).metadata().at("holder_agent_id"), "first");
}

TEST_F(ReservationWaitGrpcTest,
       AWaitEndsAtItsDeadlineWithTheConflictAndLeavesNothingBehind) {
  for (const char* a : {"holder", "waiter", "other"}) {
    RegisterAgentOk(presence_.get(), a);
  }
  const hub::v1::Reservation held = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  const absl::Time start = absl::Now();
  std::unique_ptr<Pending> p =
      ReserveWaiting("waiter", {"src/a.cc"}, absl::Milliseconds(500));
  p->Join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(p->status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(p->status), "RESERVATION_CONFLICT");
  EXPECT_EQ(ErrorInfoOf(p->status).metadata().at("holder_agent_id"), "holder");
  EXPECT_EQ(ErrorInfoOf(p->status).metadata().at("reservation_id"),
            held.reservation_id());
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "waiter");
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAIT_ENDED, "waiter");
  // Out of the queue: once the holder releases, another agent gets it.
  ASSERT_TRUE(Release(held).ok());
  ReserveOk(Request("other", {"src"}));
}

TEST_F(ReservationWaitGrpcTest,
       ACallerThatGoesAwayTakesItsWaiterOutOfTheQueue) {
  for (const char* a : {"holder", "waiter", "other"}) {
    RegisterAgentOk(presence_.get(), a);
  }
  const hub::v1::Reservation held = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  std::unique_ptr<Pending> p = ReserveWaiting(
      "waiter", {"src"}, absl::Seconds(60), /*call_deadline=*/absl::Seconds(1));
  p->Join();
  EXPECT_EQ(p->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "waiter");
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAIT_ENDED, "waiter");
  ASSERT_TRUE(Release(held).ok());
  ReserveOk(Request("other", {"src"}));
}

TEST_F(ReservationWaitGrpcTest, AWaiterGetsThePathWhenTheHoldersTtlPasses) {
  RegisterAgentOk(presence_.get(), "holder");
  RegisterAgentOk(presence_.get(), "waiter");
  ReserveOk(Request("holder", {"src"}, /*ttl_seconds=*/1));
  std::unique_ptr<Pending> p =
      ReserveWaiting("waiter", {"src"}, absl::Seconds(60));
  p->Join();
  ASSERT_TRUE(p->status.ok()) << p->status.error_message();
  EXPECT_EQ(p->reservation.agent_id(), "waiter");
}

TEST_F(ReservationWaitGrpcTest, AWaitOutsideItsBoundsIsInvalidArgument) {
  RegisterAgentOk(presence_.get(), "agent-a");
  for (int64_t seconds : {int64_t{0}, int64_t{-1}, int64_t{601}}) {
    ReserveRequest r = Request("agent-a", {"src"});
    r.mutable_wait()->set_seconds(seconds);
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    grpc::Status s = reservations_->Reserve(&context, r, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << seconds;
    EXPECT_EQ(Reason(s), "RESERVATION_WAIT_INVALID") << seconds;
  }
}

// The hub_reservations_held gauge of this project, once `want` (30 s at
// most: the feed applies changes after their commit).
bool HeldBecomes(HubServer& server, double want) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (;;) {
    double held = 0;
    for (const MetricSample& s : server.metrics()->ReservationsHeld()) {
      if (s.labels == LabelValues{kProject}) held = s.value;
    }
    if (held == want) return true;
    if (absl::Now() > give_up) {
      ADD_FAILURE() << "hub_reservations_held is " << held << ", not " << want;
      return false;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

TEST_F(ReservationWaitGrpcTest,
       TheHeldGaugeAndTheWaitCounterFollowEveryChange) {
  RegisterAgentOk(presence_.get(), "agent-a");
  RegisterAgentOk(presence_.get(), "agent-b");
  const hub::v1::Reservation a = ReserveOk(Request("agent-a", {"src"}));
  ReserveOk(Request("agent-a", {"docs"}));
  EXPECT_TRUE(HeldBecomes(*server_, 2));
  std::unique_ptr<Pending> timed_out =
      ReserveWaiting("agent-b", {"src"}, absl::Milliseconds(200));
  timed_out->Join();
  std::unique_ptr<Pending> granted =
      ReserveWaiting("agent-b", {"lib"}, absl::Seconds(30));
  granted->Join();
  ASSERT_TRUE(granted->status.ok());
  EXPECT_TRUE(HeldBecomes(*server_, 3));
  ASSERT_TRUE(Release(a).ok());
  EXPECT_TRUE(HeldBecomes(*server_, 2));
  CounterFamily* waits = server_->metrics()->reservation_waits;
  EXPECT_EQ(waits->Value({"timeout"}), 1);
  EXPECT_EQ(waits->Value({"granted"}), 1);
}

// Waits (30 s at most) until the counter's unlabelled value is `want`.
bool CounterBecomes(CounterFamily* counter, int64_t want) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (;;) {
    const int64_t now = counter->Value({});
    if (now == want) return true;
    if (absl::Now() > give_up) {
      ADD_FAILURE() << "the counter is " << now << ", not " << want;
      return false;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

TEST_F(
    ReservationWaitGrpcTest,
    AWaiterIsNotRetriedByChangesThatCannotFreeItAndGetsItsGrantOnOneThatDoes) {
  for (const char* a : {"holder", "waiter", "other"}) {
    RegisterAgentOk(presence_.get(), a);
  }
  CounterFamily* attempts = server_->metrics()->reservation_wait_attempts;
  const hub::v1::Reservation held = ReserveOk(Request("holder", {"src"}));
  std::unique_ptr<Watch> w = StartWatch();
  std::unique_ptr<Pending> p =
      ReserveWaiting("waiter", {"src/a.cc"}, absl::Seconds(60));
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_WAITING, "waiter");
  // The first attempt, and the one right after it joined the queue.
  ASSERT_TRUE(CounterBecomes(attempts, 2));

  // Changes of the project that free nothing it waits for, each seen by the
  // watch before the next: grants and releases of other paths (the
  // holder's too), a narrowing of another reservation, a renewal of the one
  // it waits for.
  for (int i = 0; i < 5; ++i) {
    const hub::v1::Reservation docs = ReserveOk(
        Request("other", {absl::StrCat("docs/", i), absl::StrCat("lib/", i)}));
    NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_GRANTED, "other");
    ASSERT_TRUE(Release(docs, {absl::StrCat("lib/", i)}).ok());
    NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_NARROWED, "other");
    ASSERT_TRUE(Release(docs).ok());
    NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_RELEASED, "other");
  }
  const hub::v1::Reservation beside =
      ReserveOk(Request("holder", {"src/b.cc"}));
  ASSERT_TRUE(Release(beside).ok());
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_RELEASED, "holder");
  ASSERT_TRUE(Renew(held, 600).ok());
  NextOf(*w, hub::v1::RESERVATION_CHANGE_KIND_RENEWED, "holder");
  EXPECT_FALSE(p->done.load());

  // The release of what it waits for: one more attempt, granted.
  ASSERT_TRUE(Release(held).ok());
  p->Join();
  ASSERT_TRUE(p->status.ok()) << p->status.error_message();
  EXPECT_EQ(p->reservation.agent_id(), "waiter");
  EXPECT_EQ(attempts->Value({}), 3);
}

}  // namespace
}  // namespace hub::testing
