// The HTTPS listener's certificate rotation: a pair swapped on disk is served
// to new connections once its files change (or, with the watch off, once
// ReloadTls runs: hubd's SIGHUP), through the same bound listener, while a
// connection made before keeps its certificate and is still served; a bad
// pair is refused and the old one stays.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/observability/metrics.h"
#include "hub/observability/metrics_http.h"
#include "status/status.h"

namespace hub {
namespace {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Digest(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  X509_digest(cert, EVP_sha256(), md, &n);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), n));
}

std::string FileDigest(const std::string& pem) {
  FILE* f = std::fopen(pem.c_str(), "r");
  if (f == nullptr) return "";
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (cert == nullptr) return "";
  std::string d = Digest(cert);
  X509_free(cert);
  return d;
}

// A TLS connection to 127.0.0.1:port (certificate not verified: the test
// compares it with the files).
class TlsConnection {
 public:
  explicit TlsConnection(int port) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      return;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    if (SSL_connect(ssl_) != 1) return;
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (peer != nullptr) {
      peer_ = Digest(peer);
      X509_free(peer);
    }
  }
  ~TlsConnection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) close(fd_);
    SSL_CTX_free(ctx_);
  }
  // The served certificate's SHA-256 ("" when the handshake failed).
  const std::string& peer() const { return peer_; }
  // One keep-alive GET /metrics; its status line.
  std::string Get() {
    const std::string request =
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
    if (SSL_write(ssl_, request.data(), static_cast<int>(request.size())) <= 0)
      return "";
    char buf[4096];
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return "";
    const std::string text(buf, static_cast<size_t>(n));
    return text.substr(0, text.find("\r\n"));
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string peer_;
};

class MetricsHttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new std::string(TmpDir() + "/pki");
    const std::string command =
        absl::StrCat("sh tests/make_test_pki.sh '", *pki_, "'");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override {
    dir_ = TmpDir() + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    Install("server");
  }

  // Puts PKI pair `name` in place of the served files (a rename each, as
  // tools that rotate certificates do).
  void Install(const std::string& name) {
    for (const char* ext : {".key", ".pem"}) {
      const std::string to = dir_ + "/tls" + ext;
      std::filesystem::copy_file(
          *pki_ + "/" + name + ext, to + ".new",
          std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(to + ".new", to);
    }
  }

  std::unique_ptr<MetricsHttpServer> Serve(absl::Duration poll) {
    HttpServeOptions options;
    options.tls_cert_file = dir_ + "/tls.pem";
    options.tls_key_file = dir_ + "/tls.key";
    options.tls_poll_interval = poll;
    // The connection made before a swap stays open however slow the
    // machine is (httplib's default closes an idle one after 5 s).
    options.keep_alive_timeout = absl::Minutes(10);
    auto server =
        MetricsHttpServer::Start("127.0.0.1:0", &registry_, std::move(options));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  // The certificate new connections get, once it is `name`'s; what they
  // got last when the deadline passed.
  static std::string AwaitServed(int port, const std::string& name) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    std::string served;
    do {
      served = TlsConnection(port).peer();
      if (served == Pair(name)) break;
      absl::SleepFor(absl::Milliseconds(10));
    } while (absl::Now() < give_up);
    return served;
  }

  static std::string Pair(const std::string& name) {
    return FileDigest(*pki_ + "/" + name + ".pem");
  }

  static std::string* pki_;
  std::string dir_;
  MetricRegistry registry_;
};

std::string* MetricsHttpTlsTest::pki_ = nullptr;

TEST_F(MetricsHttpTlsTest,
       ASwappedPairIsServedToNewConnectionsOnceItsFilesChange) {
  std::unique_ptr<MetricsHttpServer> server = Serve(absl::Milliseconds(20));
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  TlsConnection before(port);
  ASSERT_EQ(before.peer(), Pair("server"));
  EXPECT_EQ(before.Get(), "HTTP/1.1 200 OK");

  Install("other_server");
  EXPECT_EQ(AwaitServed(port, "other_server"), Pair("other_server"));
  EXPECT_EQ(server->port(), port);
  EXPECT_GE(server->tls_loads(), 2);
  // The connection made before keeps its certificate and is still served.
  EXPECT_EQ(before.Get(), "HTTP/1.1 200 OK");
}

// The watch compares the files with what the server loaded, not with what
// it first saw itself: a swap that lands before the watch's first look (a
// busy machine, a rotation racing the start) is still served.
TEST_F(MetricsHttpTlsTest, APairSwappedAsTheListenerStartsIsServed) {
  for (int round = 0; round < 20; ++round) {
    Install("server");
    std::unique_ptr<MetricsHttpServer> server = Serve(absl::Milliseconds(5));
    ASSERT_NE(server, nullptr);
    Install("other_server");
    ASSERT_EQ(AwaitServed(server->port(), "other_server"), Pair("other_server"))
        << "round " << round;
    // 3 when a look fell between the two renames and its read after them.
    EXPECT_GE(server->tls_loads(), 2);
  }
}

TEST_F(MetricsHttpTlsTest,
       WithTheWatchOffReloadTlsSwapsThePairAndRefusesABadOne) {
  std::unique_ptr<MetricsHttpServer> server = Serve(absl::ZeroDuration());
  ASSERT_NE(server, nullptr);
  Install("other_server");
  EXPECT_EQ(TlsConnection(server->port()).peer(), Pair("server"));
  ASSERT_TRUE(server->ReloadTls().ok());
  EXPECT_EQ(TlsConnection(server->port()).peer(), Pair("other_server"));

  // A key that is not the certificate's: refused, the pair in force stays.
  std::filesystem::copy_file(*pki_ + "/server.key", dir_ + "/tls.key",
                             std::filesystem::copy_options::overwrite_existing);
  absl::Status bad = server->ReloadTls();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(bad), "TLS_FILES_INVALID");
  EXPECT_EQ(TlsConnection(server->port()).peer(), Pair("other_server"));
  EXPECT_EQ(server->tls_loads(), 2);
}

}  // namespace
}  // namespace hub
