#include "tools/hubbench/targets.h"

#include "absl/time/clock.h"

namespace hubbench {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::unique_ptr<grpc::ClientContext> NewCallContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  return context;
}

}  // namespace hubbench
