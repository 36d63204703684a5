// AdminServiceImpl: hub.v1.AdminService, operator actions on the hub's store.
//
// BackupStore copies the SQLite file with VACUUM INTO (a read connection:
// writers go on) into a temporary file beside the database, streams it in
// chunks and removes it. Admin principals only (docs/design/auth.md): a
// backup holds every project's data.
#ifndef HUB_HUB_SERVICES_ADMIN_SERVICE_H_
#define HUB_HUB_SERVICES_ADMIN_SERVICE_H_

#include <atomic>
#include <string>

#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/v1/admin.grpc.pb.h"
#include "storage/store.h"

namespace hub {

// Bytes per BackupStoreResponse: a multiple of 3 (see admin.proto).
inline constexpr size_t kBackupChunkBytes = 192 * 1024;

class AdminServiceImpl final : public hub::v1::AdminService::CallbackService {
 public:
  // `store`, `pool` (where the copy is written) and `admission` must
  // outlive the service.
  AdminServiceImpl(storage::Store* store, BlockingPool* pool,
                   const Admission* admission)
      : store_(store), pool_(pool), admission_(admission) {}

  grpc::ServerWriteReactor<hub::v1::BackupStoreResponse>* BackupStore(
      grpc::CallbackServerContext* context,
      const hub::v1::BackupStoreRequest* request) override;

 private:
  storage::Store* const store_;
  BlockingPool* const pool_;
  const Admission* const admission_;
  std::atomic<int64_t> next_backup_{1};
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_ADMIN_SERVICE_H_
