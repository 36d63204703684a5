#include "storage/pg/pg_signals.h"

#include <utility>
#include <vector>

#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_listener.h"
#include "storage/pg/pg_notifier.h"

namespace hub::storage::pg {
namespace {

class PgSignalListener final : public SignalListener {
 public:
  explicit PgSignalListener(ListenerOptions options)
      : listener_(std::move(options)) {}
  void Stop() override { listener_.Stop(); }

 private:
  Listener listener_;
};

class PgSignalSender final : public SignalSender {
 public:
  explicit PgSignalSender(NotifierOptions options)
      : notifier_(std::move(options)) {}
  void Send(const std::string& channel, const std::string& payload) override {
    notifier_.Notify(channel, payload);
  }
  void Stop() override { notifier_.Stop(); }

 private:
  Notifier notifier_;
};

class PgSignalLink final : public SignalLink {
 public:
  PgSignalLink(std::string conninfo, std::string name)
      : conninfo_(std::move(conninfo)), name_(std::move(name)) {}

  absl::Status Send(const std::string& channel,
                    const std::vector<std::string>& payloads) override {
    if (conn_ != nullptr && !conn_->Healthy()) conn_.reset();
    if (conn_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Connection>> opened =
          OpenHintConnection(conninfo_, name_);
      if (!opened.ok()) return opened.status();
      conn_ = std::move(*opened);
    }
    for (const std::string& payload : payloads) {
      absl::StatusOr<Result> r =
          conn_->Run("SELECT pg_notify($1, $2)", {channel, payload});
      if (!r.ok()) {
        if (!conn_->Healthy()) conn_.reset();
        return r.status();
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::string conninfo_;
  const std::string name_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace

std::unique_ptr<SignalListener> PgSignals::Listen(SignalListenOptions options) {
  ListenerOptions o;
  o.conninfo = conninfo_;
  o.channels = std::move(options.channels);
  o.on_notify = [on_signal =
                     std::move(options.on_signal)](const Notification& n) {
    on_signal(Signal{n.channel, n.payload});
  };
  o.on_resync = std::move(options.on_resync);
  o.on_error = std::move(options.on_error);
  return std::make_unique<PgSignalListener>(std::move(o));
}

std::unique_ptr<SignalSender> PgSignals::NewSender(SignalSendOptions options) {
  NotifierOptions o;
  o.conninfo = conninfo_;
  o.on_error = std::move(options.on_error);
  o.min_interval = options.min_interval;
  return std::make_unique<PgSignalSender>(std::move(o));
}

std::unique_ptr<SignalLink> PgSignals::NewLink(std::string name) {
  return std::make_unique<PgSignalLink>(conninfo_, std::move(name));
}

}  // namespace hub::storage::pg
