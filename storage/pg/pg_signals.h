// PgSignals: storage/signals.h on PostgreSQL. A listener is a Listener (a
// connection of its own that LISTENs, pg_listener.h), a sender a Notifier
// (an autocommit connection of its own, synchronous_commit off,
// pg_notifier.h), a link one more such connection that sends pg_notify at
// once. Never inside a writer's transaction, where NOTIFY would serialize
// every commit of the cluster behind one lock.
#ifndef HUB_STORAGE_PG_PG_SIGNALS_H_
#define HUB_STORAGE_PG_PG_SIGNALS_H_

#include <memory>
#include <string>

#include "storage/signals.h"

namespace hub::storage::pg {

class PgSignals final : public Signals {
 public:
  // `conninfo`: the database's libpq connection string.
  explicit PgSignals(std::string conninfo) : conninfo_(std::move(conninfo)) {}

  std::unique_ptr<SignalListener> Listen(SignalListenOptions options) override;
  std::unique_ptr<SignalSender> NewSender(SignalSendOptions options) override;
  std::unique_ptr<SignalLink> NewLink(std::string name) override;

 private:
  const std::string conninfo_;
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_SIGNALS_H_
