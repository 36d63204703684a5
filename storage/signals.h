// Signals: hints between the hubs sharing one database (docs/design/
// multi-hub.md). A hub tells the others that something committed, by
// channel and a short payload, so they re-read it sooner than their poll
// would; the store offers them (Store::signals(): PostgreSQL's NOTIFY and
// LISTEN, storage/pg/pg_signals.h; none where one hub holds the database).
//
// A signal is a hint, never the data: one sent while a listener is not
// connected, or one whose send failed, is lost for good. So every listener
// re-reads by cursor whatever its hints stand for after each (re)connect
// (on_resync) and polls, and a sender that must make good what it could not
// send uses a SignalLink, which answers each send. Sending never happens
// inside a write's transaction.
#ifndef HUB_STORAGE_SIGNALS_H_
#define HUB_STORAGE_SIGNALS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hub::storage {

struct Signal {
  std::string channel;
  std::string payload;
};

struct SignalListenOptions {
  // The channels to listen on (at least one).
  std::vector<std::string> channels;
  // Each signal on one of them, in arrival order, on the listener's thread.
  // Must not block, must not stop the listener.
  std::function<void(const Signal&)> on_signal;
  // After every (re)connect, once listening, before any signal of that
  // connection: re-read what the hints stand for. Must not block for long.
  std::function<void()> on_resync;
  // Each connect that failed and each connection lost, before the listener
  // waits to reconnect. Default: nothing.
  std::function<void(const absl::Status&)> on_error;
};

// Listens until Stop (or destruction); reconnects by itself.
class SignalListener {
 public:
  virtual ~SignalListener() = default;
  // After it returns no callback runs. Idempotent.
  virtual void Stop() = 0;
};

struct SignalSendOptions {
  // A send that failed (its signals dropped), on the sender's thread.
  // Default: nothing.
  std::function<void(const absl::Status&)> on_error;
  // Sends start at least this long apart; what is queued meanwhile
  // coalesces (one signal per channel, the last payload).
  absl::Duration min_interval = absl::ZeroDuration();
};

// Queues signals and sends them from a thread of its own.
class SignalSender {
 public:
  virtual ~SignalSender() = default;
  // Queues `payload` on `channel`; never blocks on the database. Signals
  // queued on one channel while a send is in flight go out as one, with
  // the last payload. After Stop, does nothing.
  virtual void Send(const std::string& channel, const std::string& payload) = 0;
  // Drops what is queued, waits for a send in progress. Idempotent.
  virtual void Stop() = 0;
};

// Sends at once, on the caller's thread, and answers whether the signals
// went out: for a sender that makes good what it could not send. Not
// thread-safe: one caller at a time.
class SignalLink {
 public:
  virtual ~SignalLink() = default;
  // Sends each payload on `channel`, in order; the first failure stops and
  // is returned (its connection is replaced on the next call).
  virtual absl::Status Send(const std::string& channel,
                            const std::vector<std::string>& payloads) = 0;
};

class Signals {
 public:
  virtual ~Signals() = default;
  virtual std::unique_ptr<SignalListener> Listen(
      SignalListenOptions options) = 0;
  virtual std::unique_ptr<SignalSender> NewSender(
      SignalSendOptions options) = 0;
  // `name` is what the database shows as the link's connection.
  virtual std::unique_ptr<SignalLink> NewLink(std::string name) = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SIGNALS_H_
