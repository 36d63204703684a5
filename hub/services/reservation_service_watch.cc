// ReservationService.WatchReservations: one write reactor per stream over a
// ReservationFeed subscription (registry/reservation_feed.h), which hands
// over the snapshot and then every later change, in commit order, with
// nothing missed or repeated between the two. Changes wait in a queue
// while a write is in flight; a receiver with more than kMaxQueued waiting
// has fallen behind and its stream ends (UNAVAILABLE /
// RESERVATION_CHANGES_MISSED: watch again), so a slow receiver never costs
// an unbounded queue and never blocks the feed.
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/reservation_service.h"
#include "status/status.h"

namespace hub {

using hub::v1::WatchReservationsResponse;

namespace {

// Changes a watcher may have waiting.
constexpr size_t kMaxQueued = 4096;
// See WatchReactor::OnCancel.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(100);

hub::v1::ReservationChangeKind KindOf(storage::ReservationChangeKind kind) {
  using K = storage::ReservationChangeKind;
  switch (kind) {
    case K::kGranted:
      return hub::v1::RESERVATION_CHANGE_KIND_GRANTED;
    case K::kRenewed:
      return hub::v1::RESERVATION_CHANGE_KIND_RENEWED;
    case K::kNarrowed:
      return hub::v1::RESERVATION_CHANGE_KIND_NARROWED;
    case K::kReleased:
      return hub::v1::RESERVATION_CHANGE_KIND_RELEASED;
    case K::kForced:
      return hub::v1::RESERVATION_CHANGE_KIND_FORCE_RELEASED;
    case K::kExpired:
      return hub::v1::RESERVATION_CHANGE_KIND_EXPIRED;
    case K::kHolderGone:
      return hub::v1::RESERVATION_CHANGE_KIND_HOLDER_GONE;
    case K::kWaiting:
      return hub::v1::RESERVATION_CHANGE_KIND_WAITING;
    case K::kWaitEnded:
      return hub::v1::RESERVATION_CHANGE_KIND_WAIT_ENDED;
  }
  return hub::v1::RESERVATION_CHANGE_KIND_UNSPECIFIED;
}

absl::Status ShuttingDown() {
  return UnavailableError("HUB_SHUTTING_DOWN", "the hub is shutting down");
}

}  // namespace

hub::v1::ReservationChange ReservationChangeToProto(
    const storage::ReservationChange& change) {
  hub::v1::ReservationChange c;
  c.set_kind(KindOf(change.kind));
  *c.mutable_reservation() = ReservationToProto(change.reservation);
  c.set_seq(change.seq);
  *c.mutable_changed_at() =
      ToProtoTimestamp(absl::FromUnixMillis(change.written_at_ms));
  return c;
}

class ReservationServiceImpl::WatchReactor final
    : public grpc::ServerWriteReactor<WatchReservationsResponse> {
 public:
  WatchReactor(ReservationServiceImpl* service,
               grpc::CallbackServerContext* context)
      : service_(service), deadline_(absl::FromChrono(context->deadline())) {}

  // Subscribes; the snapshot (or, resuming after `after_seq`, the resume
  // item) is queued before any change. Called once, from the handler;
  // nothing is written or finished before it returns.
  void Start(const ReservationWatchFilter& filter,
             std::optional<int64_t> after_seq) {
    absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>> sub =
        absl::FailedPreconditionError("not resumed");
    if (after_seq.has_value()) {
      sub = service_->feed_->Resume(
          filter, *after_seq,
          [this, after_seq](int64_t oldest) {
            OnResume(*after_seq, true, "", oldest);
          },
          [this](const storage::ReservationChange& c) { OnChange(c); },
          [this](const absl::Status& status) { End(status); });
      if (!sub.ok() && ReasonOf(sub.status()) == "RESERVATION_CURSOR_EXPIRED") {
        // Never a silent gap: say so, then a fresh snapshot.
        int64_t oldest = 0;
        const std::map<std::string, std::string> meta =
            MetadataOf(sub.status());
        if (auto it = meta.find("oldest_seq"); it != meta.end()) {
          (void)absl::SimpleAtoi(it->second, &oldest);
        }
        OnResume(*after_seq, false, "RESERVATION_CURSOR_EXPIRED", oldest);
        after_seq.reset();
      }
    }
    if (!after_seq.has_value()) {
      sub = service_->feed_->Subscribe(
          filter,
          [this](const storage::ReservationSnapshot& s) { OnSnapshot(s); },
          [this](const storage::ReservationChange& c) { OnChange(c); },
          [this](const absl::Status& status) { End(status); });
    }
    absl::MutexLock lock(&mu_);
    if (!sub.ok()) {
      FinishLocked(sub.status());
    } else {
      subscription_ = std::move(*sub);
    }
    starting_ = false;
    PumpLocked();
  }

  void HoldTicket(std::unique_ptr<StreamTicket> ticket) {
    ticket_ = std::move(ticket);
  }

  // Ends the stream (shutdown, a refused request, the feed's end).
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  // Before Start: a refused request finishes at once.
  void Refuse(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    starting_ = false;
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) FinishLocked(absl::CancelledError("watch stream broken"));
    PumpLocked();
  }

  // A client whose deadline passed cancels the stream itself, and that
  // cancel can arrive just before the hub's copy of the deadline runs out:
  // a cancel within kDeadlineSlack of the deadline counts as the deadline.
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
    if (subscription_ != nullptr) subscription_->Cancel();
    delete this;
  }

 private:
  void OnResume(int64_t after_seq, bool resumed, const std::string& reason,
                int64_t oldest) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    WatchReservationsResponse item;
    hub::v1::ReservationResume* r = item.mutable_resume();
    r->set_after_seq(after_seq);
    r->set_resumed(resumed);
    r->set_reason(reason);
    r->set_oldest_seq(oldest);
    outbox_.push_back(std::move(item));
    PumpLocked();
  }

  void OnSnapshot(const storage::ReservationSnapshot& snapshot) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    const auto now = ToProtoTimestamp(absl::Now());
    for (const storage::ReservationRecord& r : snapshot.reservations) {
      WatchReservationsResponse item;
      hub::v1::ReservationChange* c = item.mutable_change();
      c->set_kind(hub::v1::RESERVATION_CHANGE_KIND_SNAPSHOT);
      *c->mutable_reservation() = ReservationToProto(r);
      *c->mutable_changed_at() = now;
      outbox_.push_back(std::move(item));
    }
    // Waiters as a `waiting` change carries them, in queue order.
    for (const storage::ReservationWaiter& w : snapshot.waiters) {
      WatchReservationsResponse item;
      hub::v1::ReservationChange* c = item.mutable_change();
      c->set_kind(hub::v1::RESERVATION_CHANGE_KIND_WAITING);
      *c->mutable_reservation() =
          ReservationToProto(storage::WaiterAsRecord(w));
      *c->mutable_changed_at() = now;
      outbox_.push_back(std::move(item));
    }
    WatchReservationsResponse end;
    end.mutable_snapshot_end()->set_reservation_count(
        static_cast<int64_t>(snapshot.reservations.size()));
    end.mutable_snapshot_end()->set_waiter_count(
        static_cast<int64_t>(snapshot.waiters.size()));
    end.mutable_snapshot_end()->set_seq(snapshot.head);
    outbox_.push_back(std::move(end));
    PumpLocked();
  }

  void OnChange(const storage::ReservationChange& change) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (outbox_.size() >= kMaxQueued) {
      FinishLocked(ReasonError(absl::StatusCode::kUnavailable,
                               "RESERVATION_CHANGES_MISSED",
                               "the watcher fell too far behind; watch again"));
      return;
    }
    WatchReservationsResponse item;
    *item.mutable_change() = ReservationChangeToProto(change);
    outbox_.push_back(std::move(item));
    PumpLocked();
  }

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (starting_ || writing_ || finished_) return;
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
    PumpLocked();
  }

  ReservationServiceImpl* const service_;
  const absl::Time deadline_;
  // Set once in Start (under mu_), read in OnDone after every reaction.
  std::unique_ptr<ReservationFeed::Subscription> subscription_;
  std::unique_ptr<StreamTicket> ticket_;

  absl::Mutex mu_;
  bool starting_ ABSL_GUARDED_BY(mu_) = true;
  std::deque<WatchReservationsResponse> outbox_ ABSL_GUARDED_BY(mu_);
  WatchReservationsResponse current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

ReservationServiceImpl::~ReservationServiceImpl() = default;

void ReservationServiceImpl::Untrack(WatchReactor* reactor) {
  absl::MutexLock lock(&mu_);
  watches_.erase(reactor);
}

void ReservationServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  // A reactor's OnDone waits on mu_ (Untrack) before it deletes itself.
  for (WatchReactor* reactor : watches_) reactor->End(ShuttingDown());
}

grpc::ServerWriteReactor<WatchReservationsResponse>*
ReservationServiceImpl::WatchReservations(
    grpc::CallbackServerContext* context,
    const hub::v1::WatchReservationsRequest* request) {
  auto* reactor = new WatchReactor(this, context);
  // Watches are quiet by nature: no idle timeout, but a stream slot.
  absl::StatusOr<AdmittedStream> admitted = admission_->AdmitStream(
      *context, request->GetDescriptor(), request, nullptr);
  absl::Status status = admitted.status();
  if (admitted.ok() && admitted->ticket != nullptr) {
    reactor->HoldTicket(std::move(admitted->ticket));
  }
  if (status.ok()) {
    status = ReservationBook::ValidateWatch(request->project_id(),
                                            request->agent_id());
  }
  if (status.ok() && feed_ == nullptr) {
    status = UnavailableError("HUB_SHUTTING_DOWN",
                              "this hub has no reservation feed");
  }
  {
    absl::MutexLock lock(&mu_);
    if (status.ok() && shutting_down_) status = ShuttingDown();
    if (status.ok()) watches_.insert(reactor);
  }
  if (!status.ok()) {
    reactor->Refuse(status);
    return reactor;
  }
  ReservationWatchFilter filter;
  filter.project_id = request->project_id();
  if (!request->agent_id().empty()) filter.agent_id = request->agent_id();
  reactor->Start(filter, request->has_after_seq()
                             ? std::optional<int64_t>(request->after_seq())
                             : std::nullopt);
  return reactor;
}

}  // namespace hub
