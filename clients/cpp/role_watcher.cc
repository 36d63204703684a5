#include "clients/cpp/role_watcher.h"

#include <memory>
#include <utility>

#include "clients/cpp/hub_error.h"

namespace hub::client {
namespace {

bool IsPermanent(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kFailedPrecondition:
      return true;
    default:
      return false;
  }
}

}  // namespace

RoleWatcher::RoleWatcher(const HubClient* client, RoleWatcherOptions options,
                         RoleWatcherCallbacks callbacks)
    : client_(client),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

RoleWatcher::~RoleWatcher() { Stop(); }

absl::Status RoleWatcher::Start() {
  if (client_ == nullptr) {
    return absl::InvalidArgumentError("RoleWatcher needs a HubClient");
  }
  absl::Status policy = ValidateBackoffPolicy(options_.backoff);
  if (!policy.ok()) return policy;
  absl::MutexLock lock(&mu_);
  if (started_) {
    return absl::FailedPreconditionError("the watcher was already started");
  }
  started_ = true;
  worker_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void RoleWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) return;
  worker_.join();
}

int RoleWatcher::live_streams() const {
  absl::MutexLock lock(&mu_);
  return live_streams_;
}

void RoleWatcher::Run() {
  Backoff backoff(options_.backoff);
  bool resumed = false;
  while (true) {
    absl::Status ended = WatchOnce(backoff, resumed);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      resumed = resumed || live_streams_ > 0;
    }
    const bool permanent = IsPermanent(ended);
    if (callbacks_.on_disconnect) callbacks_.on_disconnect(ended, permanent);
    if (permanent) return;
    if (!client_->WaitForConnected(absl::ZeroDuration())) {
      // The connection is gone: wait until gRPC has reconnected (this thread
      // drives it, see HubClient::WaitForConnected) and watch again at once.
      // Slices, so that Stop() is not held up for long.
      while (!client_->WaitForConnected(absl::Milliseconds(200))) {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      continue;
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff.Next());
    if (stopping_) return;
  }
}

absl::Status RoleWatcher::WatchOnce(Backoff& backoff, bool resumed) {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    context_ = &context;
  }
  std::unique_ptr<grpc::ClientReader<hub::v1::WatchRolesResponse>> stream =
      client_->WatchRoles(&context, options_.filter);
  bool in_snapshot = true;
  hub::v1::WatchRolesResponse item;
  while (stream->Read(&item)) {
    if (item.has_snapshot_end()) {
      in_snapshot = false;
      backoff.Reset();
      {
        absl::MutexLock lock(&mu_);
        ++live_streams_;
      }
      if (callbacks_.on_snapshot_end) {
        callbacks_.on_snapshot_end(item.snapshot_end(), resumed);
      }
      continue;
    }
    if (!item.has_change()) continue;
    const hub::v1::RoleChange& change = item.change();
    const std::string& wire = change.role().role_key_wire();
    auto seen = versions_.find(wire);
    if (in_snapshot && resumed && seen != versions_.end() &&
        seen->second == change.role().version()) {
      continue;  // unchanged while disconnected: already delivered
    }
    if (change.kind() == hub::v1::ROLE_CHANGE_KIND_REMOVED) {
      versions_.erase(wire);
    } else {
      versions_[wire] = change.role().version();
    }
    if (callbacks_.on_change) callbacks_.on_change(change);
  }
  absl::Status ended = FromGrpcStatus(stream->Finish());
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  if (ended.ok()) return absl::UnavailableError("the hub ended the watch");
  return ended;
}

}  // namespace hub::client
