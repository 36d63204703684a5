// The ceiling: the same loops against noop_server, which answers at once.
#include "noop.grpc.pb.h"
#include "tools/hubbench/targets.h"

namespace hubbench {
namespace {

using hubbench::v1::NoopService;
using hubbench::v1::Ping;
using hubbench::v1::Pong;

// One Unary echo per op: what any unary RPC costs at the least.
class EchoOp : public UnaryOp {
 public:
  EchoOp(std::shared_ptr<grpc::Channel> channel, int payload_bytes)
      : stub_(NoopService::NewStub(channel)) {
    request_.set_payload(std::string(payload_bytes, 'x'));
  }

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    request_.set_seq(request_.seq() + 1);
    stub_->async()->Unary(
        context_.get(), &request_, &reply_, [done](grpc::Status status) {
          done(status.ok() ? Outcome::kDone : Outcome::kFailed, status, -1);
        });
  }

 private:
  std::unique_ptr<NoopService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  Ping request_;
  Pong reply_;
};

// The stream echo. Message types are spelled in full below: inside the class
// `Ping` names the protocol's method.
class EchoProtocol : public StreamProtocol<Ping, Pong> {
 public:
  void Start(std::shared_ptr<grpc::Channel> channel,
             grpc::ClientContext* context,
             grpc::ClientBidiReactor<hubbench::v1::Ping, hubbench::v1::Pong>*
                 reactor) override {
    stub_ = NoopService::NewStub(channel);
    stub_->async()->Stream(context, reactor);
  }
  void Ping(hubbench::v1::Ping* request) override { request->set_seq(++seq_); }
  Answer Classify(const Pong& reply, std::string* error) override {
    return Answer::kAck;
  }

 private:
  std::unique_ptr<NoopService::Stub> stub_;
  int64_t seq_ = 0;  // Only the stream's claimed write touches it.
};

// Runs `op` twice in a row as one operation.
class TwiceOp : public UnaryOp {
 public:
  explicit TwiceOp(std::unique_ptr<UnaryOp> op) : op_(std::move(op)) {}
  void Start(DoneFn done) override {
    op_->Start(
        [this, done](Outcome outcome, const grpc::Status& status, int64_t) {
          if (outcome != Outcome::kDone) return done(outcome, status, -1);
          op_->Start([done](Outcome again, const grpc::Status& s, int64_t) {
            done(again, s, -1);
          });
        });
  }

 private:
  std::unique_ptr<UnaryOp> op_;
};

class NoopTarget : public Target {
 public:
  explicit NoopTarget(int payload_bytes) : payload_bytes_(payload_bytes) {}

  std::unique_ptr<UnaryOp> NewRegisterOp(std::shared_ptr<grpc::Channel> channel,
                                         int client) override {
    return std::make_unique<EchoOp>(channel, payload_bytes_);
  }

  // The unary ceiling beside a compare-and-set: there is no key to contend.
  absl::StatusOr<std::unique_ptr<UnaryOp>> NewCasOp(
      std::shared_ptr<grpc::Channel> channel, int client, int key) override {
    return std::make_unique<EchoOp>(channel, payload_bytes_);
  }

  // Two echoes, as a lock and its release are two round trips.
  absl::StatusOr<std::unique_ptr<UnaryOp>> NewLockOp(
      std::shared_ptr<grpc::Channel> channel, int client) override {
    return std::make_unique<TwiceOp>(
        std::make_unique<EchoOp>(channel, payload_bytes_));
  }

  absl::StatusOr<std::unique_ptr<PingStreamBase>> NewStream(
      std::shared_ptr<grpc::Channel> setup, int index, StreamBoard* board,
      bool hold, absl::Duration max_life) override {
    return std::make_unique<PingStream<Ping, Pong>>(
        std::make_unique<EchoProtocol>(), board, hold, max_life);
  }

 private:
  const int payload_bytes_;
};

}  // namespace

std::unique_ptr<Target> NewNoopTarget(int payload_bytes) {
  return std::make_unique<NoopTarget>(payload_bytes);
}

}  // namespace hubbench
