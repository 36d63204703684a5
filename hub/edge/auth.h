// Identity and authority at hub's gRPC edge: bearer tokens from a token file,
// the principal of each call, principal-bound agent ownership, and the
// listen-address safety rule. See docs/design/auth.md.
//
// Without a token file the Authority is disabled: every caller is an
// anonymous admin (hub's behaviour before tokens), which the listen rule only
// allows on loopback. With one, every RPC authenticates its
// `authorization: Bearer <token>` metadata at the start of its handler.
#ifndef HUB_HUB_EDGE_AUTH_H_
#define HUB_HUB_EDGE_AUTH_H_

#include <grpcpp/server_context.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "registry/project_scope.h"
#include "storage/agent_store.h"

namespace hub {

// admin ⊇ operator ⊇ agent.
enum class PrincipalKind { kAgent = 0, kOperator = 1, kAdmin = 2 };
absl::string_view PrincipalKindName(PrincipalKind kind);

struct Principal {
  std::string name;  // "" only for the anonymous principal
  PrincipalKind kind = PrincipalKind::kAdmin;
  bool all_projects = true;           // "projects": ["*"]
  std::vector<std::string> projects;  // when !all_projects
  bool anonymous = true;              // no token file: everything allowed

  bool MayTouchProject(absl::string_view project_id) const;
  // An agent token's principal (not an operator, admin or the anonymous
  // admin).
  bool IsAgentToken() const {
    return !anonymous && kind == PrincipalKind::kAgent;
  }
};

// One token of the token file: the SHA-256 of the token and its principal.
struct TokenEntry {
  std::array<unsigned char, 32> digest{};
  Principal principal;
};

// Parses a token file (the JSON document of docs/design/auth.md). Errors
// name the entry and field, never a token.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text);

// Lower-case hex SHA-256 of `text` (for writing token files).
std::string Sha256Hex(absl::string_view text);

// Whether the host of a "host:port" listen address is a loopback address
// (127.0.0.0/8, ::1, localhost).
bool IsLoopbackListen(absl::string_view listen);

// The safe-default rule: a non-loopback address needs both TLS and tokens,
// unless `insecure` says otherwise (FAILED_PRECONDITION, reason
// INSECURE_LISTEN_REFUSED, with a message saying what is missing).
absl::Status CheckListenExposure(absl::string_view listen, bool tls,
                                 bool tokens, bool insecure);

// TLS for the server. Empty cert_file: plaintext.
struct TlsOptions {
  std::string cert_file;       // PEM certificate chain
  std::string key_file;        // PEM private key of the certificate
  std::string client_ca_file;  // PEM CA(s): set = mutual TLS required
};

// The PEM text of the TLS files, checked.
struct TlsFiles {
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;  // "" without mutual TLS
};

// Reads and checks the PEM files (each holds a PEM object, the key matches
// the certificate). INVALID_ARGUMENT naming the file on any problem. All
// three empty: plaintext, an empty TlsFiles. ServerTls (hub/edge/server_tls.h)
// serves them.
absl::StatusOr<TlsFiles> ReadTlsFiles(const TlsOptions& tls);

// The security part of hubd's startup line, e.g. "tls=on mtls=off
// auth=tokens" or "tls=off auth=off (loopback only: every caller is an
// anonymous admin)".
std::string SecuritySummary(absl::string_view listen, const TlsOptions& tls,
                            bool tokens, bool insecure);

struct AuthOptions {
  // The token file; empty: no tokens, every caller is an anonymous admin.
  std::string token_file;
  // How often the file is checked for changes (mtime, size, inode); a change
  // reloads it. Zero: only Reload() (SIGHUP) reloads.
  absl::Duration poll_interval = absl::Seconds(1);
};

class Authority {
 public:
  // Loads the token file (a bad file is an error naming it) and the agent
  // owners recorded in `agents` (read once, here), and starts watching the
  // file.
  static absl::StatusOr<std::unique_ptr<Authority>> Create(
      AuthOptions options, storage::AgentStore* agents);
  ~Authority();
  Authority(const Authority&) = delete;
  Authority& operator=(const Authority&) = delete;

  // True when a token file is configured.
  bool enabled() const { return !options_.token_file.empty(); }
  // Re-reads the token file. On failure the previous tokens stay in force
  // and the error (naming no token) is returned and printed on stderr.
  absl::Status Reload();
  // Successful loads so far (1 after Create when enabled).
  int64_t loads() const { return loads_.load(); }
  size_t token_count() const;

  // The caller's principal, from its `authorization` metadata:
  // UNAUTHENTICATED with reason PRINCIPAL_REQUIRED when the call has none,
  // UNAUTHENTICATED when it is malformed or unknown. Anonymous admin when
  // disabled.
  absl::StatusOr<Principal> Authenticate(
      const grpc::ServerContextBase& context) const;
  // The same from the header values (tests; `values` = every authorization
  // value the call carried).
  absl::StatusOr<Principal> AuthenticateValues(
      const std::vector<absl::string_view>& values) const;

  // PERMISSION_DENIED unless `principal` owns `agent_id` (anonymous: OK).
  absl::Status CheckOwner(const Principal& principal,
                          absl::string_view agent_id) const;
  // Whether the owner of `agent_id` is known (on record when the hub
  // started, or claimed since).
  bool OwnerKnown(absl::string_view agent_id) const;
  // Notes that `principal` owns `agent_id`, as a registration that claimed
  // it (storage::AgentRegistration::owner) has just committed. The first
  // owner noted stays: the store's claim is first-writer-wins too.
  void RememberOwner(absl::string_view agent_id, absl::string_view principal);

 private:
  struct TokenSet {
    std::vector<TokenEntry> entries;
  };
  struct FileStamp {
    int64_t mtime_ns = 0;
    int64_t size = -1;
    uint64_t inode = 0;
    bool operator==(const FileStamp& o) const {
      return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
    }
  };

  explicit Authority(AuthOptions options) : options_(std::move(options)) {}
  absl::Status Load(bool at_start);
  std::optional<FileStamp> Stamp() const;
  void Watch();

  const AuthOptions options_;
  std::atomic<int64_t> loads_{0};

  mutable absl::Mutex tokens_mu_;
  std::shared_ptr<const TokenSet> tokens_ ABSL_GUARDED_BY(tokens_mu_);
  absl::Mutex reload_mu_;  // one Load at a time
  FileStamp loaded_stamp_ ABSL_GUARDED_BY(reload_mu_);

  mutable absl::Mutex owners_mu_;
  absl::flat_hash_map<std::string, std::string> owners_
      ABSL_GUARDED_BY(owners_mu_);

  absl::Notification stop_;
  std::thread watcher_;
};

// The checks admission (hub/edge/admission.h) and the services make; a null
// Authority allows everything.
//
// The caller's principal.
absl::StatusOr<Principal> CallPrincipal(const Authority* authority,
                                        const grpc::ServerContextBase& context);
// Who a call's limits count against (the CallGate's PrincipalFn,
// hub/edge/call_gate.h): "principal:<name>" for a call whose token
// authenticates, so every agent's token has its own budget wherever it calls
// from; the peer host (PeerPrincipalOf) for every other call: no token file, no
// token, or a token that does not authenticate. So what a call puts in its
// authorization header can neither give it a fresh budget nor spend another
// principal's. The prefix keeps a principal named like a peer
// ("ipv4:127.0.0.1") from sharing that host's budget.
std::string LimitPrincipal(const Authority* authority,
                           const grpc::ServerContextBase& context);
// Requires at least `kind`; PERMISSION_DENIED otherwise.
absl::Status RequireKind(const Principal& principal, PrincipalKind kind,
                         absl::string_view what);
// PERMISSION_DENIED / PROJECT_SCOPE_MISMATCH unless the principal may touch
// `project_id`.
absl::Status RequireProject(const Principal& principal,
                            absl::string_view project_id);
// The projects `principal` may read and address: all for the anonymous
// principal and "*" tokens, else the token's list.
ProjectScope ScopeOf(const Principal& principal);
// PERMISSION_DENIED / PROJECT_SCOPE_MISMATCH (metadata agent_id) unless the
// agent's project (nullopt: the agent has none) is in the principal's scope.
absl::Status RequireAgentInScope(const Principal& principal,
                                 absl::string_view agent_id,
                                 const std::optional<std::string>& project_id);

}  // namespace hub

#endif  // HUB_HUB_EDGE_AUTH_H_
