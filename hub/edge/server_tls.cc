#include "hub/edge/server_tls.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr char kKey[] = "key.pem";
constexpr char kCert[] = "cert.pem";
constexpr char kCa[] = "ca.pem";
constexpr char kLive[] = "live";

absl::Status SystemError(absl::string_view what, const std::string& path) {
  return FailedPreconditionError(
      "REQUEST_INVALID", absl::StrCat("TLS: cannot ", what, " ", path, ": ",
                                      std::strerror(errno)));
}

// Writes `text` to a new file readable only by the owner, with `mtime`.
absl::Status WritePrivateFile(const std::string& path, const std::string& text,
                              time_t mtime) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                      S_IRUSR | S_IWUSR);
  if (fd < 0) return SystemError("create", path);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const absl::Status s = SystemError("write", path);
      close(fd);
      return s;
    }
    written += static_cast<size_t>(n);
  }
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = mtime;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  const bool timed = futimens(fd, times) == 0;
  if (close(fd) != 0 || !timed) return SystemError("finish", path);
  return absl::OkStatus();
}

// Removes `dir` and the files (and symlinks) directly in it.
void RemoveFlatDirectory(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str()); d != nullptr) {
    while (const dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

std::string GenerationName(int64_t generation) {
  return absl::StrCat("gen-", generation);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerTls>> ServerTls::Create(TlsOptions tls) {
  absl::StatusOr<TlsFiles> files = ReadTlsFiles(tls);
  if (!files.ok()) return files.status();
  if (files->cert_pem.empty()) {
    return InvalidArgumentError("REQUEST_INVALID",
                                "TLS needs --tls_cert and --tls_key");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/hubd-tls-XXXXXX");
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  if (mkdtemp(path.data()) == nullptr) {
    return SystemError("create a private directory like", pattern);
  }
  const bool mutual = !files->client_ca_pem.empty();
  std::unique_ptr<ServerTls> out(new ServerTls(std::move(tls), path.data()));
  {
    absl::MutexLock lock(&out->mu_);
    if (absl::Status s = out->Publish(*files); !s.ok()) return s;
  }
  const std::string live = absl::StrCat(out->dir_, "/", kLive, "/");
  // Reads generation 1 before it returns.
  out->provider_ =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          live + kKey, live + kCert, mutual ? live + kCa : "", kRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(out->provider_);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  out->credentials_ = grpc::experimental::TlsServerCredentials(options);
  return out;
}

ServerTls::~ServerTls() {
  credentials_.reset();
  provider_.reset();
  int64_t last = 0;
  {
    absl::MutexLock lock(&mu_);
    last = generation_;
  }
  for (int64_t g = std::max<int64_t>(1, last - 1); g <= last; ++g) {
    RemoveFlatDirectory(absl::StrCat(dir_, "/", GenerationName(g)));
  }
  RemoveFlatDirectory(dir_);  // live, live.next
}

absl::Status ServerTls::Publish(const TlsFiles& files) {
  const int64_t next = generation_ + 1;
  const std::string name = GenerationName(next);
  const std::string gen_dir = absl::StrCat(dir_, "/", name);
  if (mkdir(gen_dir.c_str(), S_IRWXU) != 0) {
    return SystemError("create", gen_dir);
  }
  // Every generation has its own mtime (the watcher compares whole
  // seconds), so a swap in the middle of the watcher's read changes the
  // mtimes it checks and it reads again.
  static const time_t base = std::time(nullptr);
  const time_t mtime = base + static_cast<time_t>(next);
  absl::Status s =
      WritePrivateFile(absl::StrCat(gen_dir, "/", kKey), files.key_pem, mtime);
  if (s.ok()) {
    s = WritePrivateFile(absl::StrCat(gen_dir, "/", kCert), files.cert_pem,
                         mtime);
  }
  if (s.ok() && !files.client_ca_pem.empty()) {
    s = WritePrivateFile(absl::StrCat(gen_dir, "/", kCa), files.client_ca_pem,
                         mtime);
  }
  // One rename() replaces the live symlink: the old set or the new one.
  const std::string next_link = absl::StrCat(dir_, "/", kLive, ".next");
  const std::string live_link = absl::StrCat(dir_, "/", kLive);
  if (s.ok()) {
    unlink(next_link.c_str());
    if (symlink(name.c_str(), next_link.c_str()) != 0) {
      s = SystemError("create", next_link);
    } else if (rename(next_link.c_str(), live_link.c_str()) != 0) {
      s = SystemError("replace", live_link);
    }
  }
  if (!s.ok()) {
    RemoveFlatDirectory(gen_dir);
    return s;
  }
  generation_ = next;
  // The generation before the previous one is no longer read: the watcher
  // finishes a read long before two reloads.
  if (next > 2) {
    RemoveFlatDirectory(absl::StrCat(dir_, "/", GenerationName(next - 2)));
  }
  return absl::OkStatus();
}

absl::Status ServerTls::Reload() {
  absl::StatusOr<TlsFiles> files = ReadTlsFiles(tls_);
  absl::Status s = files.status();
  int64_t generation = 0;
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    s = Publish(*files);
    generation = generation_;
  }
  if (!s.ok()) {
    std::fprintf(stderr,
                 "hubd: TLS certificate reload failed, the previous "
                 "certificates stay in force: %s\n",
                 std::string(s.message()).c_str());
    return s;
  }
  std::fprintf(stderr,
               "hubd: TLS certificates reloaded from %s (generation %lld): "
               "new connections use them within %u s\n",
               tls_.cert_file.c_str(), static_cast<long long>(generation),
               kRefreshSeconds);
  return absl::OkStatus();
}

int64_t ServerTls::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace hub
