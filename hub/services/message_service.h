// hub.v1.MessageService over Messaging: Publish, Ack, ListPending,
// ListDeadLetters, RedriveDeadLetter, Ask and ListTrace on the callback API.
// Calls that write durably run on the write pool (so concurrent publishes share
// a group commit); Ask waits for its answer on a pool of its own, so waiting
// asks never hold back writes.
#ifndef HUB_HUB_SERVICES_MESSAGE_SERVICE_H_
#define HUB_HUB_SERVICES_MESSAGE_SERVICE_H_

#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/v1/message.grpc.pb.h"
#include "registry/messaging.h"

namespace hub {

class MessageServiceImpl final
    : public hub::v1::MessageService::CallbackService {
 public:
  // Admits every call (hub/edge/admission.h): authentication, authority,
  // limits. Set before serving; must outlive the service. Without one every
  // call is admitted as the anonymous admin, unlimited.
  void SetAdmission(const Admission* admission) { admission_ = admission; }

  // Everything must outlive the service.
  MessageServiceImpl(Messaging* messaging, BlockingPool* write_pool,
                     BlockingPool* ask_pool);

  grpc::ServerUnaryReactor* Publish(
      grpc::CallbackServerContext* context,
      const hub::v1::PublishRequest* request,
      hub::v1::PublishResponse* response) override;
  grpc::ServerUnaryReactor* Ack(grpc::CallbackServerContext* context,
                                const hub::v1::AckRequest* request,
                                hub::v1::AckResponse* response) override;
  grpc::ServerUnaryReactor* ListPending(
      grpc::CallbackServerContext* context,
      const hub::v1::ListPendingRequest* request,
      hub::v1::ListPendingResponse* response) override;
  grpc::ServerUnaryReactor* ListDeadLetters(
      grpc::CallbackServerContext* context,
      const hub::v1::ListDeadLettersRequest* request,
      hub::v1::ListDeadLettersResponse* response) override;
  grpc::ServerUnaryReactor* Ask(grpc::CallbackServerContext* context,
                                const hub::v1::AskRequest* request,
                                hub::v1::AskResponse* response) override;
  grpc::ServerUnaryReactor* RedriveDeadLetter(
      grpc::CallbackServerContext* context,
      const hub::v1::RedriveDeadLetterRequest* request,
      hub::v1::RedriveDeadLetterResponse* response) override;
  grpc::ServerUnaryReactor* ListTrace(
      grpc::CallbackServerContext* context,
      const hub::v1::ListTraceRequest* request,
      hub::v1::ListTraceResponse* response) override;

 private:
  Messaging* const messaging_;
  BlockingPool* const write_pool_;
  BlockingPool* const ask_pool_;
  const Admission* admission_ = &Admission::Open();
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_MESSAGE_SERVICE_H_
