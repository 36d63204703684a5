// RoleService.WatchRoles: one write reactor per stream.
//
// The reactor registers with the registry before it reads the snapshot, so
// no change is lost between the two; changes that arrive before the
// snapshot is queued wait in `early_`, and any version the receiver already
// has (snapshot or sent) is dropped. After the snapshot, changes wait in a
// queue while a write is in flight, every version in order (the registry
// may hand over a burst at once: a page of another hub's changes). A
// receiver with more than kMaxQueuedChanges waiting has fallen behind: from
// then on a change of a role that already waits replaces the newest waiting
// one (coalescing, in its place), so a slow receiver costs at most that
// many changes plus one per role, never an unbounded queue, and never
// blocks a writer.
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hub/edge/call_gate.h"
#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "hub/services/role_service.h"
#include "status/status.h"

namespace hub {

using hub::v1::WatchRolesResponse;

namespace {

// The registry filter of a request (validated as role_service.proto says).
absl::StatusOr<RoleWatchFilter> WatchFilterOf(
    const hub::v1::WatchRolesRequest& request) {
  RoleWatchFilter f;
  const bool has_key =
      request.has_role_key() || !request.role_key_wire().empty();
  if (has_key && (!request.project_id().empty() ||
                  request.kind() != hub::v1::ROLE_KIND_UNSPECIFIED)) {
    return WithMetadata(
        InvalidArgumentError("REQUEST_INVALID",
                             "a role key filter excludes project_id and kind"),
        "field", "project_id");
  }
  if (has_key) {
    absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ToRoleKeyRef(
        request.has_role_key(), request.role_key(), request.role_key_wire()));
    if (!key.ok()) return key.status();
    f.wire = key->wire;
  }
  if (!request.project_id().empty()) f.project_id = request.project_id();
  absl::StatusOr<std::optional<RoleKind>> kind =
      KindFilter(request.kind(), "kind");
  if (!kind.ok()) return kind.status();
  f.kind = *kind;
  return f;
}

absl::Status ShuttingDown() {
  return UnavailableError("HUB_SHUTTING_DOWN", "the hub is shutting down");
}

}  // namespace

// See WatchReactor::OnCancel.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(100);
// Changes a watcher may have waiting before they coalesce per role.
constexpr size_t kMaxQueuedChanges = 1024;

class RoleServiceImpl::WatchReactor final
    : public grpc::ServerWriteReactor<WatchRolesResponse> {
 public:
  WatchReactor(RoleServiceImpl* service, grpc::CallbackServerContext* context)
      : service_(service), deadline_(absl::FromChrono(context->deadline())) {}

  // Registers the watch and queues the snapshot. Called once, from the
  // handler, before any other method.
  void Start(const RoleWatchFilter& filter) {
    absl::StatusOr<RoleWatchStart> start = service_->registry_->Watch(
        filter, [this](const RoleEvent& event) { OnEvent(event); });
    absl::MutexLock lock(&mu_);
    if (!start.ok()) {
      FinishLocked(start.status());
      return;
    }
    watch_ = std::move(start->watch);
    if (finishing_) return;  // ended (shutdown) while registering
    for (const RoleRecord& row : start->snapshot) {
      RoleEvent event;
      event.kind = RoleChangeKind::kSnapshot;
      event.role = row;
      event.changed_at_ms = start->read_at_ms;
      known_version_[row.role_key_wire] = row.version;
      QueueChangeLocked(event);
    }
    WatchRolesResponse end;
    end.mutable_snapshot_end()->set_role_count(
        static_cast<int64_t>(start->snapshot.size()));
    *end.mutable_snapshot_end()->mutable_server_time() =
        ToProtoTimestamp(absl::FromUnixMillis(start->read_at_ms));
    outbox_.push_back(std::move(end));
    snapshot_done_ = true;
    for (const RoleEvent& event : early_) AcceptLocked(event);
    early_.clear();
    PumpLocked();
  }

  // Keeps the stream's slot until the reactor is gone.
  void HoldTicket(std::unique_ptr<StreamTicket> ticket) {
    ticket_ = std::move(ticket);
  }

  // Ends the stream (hub shutdown).
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) FinishLocked(absl::CancelledError("watch stream broken"));
    PumpLocked();
  }

  // gRPC cancels the call when the client cancels it and when its deadline
  // passes; the second ends DEADLINE_EXCEEDED, which is what the client
  // reports too. A client whose deadline passed cancels the stream itself,
  // and that cancel can arrive just before the hub's copy of the deadline
  // (computed from the grpc-timeout header on arrival) runs out: a cancel
  // within kDeadlineSlack of the deadline counts as the deadline.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (absl::Now() >= deadline_ - kDeadlineSlack) {
      FinishLocked(absl::DeadlineExceededError("the watch's deadline passed"));
      return;
    }
    FinishLocked(absl::CancelledError("watch cancelled"));
  }

  void OnDone() override {
    service_->Untrack(this);
    // Waits for a callback in progress; none runs afterwards.
    if (watch_ != nullptr) watch_->Cancel();
    delete this;
  }

 private:
  // Called by the registry (its dispatcher thread).
  void OnEvent(const RoleEvent& event) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (!snapshot_done_) {
      early_.push_back(event);
      return;
    }
    AcceptLocked(event);
    PumpLocked();
  }

  void AcceptLocked(const RoleEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string& wire = event.role.role_key_wire;
    // A removal (the row's last version) ends the role's history here.
    constexpr int64_t kGone = std::numeric_limits<int64_t>::max();
    const bool removed = event.kind == RoleChangeKind::kRemoved;
    auto [known, inserted] =
        known_version_.try_emplace(wire, removed ? kGone : event.role.version);
    if (!inserted) {
      if (known->second == kGone) return;  // already removed
      if (removed) {
        known->second = kGone;
      } else {
        if (known->second >= event.role.version) return;  // already have it
        known->second = event.role.version;
      }
    }
    auto newest = newest_queued_.find(wire);
    if (newest != newest_queued_.end() && queued_.size() >= kMaxQueuedChanges) {
      // Fallen behind: coalesce into the role's newest waiting change,
      // keeping its place and kind (a removal replaces the kind).
      RoleEvent& slot = queued_[newest->second - queued_base_];
      if (removed) slot.kind = RoleChangeKind::kRemoved;
      slot.role = event.role;
      slot.changed_at_ms = event.changed_at_ms;
      return;
    }
    newest_queued_[wire] = queued_base_ + queued_.size();
    queued_.push_back(event);
  }

  void QueueChangeLocked(const RoleEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string& wire = event.role.role_key_wire;
    std::optional<RoleState> previous;
    auto last = sent_state_.find(wire);
    if ((event.kind == RoleChangeKind::kUpdated ||
         event.kind == RoleChangeKind::kRemoved) &&
        last != sent_state_.end()) {
      previous = last->second;
    }
    WatchRolesResponse response;
    *response.mutable_change() = ToRoleChangeProto(event, previous);
    sent_state_[wire] = event.role.state;
    outbox_.push_back(std::move(response));
  }

  // Issues the next write (snapshot items first, then pending changes in
  // arrival order), or Finish once everything is written.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!finishing_ && outbox_.empty() && !queued_.empty()) {
      auto newest = newest_queued_.find(queued_.front().role.role_key_wire);
      if (newest != newest_queued_.end() && newest->second == queued_base_) {
        newest_queued_.erase(newest);
      }
      QueueChangeLocked(queued_.front());
      queued_.pop_front();
      ++queued_base_;
    }
    if (!finishing_ && !outbox_.empty()) {
      current_ = std::move(outbox_.front());
      outbox_.pop_front();
      writing_ = true;
      StartWrite(&current_);
      return;
    }
    if (finishing_) {
      finished_ = true;
      Finish(ToGrpcStatus(final_status_));
    }
  }

  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    final_status_ = status;
    outbox_.clear();
    queued_.clear();
    newest_queued_.clear();
    early_.clear();
    PumpLocked();
  }

  RoleServiceImpl* const service_;
  // The call's deadline (InfiniteFuture-like when the client set none).
  const absl::Time deadline_;
  // Set once in Start (under mu_), read in OnDone after every reaction.
  std::unique_ptr<RoleWatch> watch_;

  absl::Mutex mu_;
  bool snapshot_done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<RoleEvent> early_ ABSL_GUARDED_BY(mu_);
  // Per role: the newest version accepted (sent or pending).
  absl::flat_hash_map<std::string, int64_t> known_version_ ABSL_GUARDED_BY(mu_);
  // Per role: the state last sent (for previous_state).
  absl::flat_hash_map<std::string, RoleState> sent_state_ ABSL_GUARDED_BY(mu_);
  // Accepted changes not yet written, oldest first; queued_base_ is the
  // number of changes ever taken from its front, so a change's position is
  // its index + queued_base_. Per role: the position of its newest change
  // in the queue.
  std::deque<RoleEvent> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_base_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint64_t> newest_queued_
      ABSL_GUARDED_BY(mu_);
  std::deque<WatchRolesResponse> outbox_ ABSL_GUARDED_BY(mu_);
  WatchRolesResponse current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // Set once by the handler before the stream runs.
  std::unique_ptr<StreamTicket> ticket_;
};

RoleServiceImpl::~RoleServiceImpl() = default;

void RoleServiceImpl::Untrack(WatchReactor* reactor) {
  absl::MutexLock lock(&mu_);
  watches_.erase(reactor);
}

int RoleServiceImpl::ActiveWatches() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watches_.size());
}

void RoleServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  // A reactor's OnDone waits on mu_ (Untrack) before it deletes itself, so
  // every reactor in the set stays alive while it is ended here.
  for (WatchReactor* reactor : watches_) reactor->End(ShuttingDown());
}

grpc::ServerWriteReactor<WatchRolesResponse>* RoleServiceImpl::WatchRoles(
    grpc::CallbackServerContext* context,
    const hub::v1::WatchRolesRequest* request) {
  auto* reactor = new WatchReactor(this, context);
  // A project (or key) outside the token's projects is refused; no filter
  // watches only the token's projects. Watches are quiet by nature: no idle
  // timeout, but a stream slot.
  absl::StatusOr<AdmittedStream> admitted = admission_->AdmitStream(
      *context, request->GetDescriptor(), request, nullptr);
  absl::StatusOr<RoleWatchFilter> filter =
      admitted.ok() ? WatchFilterOf(*request)
                    : absl::StatusOr<RoleWatchFilter>(admitted.status());
  if (admitted.ok()) {
    if (admitted->ticket != nullptr) {
      reactor->HoldTicket(std::move(admitted->ticket));
    }
    if (filter.ok()) filter->scope = ScopeOf(admitted->principal);
  }
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) filter = ShuttingDown();
    if (filter.ok()) watches_.insert(reactor);
  }
  if (!filter.ok()) {
    reactor->End(filter.status());
    return reactor;
  }
  reactor->Start(*filter);
  return reactor;
}

}  // namespace hub
