// noop_server: the ceiling for hubbench. A gRPC server from the same gRPC as
// hubd (callback API: one reactor per stream, no thread per stream) whose
// methods answer at once and store nothing.
//
//   noop_server [--listen=127.0.0.1:0]
//
// Prints "noop_server serving on <host:port>" once it serves. SIGINT or
// SIGTERM shut it down cleanly (exit 0).
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "noop.grpc.pb.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "host:port to serve on; port 0 picks a free port");

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

class NoopServiceImpl final : public NoopService::CallbackService {
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const Ping* request, Pong* reply) override {
    reply->set_seq(request->seq());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<Ping, Pong>* Stream(
      grpc::CallbackServerContext* context) override {
    return new EchoStream();
  }
};

int Main() {
  // Shutdown signals are taken synchronously below; gRPC's threads inherit
  // the blocked mask, so they never see them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  NoopServiceImpl service;
  int port = 0;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
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
                   " [--listen=host:port]"));
  absl::ParseCommandLine(argc, argv);
  return hubbench::Main();
}
