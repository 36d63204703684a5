#include "hub/edge/auth.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hub/edge/call_gate.h"
#include "nlohmann/json.hpp"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {
namespace {

using Digest = std::array<unsigned char, 32>;

Digest Sha256(absl::string_view text) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest.data());
  return digest;
}

// RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" )
// *"=".
bool IsB64Token(absl::string_view token) {
  size_t i = 0;
  while (
      i < token.size() &&
      (absl::ascii_isalnum(static_cast<unsigned char>(token[i])) ||
       absl::string_view("-._~+/").find(token[i]) != absl::string_view::npos)) {
    ++i;
  }
  if (i == 0) return false;
  while (i < token.size() && token[i] == '=') ++i;
  return i == token.size();
}

bool IsPrincipalName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("._:@-").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool ParseHexDigest(absl::string_view hex, Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned value = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c =
          absl::ascii_tolower(static_cast<unsigned char>(hex[2 * i + j]));
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value |= static_cast<unsigned>(c - 'a' + 10);
      } else {
        return false;
      }
    }
    (*out)[i] = static_cast<unsigned char>(value);
  }
  return true;
}

absl::Status FileError(absl::string_view where, absl::string_view message) {
  return InvalidArgumentError("REQUEST_INVALID",
                              absl::StrCat("token file: ", where, message));
}

absl::Status Unauthenticated(absl::string_view reason,
                             absl::string_view message) {
  return ReasonError(absl::StatusCode::kUnauthenticated, reason, message);
}

absl::Status Denied(absl::string_view reason, absl::string_view message) {
  return ReasonError(absl::StatusCode::kPermissionDenied, reason, message);
}

const Principal& Anonymous() {
  static const Principal* anonymous = new Principal();
  return *anonymous;
}

}  // namespace

absl::string_view PrincipalKindName(PrincipalKind kind) {
  switch (kind) {
    case PrincipalKind::kAgent:
      return "agent";
    case PrincipalKind::kOperator:
      return "operator";
    case PrincipalKind::kAdmin:
      return "admin";
  }
  return "agent";
}

bool Principal::MayTouchProject(absl::string_view project_id) const {
  if (anonymous || all_projects) return true;
  return std::find(projects.begin(), projects.end(), project_id) !=
         projects.end();
}

std::string Sha256Hex(absl::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : Sha256(text)) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // The library's message quotes the text it last read, which may be a
    // token: only the position is reported.
    return FileError(
        "", absl::StrCat("not valid JSON (error at byte ", e.byte, ")"));
  }
  if (!doc.is_object() || doc.size() != 1 || !doc.contains("tokens") ||
      !doc["tokens"].is_array()) {
    return FileError("",
                     "must be an object with exactly one field, "
                     "\"tokens\", an array");
  }
  std::vector<TokenEntry> entries;
  std::set<Digest> seen;
  const nlohmann::json& tokens = doc["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string where = absl::StrCat("tokens[", i, "]: ");
    const nlohmann::json& t = tokens[i];
    if (!t.is_object()) return FileError(where, "must be an object");
    for (const auto& [key, value] : t.items()) {
      if (key != "token" && key != "sha256" && key != "principal" &&
          key != "kind" && key != "projects") {
        return FileError(where, absl::StrCat("unknown field \"", key, "\""));
      }
    }
    TokenEntry entry;
    const bool has_token = t.contains("token");
    const bool has_sha = t.contains("sha256");
    if (has_token == has_sha) {
      return FileError(where, "needs exactly one of \"token\" and \"sha256\"");
    }
    if (has_token) {
      if (!t["token"].is_string()) {
        return FileError(where, "\"token\" must be a string");
      }
      const std::string token = t["token"].get<std::string>();
      if (token.size() < 16 || token.size() > 4096 || !IsB64Token(token)) {
        return FileError(where,
                         "\"token\" must be 16..4096 characters of "
                         "[A-Za-z0-9-._~+/] optionally followed by '='");
      }
      entry.digest = Sha256(token);
    } else if (!t["sha256"].is_string() ||
               !ParseHexDigest(t["sha256"].get<std::string>(), &entry.digest)) {
      return FileError(where, "\"sha256\" must be 64 hex digits");
    }
    if (!seen.insert(entry.digest).second) {
      return FileError(where, "the same token appears twice");
    }
    if (!t.contains("principal") || !t["principal"].is_string() ||
        !IsPrincipalName(t["principal"].get<std::string>())) {
      return FileError(where,
                       "\"principal\" must be 1..128 characters of "
                       "[A-Za-z0-9._:@-]");
    }
    entry.principal.name = t["principal"].get<std::string>();
    entry.principal.anonymous = false;
    const std::string kind = t.contains("kind") && t["kind"].is_string()
                                 ? t["kind"].get<std::string>()
                                 : "";
    if (kind == "agent") {
      entry.principal.kind = PrincipalKind::kAgent;
    } else if (kind == "operator") {
      entry.principal.kind = PrincipalKind::kOperator;
    } else if (kind == "admin") {
      entry.principal.kind = PrincipalKind::kAdmin;
    } else {
      return FileError(where,
                       "\"kind\" must be \"agent\", \"operator\" or \"admin\"");
    }
    if (!t.contains("projects") || !t["projects"].is_array() ||
        t["projects"].empty()) {
      return FileError(where,
                       "\"projects\" must be a non-empty array of project "
                       "ids, or [\"*\"]");
    }
    entry.principal.all_projects = false;
    for (const nlohmann::json& p : t["projects"]) {
      if (!p.is_string()) {
        return FileError(where, "\"projects\" must hold strings");
      }
      const std::string project = p.get<std::string>();
      if (project == "*") {
        entry.principal.all_projects = true;
      } else if (!IsProjectId(project)) {
        return FileError(where, absl::StrCat("\"", project,
                                             "\" is not a project id "
                                             "(^prj_[A-Za-z0-9_-]{22}$) or *"));
      } else {
        entry.principal.projects.push_back(project);
      }
    }
    if (entry.principal.all_projects) entry.principal.projects.clear();
    entries.push_back(std::move(entry));
  }
  return entries;
}

bool IsLoopbackListen(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  absl::string_view host =
      colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;  // a name or a wildcard: may be reachable from elsewhere
}

absl::Status CheckListenExposure(absl::string_view listen, bool tls,
                                 bool tokens, bool insecure) {
  if (insecure || IsLoopbackListen(listen) || (tls && tokens)) {
    return absl::OkStatus();
  }
  std::vector<std::string> missing;
  if (!tls) missing.push_back("TLS (--tls_cert, --tls_key)");
  if (!tokens) missing.push_back("bearer tokens (--token_file)");
  return FailedPreconditionError(
      "INSECURE_LISTEN_REFUSED",
      absl::StrCat("refusing to listen on non-loopback address ", listen,
                   " without ", absl::StrJoin(missing, " and "),
                   "; configure them, listen on loopback, or pass --insecure "
                   "to accept the risk"));
}

// ---- TLS
// ---------------------------------------------------------------------

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError(
        "REQUEST_INVALID", absl::StrCat("cannot read ", flag, " file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first certificate of `pem` (nullptr when there is none).
X509* FirstCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

EVP_PKEY* PrivateKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return key;
}

}  // namespace

absl::StatusOr<TlsFiles> ReadTlsFiles(const TlsOptions& tls) {
  if (tls.cert_file.empty()) {
    if (!tls.key_file.empty() || !tls.client_ca_file.empty()) {
      return InvalidArgumentError(
          "REQUEST_INVALID",
          "--tls_key and --tls_client_ca need --tls_cert (TLS is off)");
    }
    return TlsFiles();
  }
  if (tls.key_file.empty()) {
    return InvalidArgumentError("REQUEST_INVALID",
                                "--tls_cert needs --tls_key");
  }
  TlsFiles files;
  absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "--tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key_file, "--tls_key");
  if (!key.ok()) return key.status();
  X509* x509 = FirstCert(*cert);
  if (x509 == nullptr) {
    return InvalidArgumentError(
        "REQUEST_INVALID",
        absl::StrCat(tls.cert_file, " holds no PEM certificate"));
  }
  EVP_PKEY* pkey = PrivateKey(*key);
  const bool key_ok = pkey != nullptr;
  const bool match = key_ok && X509_check_private_key(x509, pkey) == 1;
  X509_free(x509);
  EVP_PKEY_free(pkey);
  if (!key_ok) {
    return InvalidArgumentError(
        "REQUEST_INVALID",
        absl::StrCat(tls.key_file, " holds no PEM private key"));
  }
  if (!match) {
    return InvalidArgumentError(
        "REQUEST_INVALID",
        absl::StrCat(tls.key_file, " is not the key of ", tls.cert_file));
  }
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca =
        ReadPem(tls.client_ca_file, "--tls_client_ca");
    if (!ca.ok()) return ca.status();
    X509* first = FirstCert(*ca);
    if (first == nullptr) {
      return InvalidArgumentError(
          "REQUEST_INVALID",
          absl::StrCat(tls.client_ca_file, " holds no PEM certificate"));
    }
    X509_free(first);
    files.client_ca_pem = *std::move(ca);
  }
  files.cert_pem = *std::move(cert);
  files.key_pem = *std::move(key);
  return files;
}

std::string SecuritySummary(absl::string_view listen, const TlsOptions& tls,
                            bool tokens, bool insecure) {
  const bool has_tls = !tls.cert_file.empty();
  std::string out =
      absl::StrCat("tls=", has_tls ? "on" : "off",
                   " mtls=", tls.client_ca_file.empty() ? "off" : "on",
                   " auth=", tokens ? "tokens" : "off");
  if (!tokens) {
    absl::StrAppend(&out, IsLoopbackListen(listen)
                              ? " (loopback only: every caller is an "
                                "anonymous admin)"
                              : " (INSECURE: every caller is an anonymous "
                                "admin)");
  } else if (!has_tls && !IsLoopbackListen(listen) && insecure) {
    absl::StrAppend(&out, " (INSECURE: tokens travel in plaintext)");
  }
  return out;
}

// ---- Authority
// ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Authority>> Authority::Create(
    AuthOptions options, storage::AgentStore* agents) {
  std::unique_ptr<Authority> authority(new Authority(std::move(options)));
  if (!authority->enabled()) return authority;
  if (absl::Status s = authority->Load(/*at_start=*/true); !s.ok()) return s;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> owners =
      agents->ListAgentOwners();
  if (!owners.ok()) return owners.status();
  {
    absl::MutexLock lock(&authority->owners_mu_);
    for (auto& [agent, owner] : *owners) {
      authority->owners_[agent] = std::move(owner);
    }
  }
  if (authority->options_.poll_interval > absl::ZeroDuration()) {
    Authority* raw = authority.get();
    authority->watcher_ = std::thread([raw] {
      pthread_setname_np(pthread_self(), "hub-auth-watch");  // top -H, perf
      raw->Watch();
    });
  }
  return authority;
}

Authority::~Authority() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
}

std::optional<Authority::FileStamp> Authority::Stamp() const {
  struct stat st;
  if (stat(options_.token_file.c_str(), &st) != 0) return std::nullopt;
  FileStamp stamp;
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                   st.st_mtim.tv_nsec;
  stamp.size = static_cast<int64_t>(st.st_size);
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  return stamp;
}

absl::Status Authority::Load(bool at_start) {
  absl::MutexLock reload_lock(&reload_mu_);
  const std::optional<FileStamp> stamp = Stamp();
  std::ifstream in(options_.token_file, std::ios::binary);
  absl::Status status;
  std::vector<TokenEntry> entries;
  if (!in) {
    status = FailedPreconditionError(
        "REQUEST_INVALID",
        absl::StrCat("cannot read token file ", options_.token_file));
  } else {
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<TokenEntry>> parsed = ParseTokenFile(text.str());
    if (parsed.ok()) {
      entries = std::move(*parsed);
    } else {
      status = FailedPreconditionError(
          "REQUEST_INVALID",
          absl::StrCat(options_.token_file, ": ", parsed.status().message()));
    }
  }
  // Remember what was looked at even when it failed, so a bad file is
  // reported once, not at every poll.
  if (stamp.has_value()) loaded_stamp_ = *stamp;
  if (!status.ok()) {
    if (!at_start) {
      std::fprintf(stderr,
                   "hubd: token file reload failed, previous tokens stay in "
                   "force: %s\n",
                   std::string(status.message()).c_str());
    }
    return status;
  }
  std::set<std::string> principals;
  for (const TokenEntry& e : entries) principals.insert(e.principal.name);
  auto set = std::make_shared<TokenSet>();
  set->entries = std::move(entries);
  const size_t count = set->entries.size();
  {
    absl::MutexLock lock(&tokens_mu_);
    tokens_ = std::move(set);
  }
  loads_.fetch_add(1);
  std::fprintf(stderr, "hubd: token file %s %s: %zu tokens, %zu principals\n",
               options_.token_file.c_str(), at_start ? "loaded" : "reloaded",
               count, principals.size());
  return absl::OkStatus();
}

absl::Status Authority::Reload() {
  if (!enabled()) return absl::OkStatus();
  return Load(/*at_start=*/false);
}

void Authority::Watch() {
  while (!stop_.WaitForNotificationWithTimeout(options_.poll_interval)) {
    const std::optional<FileStamp> stamp = Stamp();
    if (!stamp.has_value()) continue;  // mid-replace; look again next time
    bool changed = false;
    {
      absl::MutexLock lock(&reload_mu_);
      changed = !(*stamp == loaded_stamp_);
    }
    if (changed) Load(/*at_start=*/false).IgnoreError();
  }
}

size_t Authority::token_count() const {
  absl::MutexLock lock(&tokens_mu_);
  return tokens_ == nullptr ? 0 : tokens_->entries.size();
}

absl::StatusOr<Principal> Authority::Authenticate(
    const grpc::ServerContextBase& context) const {
  if (!enabled()) return Anonymous();
  std::vector<absl::string_view> values;
  const auto range = context.client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  return AuthenticateValues(values);
}

absl::StatusOr<Principal> Authority::AuthenticateValues(
    const std::vector<absl::string_view>& values) const {
  if (!enabled()) return Anonymous();
  if (values.empty()) {
    return Unauthenticated("PRINCIPAL_REQUIRED",
                           "this hub requires a bearer token: send metadata "
                           "'authorization: Bearer <token>'");
  }
  if (values.size() > 1) {
    return Unauthenticated("UNAUTHENTICATED",
                           "more than one authorization header");
  }
  absl::string_view value = values[0];
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return Unauthenticated("UNAUTHENTICATED",
                           "the authorization header must be 'Bearer <token>'");
  }
  absl::string_view token = value.substr(kScheme.size());
  if (!IsB64Token(token)) {
    return Unauthenticated("UNAUTHENTICATED", "the bearer token is malformed");
  }
  const Digest digest = Sha256(token);
  std::shared_ptr<const TokenSet> set;
  {
    absl::MutexLock lock(&tokens_mu_);
    set = tokens_;
  }
  // Every entry is compared, in constant time, whatever matched: the time
  // taken says nothing about how close a guess was.
  const TokenEntry* match = nullptr;
  if (set != nullptr) {
    for (const TokenEntry& entry : set->entries) {
      const bool equal =
          CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
      if (equal) match = &entry;
    }
  }
  if (match == nullptr) {
    return Unauthenticated("UNAUTHENTICATED", "unknown bearer token");
  }
  return match->principal;
}

absl::Status Authority::CheckOwner(const Principal& principal,
                                   absl::string_view agent_id) const {
  if (principal.anonymous) return absl::OkStatus();
  absl::MutexLock lock(&owners_mu_);
  auto it = owners_.find(agent_id);
  if (it == owners_.end()) {
    return WithMetadata(
        Denied("PERMISSION_DENIED",
               absl::StrCat("principal ", principal.name,
                            " does not own agent ", agent_id,
                            " (an agent is owned by the principal that "
                            "registered it first)")),
        "agent_id", agent_id);
  }
  if (it->second != principal.name) {
    return WithMetadata(
        Denied("PERMISSION_DENIED", absl::StrCat("agent ", agent_id,
                                                 " is owned by another "
                                                 "principal than ",
                                                 principal.name)),
        "agent_id", agent_id);
  }
  return absl::OkStatus();
}

bool Authority::OwnerKnown(absl::string_view agent_id) const {
  absl::MutexLock lock(&owners_mu_);
  return owners_.contains(agent_id);
}

void Authority::RememberOwner(absl::string_view agent_id,
                              absl::string_view principal) {
  absl::MutexLock lock(&owners_mu_);
  owners_.try_emplace(std::string(agent_id), std::string(principal));
}

// ---- the services' checks
// ----------------------------------------------------

absl::StatusOr<Principal> CallPrincipal(
    const Authority* authority, const grpc::ServerContextBase& context) {
  if (authority == nullptr) return Anonymous();
  return authority->Authenticate(context);
}

std::string LimitPrincipal(const Authority* authority,
                           const grpc::ServerContextBase& context) {
  if (authority != nullptr && authority->enabled()) {
    absl::StatusOr<Principal> principal = authority->Authenticate(context);
    if (principal.ok() && !principal->anonymous) {
      return absl::StrCat("principal:", principal->name);
    }
  }
  return PeerPrincipalOf(context.peer());
}

absl::Status RequireKind(const Principal& principal, PrincipalKind kind,
                         absl::string_view what) {
  if (principal.anonymous || principal.kind >= kind) return absl::OkStatus();
  return Denied("PERMISSION_DENIED",
                absl::StrCat(what, " needs a ", PrincipalKindName(kind),
                             " token; principal ", principal.name, " is ",
                             PrincipalKindName(principal.kind) == "agent"
                                 ? "an agent"
                                 : "an operator"));
}

absl::Status RequireProject(const Principal& principal,
                            absl::string_view project_id) {
  if (principal.MayTouchProject(project_id)) return absl::OkStatus();
  return Denied(
      "PROJECT_SCOPE_MISMATCH",
      absl::StrCat("principal ", principal.name, " may not act in project ",
                   project_id.empty() ? "(none given)" : project_id));
}

ProjectScope ScopeOf(const Principal& principal) {
  ProjectScope scope;
  scope.all = principal.anonymous || principal.all_projects;
  if (!scope.all) scope.projects = principal.projects;
  return scope;
}

absl::Status RequireAgentInScope(const Principal& principal,
                                 absl::string_view agent_id,
                                 const std::optional<std::string>& project_id) {
  if (ScopeOf(principal).Allows(project_id)) return absl::OkStatus();
  return WithMetadata(
      Denied("PROJECT_SCOPE_MISMATCH",
             absl::StrCat("principal ", principal.name, " may not see agent ",
                          agent_id, ": it is in ",
                          project_id.has_value()
                              ? absl::StrCat("project ", *project_id)
                              : std::string("no project"),
                          ", outside the token's projects")),
      "agent_id", agent_id);
}

}  // namespace hub
