// The RPCs rpc_request_fuzz drives, by the number in byte 0 of an input
// (modulo kCount). Append only: the corpus files name RPCs by number.
#ifndef HUB_TESTS_FUZZ_RPC_REQUEST_FUZZ_H_
#define HUB_TESTS_FUZZ_RPC_REQUEST_FUZZ_H_

namespace hub::fuzz {

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
                                       "ListTrace"};
  return rpc >= 0 && rpc < static_cast<int>(Rpc::kCount) ? kNames[rpc] : "?";
}

}  // namespace hub::fuzz

#endif  // HUB_TESTS_FUZZ_RPC_REQUEST_FUZZ_H_
