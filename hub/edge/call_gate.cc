#include "hub/edge/call_gate.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "status/status.h"

namespace hub {
namespace {

// Buckets of principals that went quiet are dropped once there are this many
// (a full bucket carries no state worth keeping).
constexpr size_t kMaxIdleBuckets = 4096;

int64_t NowNanos() { return absl::GetCurrentTimeNanos(); }

}  // namespace

std::string PeerPrincipalOf(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon + 1 == peer.size()) return peer;
  const absl::string_view port = absl::string_view(peer).substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) return peer;
  return peer.substr(0, colon);
}

std::string PeerPrincipal(const grpc::CallbackServerContext& context) {
  return PeerPrincipalOf(context.peer());
}

StreamTicket::StreamTicket(CallGate* gate, std::string principal,
                           std::function<void(const absl::Status&)> on_idle)
    : gate_(gate),
      principal_(std::move(principal)),
      on_idle_(std::move(on_idle)),
      last_active_ns_(NowNanos()) {}

StreamTicket::~StreamTicket() { gate_->Release(this); }

void StreamTicket::Touch() {
  last_active_ns_.store(NowNanos(), std::memory_order_relaxed);
}

CallGate::CallGate(CallLimits limits, PrincipalFn principal)
    : limits_(limits), principal_(std::move(principal)) {
  if (limits_.idle_stream_timeout > absl::ZeroDuration()) {
    const absl::Duration period =
        std::clamp(limits_.idle_stream_timeout / 4, absl::Milliseconds(10),
                   absl::Seconds(1));
    sweeper_ = std::thread([this, period] {
      pthread_setname_np(pthread_self(), "hub-gate-sweep");  // top -H, perf
      while (!stop_.WaitForNotificationWithTimeout(period)) SweepIdle();
    });
  }
}

CallGate::~CallGate() {
  stop_.Notify();
  if (sweeper_.joinable()) sweeper_.join();
}

absl::Status CallGate::CheckSize(
    const google::protobuf::Message& request) const {
  const size_t size = request.ByteSizeLong();
  if (limits_.max_request_bytes > 0 &&
      size > static_cast<size_t>(limits_.max_request_bytes)) {
    return LimitExceededError(
        "max_request_bytes", limits_.max_request_bytes,
        absl::StrCat("the request has ", size, " bytes, more than ",
                     limits_.max_request_bytes));
  }
  return absl::OkStatus();
}

absl::Status CallGate::TakeToken(const std::string& principal) {
  if (limits_.requests_per_second <= 0) return absl::OkStatus();
  const absl::Time now = absl::Now();
  const double rate = limits_.requests_per_second;
  const double burst =
      static_cast<double>(std::max<int64_t>(1, limits_.request_burst));
  auto refill = [&](Bucket& b) {
    b.tokens = std::min(
        burst, b.tokens + absl::ToDoubleSeconds(now - b.refilled) * rate);
    b.refilled = now;
  };
  if (!buckets_.contains(principal) && buckets_.size() >= kMaxIdleBuckets) {
    // Forget principals whose bucket has refilled: same as never seen.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second);
      if (it->second.tokens >= burst) {
        buckets_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  auto [it, inserted] = buckets_.try_emplace(principal, Bucket{burst, now});
  Bucket& b = it->second;
  refill(b);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::OkStatus();
  }
  const int64_t retry_after_ms =
      static_cast<int64_t>(std::ceil((1 - b.tokens) / rate * 1000));
  absl::Status s = ResourceExhaustedError(
      "RATE_LIMITED",
      absl::StrCat("more than ", limits_.requests_per_second,
                   " requests per second (burst ", limits_.request_burst,
                   ") from ", principal));
  s = WithMetadata(std::move(s), "limit", "requests_per_second");
  s = WithMetadata(std::move(s), "limit_value",
                   absl::StrCat(limits_.requests_per_second));
  return WithMetadata(std::move(s), "retry_after_ms",
                      absl::StrCat(std::max<int64_t>(1, retry_after_ms)));
}

absl::Status CallGate::AdmitCall(const grpc::CallbackServerContext& context,
                                 const google::protobuf::Message& request) {
  if (absl::Status s = CheckSize(request); !s.ok()) return s;
  // Status still answers: it is how an operator sees why the rest does not.
  if (serving_ &&
      request.GetDescriptor()->full_name() != "hub.v1.GetStatusRequest") {
    if (absl::Status s = serving_(); !s.ok()) return s;
  }
  const std::string principal = principal_(context);
  absl::MutexLock lock(&mu_);
  return TakeToken(principal);
}

absl::StatusOr<std::unique_ptr<StreamTicket>> CallGate::AdmitStream(
    const grpc::CallbackServerContext& context,
    const google::protobuf::Message* request,
    std::function<void(const absl::Status&)> on_idle) {
  if (request != nullptr) {
    if (absl::Status s = CheckSize(*request); !s.ok()) return s;
  }
  if (serving_) {
    if (absl::Status s = serving_(); !s.ok()) return s;
  }
  std::string principal = principal_(context);
  const bool watch_idle =
      on_idle && limits_.idle_stream_timeout > absl::ZeroDuration();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = TakeToken(principal); !s.ok()) return s;
  int64_t& open = streams_[principal];
  if (limits_.max_streams_per_principal > 0 &&
      open >= limits_.max_streams_per_principal) {
    if (open == 0) streams_.erase(principal);
    return LimitExceededError(
        "max_streams_per_principal", limits_.max_streams_per_principal,
        absl::StrCat(principal, " already has ",
                     limits_.max_streams_per_principal, " open streams"));
  }
  ++open;
  std::unique_ptr<StreamTicket> ticket(new StreamTicket(
      this, std::move(principal), watch_idle ? std::move(on_idle) : nullptr));
  if (watch_idle) idle_watched_.insert(ticket.get());
  return ticket;
}

int64_t CallGate::OpenStreams(const std::string& principal) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(principal);
  return it == streams_.end() ? 0 : it->second;
}

void CallGate::Release(StreamTicket* ticket) {
  absl::MutexLock lock(&mu_);
  idle_watched_.erase(ticket);
  auto it = streams_.find(ticket->principal_);
  if (it != streams_.end() && --it->second <= 0) streams_.erase(it);
}

void CallGate::SweepIdle() {
  const int64_t deadline =
      NowNanos() - absl::ToInt64Nanoseconds(limits_.idle_stream_timeout);
  // Under mu_: a ticket cannot be destroyed (its stream freed) while its
  // callback runs. The callbacks only end their stream; they never call
  // back into the gate.
  absl::MutexLock lock(&mu_);
  for (StreamTicket* ticket : idle_watched_) {
    if (ticket->idle_fired_ ||
        ticket->last_active_ns_.load(std::memory_order_relaxed) > deadline) {
      continue;
    }
    ticket->idle_fired_ = true;
    ticket->on_idle_(LimitExceededError(
        "idle_stream_timeout_ms",
        absl::ToInt64Milliseconds(limits_.idle_stream_timeout),
        absl::StrCat("no frame from the client for ",
                     absl::FormatDuration(limits_.idle_stream_timeout))));
  }
}

}  // namespace hub
