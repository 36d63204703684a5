// Calls any RPC of hub.v1 by number with a request given as bytes (text or
// binary protobuf): shared by the bad-input table test and the RPC fuzz
// target (tests/fuzz/rpc_request_fuzz.cc).
#ifndef HUB_TESTS_RPC_CALLER_H_
#define HUB_TESTS_RPC_CALLER_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <optional>
#include <string>

#include "hub/v1/errors.pb.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"

namespace hub::testing {

// Every RPC, numbered. Append only: fuzz corpus files name RPCs by number.

enum class Rpc {
  kGetStatus = 0,
  kEncodeRoleKey,
  kDecodeRoleKey,
  kRegisterAgent,
  kHeartbeat,
  kDeregister,
  kGetAgent,
  kListAgents,
  kAttach,
  kReserveRole,
  kCompareAndSetRole,
  kGetRole,
  kListRoles,
  kWatchRoles,
  kEnsureRole,
  kAckRoleActivation,
  kUpsertRoleCandidate,
  kListRoleCandidates,
  kReportCandidateProbe,
  kPublish,
  kAck,
  kListPending,
  kListDeadLetters,
  kAsk,
  kListTrace,
  kCloseRoleScope,
  kListClosedScopes,
  kCount,
};

inline const char* RpcName(int rpc) {
  static const char* const kNames[] = {"GetStatus",
                                       "EncodeRoleKey",
                                       "DecodeRoleKey",
                                       "RegisterAgent",
                                       "Heartbeat",
                                       "Deregister",
                                       "GetAgent",
                                       "ListAgents",
                                       "Attach",
                                       "ReserveRole",
                                       "CompareAndSetRole",
                                       "GetRole",
                                       "ListRoles",
                                       "WatchRoles",
                                       "EnsureRole",
                                       "AckRoleActivation",
                                       "UpsertRoleCandidate",
                                       "ListRoleCandidates",
                                       "ReportCandidateProbe",
                                       "Publish",
                                       "Ack",
                                       "ListPending",
                                       "ListDeadLetters",
                                       "Ask",
                                       "ListTrace",
                                       "CloseRoleScope",
                                       "ListClosedScopes"};
  return rpc >= 0 && rpc < static_cast<int>(Rpc::kCount) ? kNames[rpc] : "?";
}

struct HubStubs {
  explicit HubStubs(std::shared_ptr<grpc::Channel> channel);
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hub::v1::HubService::Stub> hub;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence;
  std::unique_ptr<hub::v1::RoleService::Stub> roles;
  std::unique_ptr<hub::v1::MessageService::Stub> messages;
};

// Calls `rpc` (an Rpc number) with a request read from `bytes`: text format
// when `text`, else binary. For Attach, `bytes` is a list of AttachRequest
// frames (text: separated by lines "---"; binary: each after a one-byte
// length) written in order before the stream is half-closed, and the answer
// is the first in-band frame_error (as a status with its ErrorInfo) or else
// the stream's final status. WatchRoles is read up to its snapshot end and
// cancelled (OK then). An Ask waits at most 100 ms. Every call has a 20 s
// deadline. Bytes that do not parse give nullopt.
std::optional<grpc::Status> CallRpc(HubStubs* stubs, int rpc,
                                    const std::string& bytes, bool text);

// An in-band ErrorStatus as the status of a failed call would carry it.
grpc::Status FromErrorStatus(const hub::v1::ErrorStatus& error);

}  // namespace hub::testing

#endif  // HUB_TESTS_RPC_CALLER_H_
