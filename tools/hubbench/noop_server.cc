// noop_server: the ceiling for hubbench. A gRPC server from the same gRPC as
// hubd (callback API: one reactor per stream, no thread per stream) whose
// methods answer at once and store nothing.
//
//   noop_server [--listen=127.0.0.1:0]
//               [--reply=inline|thread|relay|leader] [--durable=FILE]
//               [--hub_methods] [--interceptors=0]
//
// --reply says which thread answers a Unary call (streams always answer
// inline): `inline`, the handler itself (the ceiling); `thread`, one of two
// reply threads the handler hands the call to; `relay`, the handler hands it
// to a batching thread that passes each batch to those reply threads, the
// hand-offs of hubd's group commit (gRPC poller -> writer -> completion
// thread, storage/group_commit_writer.h) with nothing written; `leader`,
// the first handler that finds nobody answering answers its own call and
// every call queued meanwhile, batch after batch, until the queue is empty
// (no hand-off to a thread of the server's own: the calls are answered from
// gRPC's pollers, though not always from the one that read them). The
// hand-off modes measure what answering a call from another thread costs
// gRPC and the scheduler, whatever the server does meanwhile.
//
// --durable=FILE makes every Unary call a durable write, the least one can
// be: a row of three columns under a text primary key (a random 32-digit hex
// key, the call's seq, a time) inserted into a new SQLite database in WAL
// mode at synchronous=FULL, and the call answered only once its transaction
// has committed. Whoever answers commits: inline, the handler, a
// transaction per call, one handler at a time; relay, the batching thread,
// a transaction per batch (hubd's group commit); leader, the leader, a
// transaction per batch. FILE must not exist yet. The floor under any
// server that answers "committed" on this disk, with nothing else to do.
//
// --hub_methods also registers hubd's services (every method answers
// UNIMPLEMENTED), its health service and reflection: the server's method
// table is then hubd's, and gRPC builds that table for every connection,
// so the no-op's idle memory per connection reads what hubd's API costs
// before hubd does anything.
//
// --interceptors=N installs N server interceptors that only pass every hook
// on (hubd has two: hub/services/malformed_request.h,
// hub/observability/rpc_observer.h): what gRPC's interception machinery costs a
// call by itself.
//
// Prints "noop_server serving on <host:port>" once it serves. SIGINT or
// SIGTERM shut it down cleanly (exit 0).
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hub/v1/admin.grpc.pb.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "noop.grpc.pb.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "host:port to serve on; port 0 picks a free port");
ABSL_FLAG(std::string, reply, "inline",
          "which thread answers a Unary call: inline (the handler), thread "
          "(a reply thread), relay (a batching thread, then a reply thread) "
          "or leader (the handler that finds nobody answering answers every "
          "call queued until the queue is empty)");
ABSL_FLAG(std::string, durable, "",
          "a SQLite file to create: every Unary call inserts one row there "
          "(WAL, synchronous=FULL) and is answered once it is committed");
ABSL_FLAG(bool, hub_methods, false,
          "also register hubd's services (UNIMPLEMENTED), health and "
          "reflection, so that gRPC's per-connection method table is "
          "hubd's");
ABSL_FLAG(int, interceptors, 0,
          "server interceptors that pass every hook on, as many as this");

namespace hubbench {
namespace {

using hubbench::v1::NoopService;
using hubbench::v1::Ping;
using hubbench::v1::Pong;

// One per Stream call: keeps a read outstanding at all times (also while a
// Pong is being written, so the next Ping is never held up behind a write
// completion), answers each Ping with one Pong in order, and finishes OK when
// the client half-closes. gRPC calls are made outside mu_: a reaction may
// run inline.
class EchoStream : public grpc::ServerBidiReactor<Ping, Pong> {
 public:
  EchoStream() { StartRead(&ping_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // Half-close or cancellation.
      bool finish = false;
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        finish = !writing_ && !finished_;
        finished_ = finished_ || finish;
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    bool write = false;
    {
      absl::MutexLock lock(&mu_);
      unanswered_.push_back(ping_.seq());
      write = ClaimWriteLocked();
    }
    if (write) StartWrite(&pong_);
    StartRead(&ping_);  // ping_ is free again: its seq was copied.
  }

  void OnWriteDone(bool ok) override {
    bool write = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (ok) write = ClaimWriteLocked();
      finish = !write && (reads_done_ || !ok) && !finished_;
      finished_ = finished_ || finish;
    }
    if (write) {
      StartWrite(&pong_);
    } else if (finish) {
      Finish(ok ? grpc::Status::OK
                : grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    }
  }

  void OnDone() override { delete this; }

 private:
  // Fills pong_ for the oldest unanswered Ping when no write is in flight.
  bool ClaimWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || unanswered_.empty()) return false;
    pong_.set_seq(unanswered_.front());
    unanswered_.pop_front();
    writing_ = true;
    return true;
  }

  Ping ping_;  // Only the outstanding read.
  Pong pong_;  // Only the write in flight (writing_ says who owns it).
  absl::Mutex mu_;
  std::deque<int64_t> unanswered_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish is called once.
};

// The least durable write a call can ask for: one row into a SQLite
// database of its own, committed with a sync before the call is answered.
// Write() commits one transaction for `rows` calls; calls to it are
// serialised.
class Journal {
 public:
  // Creates `path` (which must not exist) or exits the process: this is a
  // benchmark's fixture, and a half-open database would only mislead.
  explicit Journal(const std::string& path) {
    if (access(path.c_str(), F_OK) == 0) Die(path + " already exists");
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) Die("open");
    Exec(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
        " CREATE TABLE calls (id TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
        " at_ms INTEGER NOT NULL)");
    if (sqlite3_prepare_v2(db_, "INSERT INTO calls VALUES (?1, ?2, ?3)", -1,
                           &insert_, nullptr) != SQLITE_OK) {
      Die("prepare");
    }
  }

  ~Journal() {
    sqlite3_finalize(insert_);
    sqlite3_close(db_);
  }

  void Write(const std::vector<int64_t>& seqs) {
    absl::MutexLock lock(&mu_);
    Exec("BEGIN");
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    for (int64_t seq : seqs) {
      char key[33];
      std::snprintf(key, sizeof key, "%016llx%016llx",
                    static_cast<unsigned long long>(random_()),
                    static_cast<unsigned long long>(random_()));
      sqlite3_bind_text(insert_, 1, key, 32, SQLITE_TRANSIENT);
      sqlite3_bind_int64(insert_, 2, seq);
      sqlite3_bind_int64(insert_, 3, now_ms);
      if (sqlite3_step(insert_) != SQLITE_DONE) Die("insert");
      sqlite3_reset(insert_);
    }
    Exec("COMMIT");
  }

 private:
  void Exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      Die(sql);
    }
  }

  [[noreturn]] void Die(const std::string& what) {
    std::fprintf(stderr, "noop_server: --durable: %s: %s\n", what.c_str(),
                 db_ != nullptr ? sqlite3_errmsg(db_) : "");
    std::exit(1);
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  absl::Mutex mu_;
  std::mt19937_64 random_{std::random_device{}()};
};

// A Unary call waiting to be answered, and the seq its row carries.
struct Call {
  grpc::ServerUnaryReactor* reactor;
  int64_t seq;
};

std::vector<int64_t> SeqsOf(const std::vector<Call>& calls) {
  std::vector<int64_t> seqs;
  seqs.reserve(calls.size());
  for (const Call& c : calls) seqs.push_back(c.seq);
  return seqs;
}

// Answers Unary calls, after writing them when there is a journal.
class Answerer {
 public:
  virtual ~Answerer() = default;
  // Finish(OK) on `call.reactor`, once its row is committed.
  virtual void Answer(Call call) = 0;
};

// The handler answers its own call (after a transaction of its own).
class InlineAnswerer final : public Answerer {
 public:
  explicit InlineAnswerer(Journal* journal) : journal_(journal) {}

  void Answer(Call call) override {
    if (journal_ != nullptr) journal_->Write({call.seq});
    call.reactor->Finish(grpc::Status::OK);
  }

 private:
  Journal* const journal_;
};

// Finishes Unary calls on threads of its own, the way hubd answers a
// durable write: with a batching thread (relay), each call goes handler ->
// batcher (which commits the batch's rows) -> a reply thread, else handler
// -> a reply thread. Same primitives and thread count as
// storage/group_commit_writer.h (an absl::Mutex and CondVar per queue, two
// reply threads).
class Replier final : public Answerer {
 public:
  // `journal` is only used with batching.
  Replier(bool batching, Journal* journal)
      : batching_(batching), journal_(journal) {
    if (batching_) batcher_ = std::thread([this] { Batch(); });
    for (int i = 0; i < 2; ++i) repliers_.emplace_back([this] { Reply(); });
  }

  ~Replier() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      work_.Signal();
    }
    if (batcher_.joinable()) batcher_.join();
    {
      absl::MutexLock lock(&reply_mu_);
      reply_stopping_ = true;
      reply_ready_.SignalAll();
    }
    for (std::thread& t : repliers_) t.join();
  }

  void Answer(Call call) override {
    if (!batching_) {
      absl::MutexLock lock(&reply_mu_);
      replies_.push_back({call});
      reply_ready_.Signal();
      return;
    }
    absl::MutexLock lock(&mu_);
    queue_.push_back(call);
    if (queue_.size() == 1) work_.Signal();
  }

 private:
  using Calls = std::vector<Call>;

  void Batch() {
    pthread_setname_np(pthread_self(), "noop-batcher");
    for (;;) {
      Calls batch;
      {
        absl::MutexLock lock(&mu_);
        while (queue_.empty() && !stopping_) work_.Wait(&mu_);
        if (queue_.empty()) return;
        batch.swap(queue_);
      }
      if (journal_ != nullptr) journal_->Write(SeqsOf(batch));
      absl::MutexLock lock(&reply_mu_);
      replies_.push_back(std::move(batch));
      reply_ready_.Signal();
    }
  }

  void Reply() {
    pthread_setname_np(pthread_self(), "noop-reply");
    for (;;) {
      Calls batch;
      {
        absl::MutexLock lock(&reply_mu_);
        while (replies_.empty() && !reply_stopping_) {
          reply_ready_.Wait(&reply_mu_);
        }
        if (replies_.empty()) return;
        batch = std::move(replies_.front());
        replies_.pop_front();
      }
      for (const Call& c : batch) c.reactor->Finish(grpc::Status::OK);
    }
  }

  const bool batching_;
  Journal* const journal_;
  absl::Mutex mu_;
  absl::CondVar work_;
  Calls queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread batcher_;
  absl::Mutex reply_mu_;
  absl::CondVar reply_ready_;
  std::deque<Calls> replies_ ABSL_GUARDED_BY(reply_mu_);
  bool reply_stopping_ ABSL_GUARDED_BY(reply_mu_) = false;
  std::vector<std::thread> repliers_;
};

// Leader/follower group commit on gRPC's own threads: a handler queues its
// call; if no handler is answering, it becomes the leader and, batch after
// batch, commits and answers everything queued until the queue is empty.
// Calls that arrive meanwhile only queue, so their pollers go back to
// reading at once. Nothing is handed to a thread of the server's own.
class LeaderAnswerer final : public Answerer {
 public:
  explicit LeaderAnswerer(Journal* journal) : journal_(journal) {}

  void Answer(Call call) override {
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(call);
      if (leading_) return;
      leading_ = true;
    }
    for (;;) {
      std::vector<Call> batch;
      {
        absl::MutexLock lock(&mu_);
        if (queue_.empty()) {
          leading_ = false;
          return;
        }
        batch.swap(queue_);
      }
      if (journal_ != nullptr) journal_->Write(SeqsOf(batch));
      for (const Call& c : batch) c.reactor->Finish(grpc::Status::OK);
    }
  }

 private:
  Journal* const journal_;
  absl::Mutex mu_;
  std::vector<Call> queue_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
};

// An interceptor that does nothing but let each hook proceed, one per call.
class PassThrough final : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    m->Proceed();
  }
};

class PassThroughFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new PassThrough();
  }
};

class NoopServiceImpl final : public NoopService::CallbackService {
 public:
  explicit NoopServiceImpl(Answerer* answerer) : answerer_(answerer) {}

 private:
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const Ping* request, Pong* reply) override {
    reply->set_seq(request->seq());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    answerer_->Answer({reactor, request->seq()});
    return reactor;
  }

  grpc::ServerBidiReactor<Ping, Pong>* Stream(
      grpc::CallbackServerContext* context) override {
    return new EchoStream();
  }

  Answerer* const answerer_;
};

int Main() {
  // Shutdown signals are taken synchronously below; gRPC's threads inherit
  // the blocked mask, so they never see them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string reply = absl::GetFlag(FLAGS_reply);
  if (reply != "inline" && reply != "thread" && reply != "relay" &&
      reply != "leader") {
    std::fprintf(
        stderr,
        "noop_server: --reply must be inline, thread, relay or leader\n");
    return 64;
  }
  std::unique_ptr<Journal> journal;
  if (const std::string path = absl::GetFlag(FLAGS_durable); !path.empty()) {
    if (reply == "thread") {
      std::fprintf(stderr,
                   "noop_server: --durable needs --reply=inline, relay or "
                   "leader\n");
      return 64;
    }
    journal = std::make_unique<Journal>(path);
  }
  std::unique_ptr<Answerer> answerer;
  if (reply == "inline") {
    answerer = std::make_unique<InlineAnswerer>(journal.get());
  } else if (reply == "leader") {
    answerer = std::make_unique<LeaderAnswerer>(journal.get());
  } else {
    answerer = std::make_unique<Replier>(reply == "relay", journal.get());
  }
  NoopServiceImpl service(answerer.get());
  // hubd's services, unimplemented: only their methods' table matters.
  hub::v1::HubService::CallbackService hub_service;
  hub::v1::PresenceService::CallbackService presence_service;
  hub::v1::RoleService::CallbackService role_service;
  hub::v1::MessageService::CallbackService message_service;
  hub::v1::ReservationService::CallbackService reservation_service;
  hub::v1::AdminService::CallbackService admin_service;
  const bool hub_methods = absl::GetFlag(FLAGS_hub_methods);
  if (hub_methods) {  // as hub/server.cc does, before the builder
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  int port = 0;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  if (const int n = absl::GetFlag(FLAGS_interceptors); n > 0) {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    for (int i = 0; i < n; ++i) {
      interceptors.push_back(std::make_unique<PassThroughFactory>());
    }
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  if (hub_methods) {
    for (grpc::Service* s : std::initializer_list<grpc::Service*>{
             &hub_service, &presence_service, &role_service, &message_service,
             &reservation_service, &admin_service}) {
      builder.RegisterService(s);
    }
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "noop_server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::printf("noop_server serving on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace hubbench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      absl::StrCat("no-op gRPC server, hubbench's ceiling.\n\nUsage: ", argv[0],
                   " [--listen=host:port] [--reply=inline|thread|relay|leader]"
                   " [--durable=FILE] [--hub_methods] [--interceptors=N]"));
  absl::ParseCommandLine(argc, argv);
  return hubbench::Main();
}
