// PgMembership: the hubs sharing one PostgreSQL database (hub_hubs), with
// leases on the database's clock. See storage/membership.h and
// docs/design/multi-hub.md.
#ifndef HUB_STORAGE_PG_PG_MEMBERSHIP_H_
#define HUB_STORAGE_PG_PG_MEMBERSHIP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/pg/pg_conn.h"
#include "storage/store.h"

namespace hub::storage::pg {

// A condition, in SQL, that holds while the seat ($hub, $inc) is live:
// state live and its lease not yet over in the database's clock. True for
// a NULL hub (a store that never joined: tools, tests). `hub` and `inc`
// are parameter references such as "$5".
std::string SeatLiveSql(absl::string_view hub, absl::string_view inc);

class PgMembership final : public Membership {
 public:
  // `hub_id` names this hub in hub_hubs (hubd: its hub_instance_id).
  PgMembership(std::string conninfo, std::string hub_id);
  ~PgMembership() override;

  absl::StatusOr<Joined> Join(absl::string_view address,
                              int64_t ttl_ms) override;
  absl::StatusOr<RenewOutcome> Renew(int64_t ttl_ms) override;
  absl::StatusOr<std::vector<TakenAgent>> TakeOverDeadHubs() override;
  absl::Status Leave() override;
  HubSeat seat() const override;
  absl::StatusOr<std::vector<HubMember>> ListHubs() override;

  absl::StatusOr<std::vector<TakenAgent>> HeldAgents() override;
  absl::StatusOr<std::vector<std::string>> HubsHolding(
      const std::vector<std::string>& agent_ids) override;
  absl::StatusOr<std::vector<Holding>> LiveHoldersElsewhere(
      const std::vector<std::string>& agent_ids) override;

 private:
  // Runs `sql` on the membership connection, connecting (again) first if
  // needed. With `retry`, a statement that fails because the connection
  // broke runs once more on a new one: only for statements whose repeat
  // after an unknown outcome (it may have committed) is harmless. A
  // takeover or a join that may have committed is not repeated: its
  // answer (the agents it moved) would be lost, so it fails, and the
  // caller reads what the seat holds (HeldAgents) or what is stray.
  absl::StatusOr<Result> Run(absl::string_view sql,
                             const std::vector<Param>& params,
                             bool retry = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn_mu_);

  const std::string conninfo_;
  const std::string hub_id_;
  absl::Mutex conn_mu_;  // one statement at a time on conn_
  std::unique_ptr<Connection> conn_ ABSL_GUARDED_BY(conn_mu_);
  mutable absl::Mutex seat_mu_;
  HubSeat seat_ ABSL_GUARDED_BY(seat_mu_);
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_MEMBERSHIP_H_
