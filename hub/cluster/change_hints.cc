#include "hub/cluster/change_hints.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "hub/observability/log.h"
#include "status/status.h"

namespace hub {
namespace {

void LogFailure(const std::string& event, const absl::Status& status) {
  log::Warn(event,
            {{"reason", ReasonOf(status)}, {"message", status.message()}});
}

storage::SignalSendOptions SenderFor(const ChangeHintsOptions& options) {
  storage::SignalSendOptions o;
  // Under load, one hint per 5 ms at most (the others also poll).
  o.min_interval = absl::Milliseconds(5);
  const std::string event = absl::StrCat(options.what, "_hint_not_sent");
  o.on_error = [event](const absl::Status& status) {
    LogFailure(event, status);
  };
  return o;
}

}  // namespace

ChangeHints::ChangeHints(ChangeHintsOptions options)
    : options_(std::move(options)),
      sender_(options_.signals->NewSender(SenderFor(options_))) {}

ChangeHints::~ChangeHints() { Stop(); }

void ChangeHints::Start(std::function<void()> wake) {
  storage::SignalListenOptions o;
  o.channels = {options_.channel};
  o.on_signal = [wake,
                 self = options_.hub_instance_id](const storage::Signal& s) {
    if (s.payload != self) wake();
  };
  std::atomic<bool>* lost = &hints_lost_;
  const std::string restored = absl::StrCat(options_.what, "_hints_restored");
  o.on_resync = [wake, lost, restored] {
    wake();
    if (lost->exchange(false)) log::Info(restored, {});
  };
  const std::string lost_event = absl::StrCat(options_.what, "_hints_lost");
  o.on_error = [lost, lost_event](const absl::Status& status) {
    if (!lost->exchange(true)) LogFailure(lost_event, status);
  };
  listener_ = options_.signals->Listen(std::move(o));
}

void ChangeHints::Committed() {
  sender_->Send(options_.channel, options_.hub_instance_id);
}

void ChangeHints::Stop() {
  if (listener_ != nullptr) listener_->Stop();
  sender_->Stop();
}

}  // namespace hub
