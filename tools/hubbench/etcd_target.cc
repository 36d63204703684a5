// etcd 3.4 as a reference, through its own gRPC API: a registration is a
// LeaseGrant, a heartbeat a LeaseKeepAlive round trip, a compare-and-set a
// Txn comparing the key's mod_revision (its failure branch reads the key, so
// a lost race learns the new revision in the same round trip).
#include "absl/strings/str_cat.h"
#include "etcd/etcdserver/api/v3lock/v3lockpb/v3lock.grpc.pb.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "tools/hubbench/targets.h"

namespace hubbench {
namespace {

using etcdserverpb::KV;
using etcdserverpb::Lease;
using etcdserverpb::LeaseKeepAliveRequest;
using etcdserverpb::LeaseKeepAliveResponse;

// Lease TTLs: registrations made by the loop, and stream leases, which must
// outlive the longest run so keepalives never find them expired.
constexpr int64_t kRegisterTtlSeconds = 60;
constexpr int64_t kStreamTtlSeconds = 600;

class LeaseGrantOp : public UnaryOp {
 public:
  explicit LeaseGrantOp(std::shared_ptr<grpc::Channel> channel)
      : stub_(Lease::NewStub(channel)) {
    request_.set_ttl(kRegisterTtlSeconds);
  }

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    stub_->async()->LeaseGrant(
        context_.get(), &request_, &reply_, [this, done](grpc::Status status) {
          if (status.ok() && !reply_.error().empty()) {
            status = grpc::Status(grpc::StatusCode::UNKNOWN, reply_.error());
          }
          done(status.ok() ? Outcome::kDone : Outcome::kFailed, status, -1);
        });
  }

 private:
  std::unique_ptr<Lease::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  etcdserverpb::LeaseGrantRequest request_;
  etcdserverpb::LeaseGrantResponse reply_;
};

// Compare-and-swap on one key's mod_revision. Not thread-safe: one op in
// flight (the loop's contract).
class TxnCasOp : public UnaryOp {
 public:
  TxnCasOp(std::shared_ptr<grpc::Channel> channel, std::string key,
           int64_t mod_revision)
      : stub_(KV::NewStub(channel)),
        key_(std::move(key)),
        mod_revision_(mod_revision) {}

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    request_.Clear();
    etcdserverpb::Compare* compare = request_.add_compare();
    compare->set_key(key_);
    compare->set_target(etcdserverpb::Compare::MOD);
    compare->set_result(etcdserverpb::Compare::EQUAL);
    compare->set_mod_revision(mod_revision_);
    etcdserverpb::PutRequest* put =
        request_.add_success()->mutable_request_put();
    put->set_key(key_);
    put->set_value(absl::StrCat(++writes_));
    request_.add_failure()->mutable_request_range()->set_key(key_);
    stub_->async()->Txn(
        context_.get(), &request_, &reply_, [this, done](grpc::Status status) {
          if (!status.ok()) {
            done(Outcome::kFailed, status, -1);
          } else if (reply_.succeeded()) {
            mod_revision_ = reply_.header().revision();
            done(Outcome::kDone, status, mod_revision_);
          } else if (reply_.responses_size() == 1 &&
                     reply_.responses(0).response_range().kvs_size() == 1) {
            mod_revision_ =
                reply_.responses(0).response_range().kvs(0).mod_revision();
            done(Outcome::kLost, status, -1);
          } else {
            done(Outcome::kFailed,
                 grpc::Status(grpc::StatusCode::INTERNAL,
                              "Txn failure branch did not return the key"),
                 -1);
          }
        });
  }

 private:
  std::unique_ptr<KV::Stub> stub_;
  const std::string key_;
  int64_t mod_revision_;
  int64_t writes_ = 0;
  std::unique_ptr<grpc::ClientContext> context_;
  etcdserverpb::TxnRequest request_;
  etcdserverpb::TxnResponse reply_;
};

// v3lock's Lock then Unlock of one name under a lease granted at setup,
// as clientv3's concurrency.Mutex does through the lock service.
class LockUnlockOp : public UnaryOp {
 public:
  LockUnlockOp(std::shared_ptr<grpc::Channel> channel, std::string name,
               int64_t lease)
      : stub_(v3lockpb::Lock::NewStub(channel)) {
    lock_.set_name(std::move(name));
    lock_.set_lease(lease);
  }

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    stub_->async()->Lock(
        context_.get(), &lock_, &locked_, [this, done](grpc::Status status) {
          if (!status.ok()) return done(Outcome::kFailed, status, -1);
          context_ = NewCallContext();
          unlock_.set_key(locked_.key());
          stub_->async()->Unlock(
              context_.get(), &unlock_, &unlocked_, [done](grpc::Status s) {
                done(s.ok() ? Outcome::kDone : Outcome::kFailed, s, -1);
              });
        });
  }

 private:
  std::unique_ptr<v3lockpb::Lock::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  v3lockpb::LockRequest lock_;
  v3lockpb::LockResponse locked_;
  v3lockpb::UnlockRequest unlock_;
  v3lockpb::UnlockResponse unlocked_;
};

// Keepalives for one lease granted at setup.
class KeepAliveProtocol
    : public StreamProtocol<LeaseKeepAliveRequest, LeaseKeepAliveResponse> {
 public:
  explicit KeepAliveProtocol(int64_t lease_id) : lease_id_(lease_id) {}

  void Start(
      std::shared_ptr<grpc::Channel> channel, grpc::ClientContext* context,
      grpc::ClientBidiReactor<LeaseKeepAliveRequest, LeaseKeepAliveResponse>*
          reactor) override {
    stub_ = Lease::NewStub(channel);
    stub_->async()->LeaseKeepAlive(context, reactor);
  }
  void Ping(LeaseKeepAliveRequest* request) override {
    request->set_id(lease_id_);
  }
  Answer Classify(const LeaseKeepAliveResponse& reply,
                  std::string* error) override {
    if (reply.id() == lease_id_ && reply.ttl() > 0) return Answer::kAck;
    *error = absl::StrCat("lease ", lease_id_, " not renewed (ttl ",
                          reply.ttl(), ")");
    return Answer::kError;
  }

 private:
  std::unique_ptr<Lease::Stub> stub_;
  const int64_t lease_id_;
};

class EtcdTarget : public Target {
 public:
  std::unique_ptr<UnaryOp> NewRegisterOp(std::shared_ptr<grpc::Channel> channel,
                                         int client) override {
    return std::make_unique<LeaseGrantOp>(channel);
  }

  // Reads the key's mod_revision, creating the key when it is absent.
  absl::StatusOr<std::unique_ptr<UnaryOp>> NewCasOp(
      std::shared_ptr<grpc::Channel> channel, int client, int key) override {
    const std::string name = absl::StrCat("hubbench/cas/", key);
    std::unique_ptr<KV::Stub> stub = KV::NewStub(channel);
    etcdserverpb::TxnRequest request;
    etcdserverpb::Compare* absent = request.add_compare();
    absent->set_key(name);
    absent->set_target(etcdserverpb::Compare::CREATE);
    absent->set_result(etcdserverpb::Compare::EQUAL);
    absent->set_create_revision(0);
    etcdserverpb::PutRequest* put =
        request.add_success()->mutable_request_put();
    put->set_key(name);
    put->set_value("0");
    request.add_failure()->mutable_request_range()->set_key(name);
    etcdserverpb::TxnResponse reply;
    std::unique_ptr<grpc::ClientContext> context = NewCallContext();
    grpc::Status status = stub->Txn(context.get(), request, &reply);
    if (!status.ok()) return ToAbsl(status);
    int64_t mod_revision = reply.header().revision();
    if (!reply.succeeded()) {
      if (reply.responses_size() != 1 ||
          reply.responses(0).response_range().kvs_size() != 1) {
        return absl::InternalError("etcd: cannot read " + name);
      }
      mod_revision = reply.responses(0).response_range().kvs(0).mod_revision();
    }
    return std::make_unique<TxnCasOp>(channel, name, mod_revision);
  }

  // A lease of the client's own (the lock's session), granted here.
  absl::StatusOr<std::unique_ptr<UnaryOp>> NewLockOp(
      std::shared_ptr<grpc::Channel> channel, int client) override {
    std::unique_ptr<Lease::Stub> lease = Lease::NewStub(channel);
    etcdserverpb::LeaseGrantRequest request;
    request.set_ttl(kStreamTtlSeconds);
    etcdserverpb::LeaseGrantResponse reply;
    std::unique_ptr<grpc::ClientContext> context = NewCallContext();
    grpc::Status status = lease->LeaseGrant(context.get(), request, &reply);
    if (!status.ok()) return ToAbsl(status);
    if (!reply.error().empty()) return absl::InternalError(reply.error());
    return std::make_unique<LockUnlockOp>(
        channel, absl::StrCat("hubbench/lock/", client), reply.id());
  }

  absl::StatusOr<std::unique_ptr<PingStreamBase>> NewStream(
      std::shared_ptr<grpc::Channel> setup, int index, StreamBoard* board,
      bool hold, absl::Duration max_life) override {
    std::unique_ptr<Lease::Stub> stub = Lease::NewStub(setup);
    etcdserverpb::LeaseGrantRequest request;
    request.set_ttl(kStreamTtlSeconds);
    etcdserverpb::LeaseGrantResponse reply;
    std::unique_ptr<grpc::ClientContext> context = NewCallContext();
    grpc::Status status = stub->LeaseGrant(context.get(), request, &reply);
    if (!status.ok()) return ToAbsl(status);
    if (!reply.error().empty()) return absl::UnknownError(reply.error());
    return std::make_unique<
        PingStream<LeaseKeepAliveRequest, LeaseKeepAliveResponse>>(
        std::make_unique<KeepAliveProtocol>(reply.id()), board, hold, max_life);
  }
};

}  // namespace

std::unique_ptr<Target> NewEtcdTarget() {
  return std::make_unique<EtcdTarget>();
}

}  // namespace hubbench
