#include "hub/services/admin_service.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hub/observability/log.h"
#include "hub/services/error_mapping.h"
#include "status/status.h"

namespace hub {
namespace {

// A refused call: ends at once with `status`.
class RefusedWrite final
    : public grpc::ServerWriteReactor<hub::v1::BackupStoreResponse> {
 public:
  explicit RefusedWrite(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

// One backup: the copy is made on the pool, then sent a chunk per write.
// The temporary file is unlinked as soon as it is open, so nothing is left
// behind however the call ends.
class BackupReactor final
    : public grpc::ServerWriteReactor<hub::v1::BackupStoreResponse> {
 public:
  BackupReactor(storage::Store* store, BlockingPool* pool,
                std::string temp_path, std::unique_ptr<StreamTicket> ticket)
      : store_(store),
        temp_path_(std::move(temp_path)),
        ticket_(std::move(ticket)) {
    pool->Schedule([this] { Copy(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  void Copy() {
    const absl::Time started = absl::Now();
    std::remove(temp_path_.c_str());  // a leftover of a crashed hub
    absl::Status status = store_->BackupTo(temp_path_);
    if (status.ok()) {
      file_.open(temp_path_, std::ios::binary);
      if (file_.is_open()) {
        file_.seekg(0, std::ios::end);
        total_ = static_cast<int64_t>(file_.tellg());
        file_.seekg(0, std::ios::beg);
      } else {
        status = UnavailableError(
            "STORE_UNAVAILABLE",
            absl::StrCat("cannot read the backup copy ", temp_path_));
      }
    }
    ::unlink(temp_path_.c_str());
    if (!status.ok()) {
      log::Warn("backup_failed",
                {{"reason", ReasonOf(status)}, {"message", status.message()}});
      Finish(ToGrpcStatus(status));
      return;
    }
    log::Info("backup_copied",
              {{"bytes", total_},
               {"copy_ms", absl::ToInt64Milliseconds(absl::Now() - started)}});
    Next();
  }

  void Next() {
    response_.Clear();
    std::string* data = response_.mutable_data();
    data->resize(kBackupChunkBytes);
    file_.read(data->data(), static_cast<std::streamsize>(data->size()));
    data->resize(static_cast<size_t>(file_.gcount()));
    if (data->empty() && wrote_any_) {
      Finish(file_.bad()
                 ? ToGrpcStatus(UnavailableError(
                       "STORE_UNAVAILABLE", "reading the backup copy failed"))
                 : grpc::Status::OK);
      return;
    }
    wrote_any_ = true;
    response_.set_total_bytes(total_);
    StartWrite(&response_);
  }

  storage::Store* const store_;
  const std::string temp_path_;
  // The stream's slot, held while the backup streams.
  const std::unique_ptr<StreamTicket> ticket_;
  std::ifstream file_;
  int64_t total_ = 0;
  bool wrote_any_ = false;
  hub::v1::BackupStoreResponse response_;
};

}  // namespace

grpc::ServerWriteReactor<hub::v1::BackupStoreResponse>*
AdminServiceImpl::BackupStore(grpc::CallbackServerContext* context,
                              const hub::v1::BackupStoreRequest* request) {
  absl::StatusOr<AdmittedStream> admitted = admission_->AdmitStream(
      *context, request->GetDescriptor(), request, nullptr);
  if (!admitted.ok()) return new RefusedWrite(admitted.status());
  const std::string temp_path =
      absl::StrCat(store_->Info().db_path, ".backup-", ::getpid(), "-",
                   next_backup_.fetch_add(1), ".tmp");
  return new BackupReactor(store_, pool_, temp_path,
                           std::move(admitted->ticket));
}

}  // namespace hub
