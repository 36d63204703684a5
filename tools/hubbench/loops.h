// Closed-loop drivers, independent of the target: a unary loop (one call in
// flight per client) and ping streams (one frame in flight per stream),
// built on gRPC's callback API (one reactor per call or stream, no thread
// per stream). A target plugs in by implementing UnaryOp or StreamProtocol.
#ifndef TOOLS_HUBBENCH_LOOPS_H_
#define TOOLS_HUBBENCH_LOOPS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/hubbench/bench.h"

namespace hubbench {

// How one unary operation ended.
enum class Outcome {
  kDone,    // Succeeded.
  kLost,    // A compare-and-set that lost its race (not an error).
  kFailed,  // An error: the client stops.
};

// One client's unary operation, started again as soon as it completes.
// Start is never called while a previous operation is in flight.
class UnaryOp {
 public:
  using DoneFn =
      std::function<void(Outcome, const grpc::Status&, int64_t version)>;
  virtual ~UnaryOp() = default;
  // Starts one operation; calls `done` exactly once, from any thread, with
  // the outcome, the failing call's status, and for a successful
  // compare-and-set the version it produced (-1 otherwise).
  virtual void Start(DoneFn done) = 0;
};

// What a unary loop measured over its window.
struct UnaryTotals {
  int64_t done = 0;
  int64_t lost = 0;
  int64_t errors = 0;
  // Successes that reported a version already reported for the same key.
  int64_t dup_versions = 0;
  grpc::Status first_error;
  LatencySamples latency;  // Of successful operations.
};

// Runs every op in a closed loop until window.end (no new op starts after
// it), then waits for the ops in flight. Counts what completes inside the
// window. `shared_key`: all ops write one key, so a version may succeed only
// once across all of them (else once per op).
UnaryTotals RunUnaryLoop(const std::vector<std::unique_ptr<UnaryOp>>& ops,
                         const Window& window, bool shared_key);

// What a paced loop measured: its totals and the operations it had no idle
// client for when their time came.
struct PacedTotals {
  UnaryTotals unary;
  int64_t late = 0;  // Slots inside the window with every client busy.
};

// Starts operations at a fixed rate (`per_second`, over all ops together),
// from now until window.end, each on the next client that has none in
// flight (an open loop: the rate does not slow down when the server does,
// so latencies are those of a server under that load, not its saturation).
// A slot that finds every client busy is skipped and counted as late. Waits
// for the ops in flight; counts what completes inside the window.
PacedTotals RunPacedLoop(const std::vector<std::unique_ptr<UnaryOp>>& ops,
                         const Window& window, double per_second);

// What a target's streams send and how their answers are read.
template <typename Request, typename Response>
class StreamProtocol {
 public:
  enum class Answer {
    kAck,     // Answers the frame in flight (hello or ping).
    kIgnore,  // Unsolicited (an event): keep reading.
    kError,   // The stream is unusable: cancel it.
  };
  virtual ~StreamProtocol() = default;
  // Starts the call on `channel` for `reactor`
  // (stub->async()->Method(context, reactor)); the stub lives in the
  // protocol.
  virtual void Start(std::shared_ptr<grpc::Channel> channel,
                     grpc::ClientContext* context,
                     grpc::ClientBidiReactor<Request, Response>* reactor) = 0;
  // Fills the first frame when the protocol has one (its answer is not
  // timed); returns false otherwise.
  virtual bool Hello(Request* request) { return false; }
  // Fills the next timed frame.
  virtual void Ping(Request* request) = 0;
  virtual Answer Classify(const Response& response, std::string* error) = 0;
};

// Shared by all streams of a run: the stop signal and the counters the
// workload waits on.
class StreamBoard {
 public:
  // Nothing is counted until SetWindow.
  StreamBoard() = default;

  // Opens the counting window (streams may already be running).
  void SetWindow(const Window& window);
  // Whether an answer at `t` counts.
  bool InWindow(absl::Time t) const;
  bool running() const { return running_.load(std::memory_order_relaxed); }
  void StopRunning() { running_ = false; }

  void Established();
  // A stream failed; `before_established` when it never got its first
  // answer (it then counts toward WaitEstablished).
  void Failed(const grpc::Status& status, bool before_established);
  void Finished();

  // Wait until `n` streams were established (or failed), or `deadline`.
  bool WaitEstablished(int n, absl::Time deadline);
  // Wait until `n` streams finished, or `deadline`.
  bool WaitFinished(int n, absl::Time deadline);

  int failed() const;
  grpc::Status first_error() const;

 private:
  std::atomic<int64_t> window_start_ns_{INT64_MAX};
  std::atomic<int64_t> window_end_ns_{INT64_MAX};
  std::atomic<bool> running_{true};
  mutable absl::Mutex mu_;
  int established_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_early_ ABSL_GUARDED_BY(mu_) = 0;
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status first_error_ ABSL_GUARDED_BY(mu_);
};

// A stream the workload drives without knowing its types.
class PingStreamBase {
 public:
  virtual ~PingStreamBase() = default;
  // Opens the stream on `channel` and sends the first frame.
  virtual void Go(std::shared_ptr<grpc::Channel> channel) = 0;
  // Half-closes a held stream (ping loops half-close by themselves once the
  // board stops running).
  virtual void Close() = 0;
  // Round trips answered inside the window. Read after the stream finished.
  virtual const LatencySamples& latency() const = 0;
};

// One stream: hello (when the protocol has one), then ping frames, one in
// flight. With `hold`, stops after the first answer and stays open until
// Close(). A read is always outstanding, so unsolicited frames are drained.
template <typename Request, typename Response>
class PingStream final : public PingStreamBase,
                         public grpc::ClientBidiReactor<Request, Response> {
 public:
  using Protocol = StreamProtocol<Request, Response>;

  PingStream(std::unique_ptr<Protocol> protocol, StreamBoard* board, bool hold,
             absl::Duration max_life)
      : protocol_(std::move(protocol)), board_(board), hold_(hold) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + max_life));
  }

  void Go(std::shared_ptr<grpc::Channel> channel) override {
    protocol_->Start(std::move(channel), &context_, this);
    this->StartRead(&response_);
    in_hello_ = protocol_->Hello(&request_);
    if (!in_hello_) protocol_->Ping(&request_);
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = true;
    }
    sent_at_ = absl::Now();
    this->StartWrite(&request_);
    this->StartCall();
  }

  void Close() override {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
    }
    Send(kHalfClose);
  }

  const LatencySamples& latency() const override { return latency_; }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The stream ended: OnDone follows.
    std::string error;
    switch (protocol_->Classify(response_, &error)) {
      case Protocol::Answer::kIgnore:
        this->StartRead(&response_);
        return;
      case Protocol::Answer::kError: {
        {
          absl::MutexLock lock(&mu_);
          error_ = error;
        }
        context_.TryCancel();
        return;
      }
      case Protocol::Answer::kAck:
        break;
    }
    const absl::Time now = absl::Now();
    if (!in_hello_ && board_->InWindow(now)) {
      latency_.Add(now - sent_at_);
    }
    in_hello_ = false;
    if (!established_) {
      established_ = true;
      board_->Established();
    }
    if (!hold_) Send(board_->running() ? kPing : kHalfClose);
    this->StartRead(&response_);
  }

  void OnWriteDone(bool ok) override {
    Write next = kNone;
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      if (ok) next = ClaimLocked(queued_);
      queued_ = kNone;
    }
    Do(next);
  }

  void OnDone(const grpc::Status& status) override {
    grpc::Status failure;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      if (!error_.empty()) {
        failure = grpc::Status(grpc::StatusCode::INTERNAL, error_);
      } else if (!status.ok() &&
                 !(closing_ &&
                   status.error_code() == grpc::StatusCode::CANCELLED)) {
        failure = status;
      } else if (!established_) {
        failure = grpc::Status(grpc::StatusCode::INTERNAL,
                               "stream ended before its first answer");
      }
    }
    if (!failure.ok()) board_->Failed(failure, !established_);
    board_->Finished();  // Last: the workload may destroy us after this.
  }

 private:
  enum Write { kNone, kPing, kHalfClose };

  // Sends `write` now, or once the write in flight completes. gRPC calls
  // (StartWrite, TryCancel) are made outside mu_: a reaction may run inline.
  void Send(Write write) {
    Write now = kNone;
    {
      absl::MutexLock lock(&mu_);
      if (write_in_flight_) {
        if (queued_ != kHalfClose) queued_ = write;
      } else {
        now = ClaimLocked(write);
      }
    }
    Do(now);
  }

  // Marks `write` as started; returns what Do must start (kNone when the
  // stream is already half-closed).
  Write ClaimLocked(Write write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // After OnDone the reactor may not start anything: a held stream whose
    // server died is closed by the workload all the same.
    if (write == kNone || half_closed_ || done_) return kNone;
    if (write == kHalfClose) {
      half_closed_ = true;
    } else {
      write_in_flight_ = true;
    }
    return write;
  }

  // Starts a claimed write. request_ and sent_at_ belong to whoever claimed
  // the write (write_in_flight_ excludes everyone else).
  void Do(Write write) {
    if (write == kHalfClose) {
      this->StartWritesDone();
    } else if (write == kPing) {
      protocol_->Ping(&request_);
      sent_at_ = absl::Now();
      this->StartWrite(&request_);
    }
  }

  const std::unique_ptr<Protocol> protocol_;
  StreamBoard* const board_;
  const bool hold_;
  grpc::ClientContext context_;
  Response response_;       // Only OnReadDone (one read at a time).
  LatencySamples latency_;  // Only OnReadDone.
  bool in_hello_ = false;   // Only Go, then OnReadDone.
  bool established_ = false;
  Request request_;     // Owned by the claimed write, see Do.
  absl::Time sent_at_;  // Idem; read when the answer arrives.

  absl::Mutex mu_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // OnDone ran
  Write queued_ ABSL_GUARDED_BY(mu_) = kNone;
  std::string error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hubbench

#endif  // TOOLS_HUBBENCH_LOOPS_H_
