// reservation_check: what a pre-commit check costs as live reservations
// grow (docs/BENCHMARKS.md, "Path reservations and the pre-commit hook").
//
//   reservation_check --addr=host:port --reservations=10000 [--paths=1000]
//                     [--calls=200] [--agents=100] [--setup_clients=16]
//                     [--globbed=0]
//
// Registers --agents agents of one project and has them reserve
// --reservations exclusive paths spread over a tree (d<a>/d<b>/f<i>.cc, a
// and b in 0..99), then times --calls CheckReservations calls, each of
// --paths literal paths in shared mode as `hubctl reservations check
// --staged` sends them (one in ten a reserved file, the rest new files in
// the same directories). Prints one JSON line: setup rate, p50/p99/max
// latency in ms, conflicts per call. --globbed adds that many reservations
// of a pattern that begins with `**` (`**/g<i>.lock`): the prefix index
// cannot narrow those, so every check of the project reads them. Such a
// pattern overlaps every other one (each covers what lies below it), so
// with --globbed every reservation is shared (else they would conflict),
// and a shared check skips them after reading. hubd needs
// --max_reservations_per_agent=0 (or --agents large enough) for big runs.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"

ABSL_FLAG(std::string, addr, "", "hubd's host:port");
ABSL_FLAG(int, reservations, 10000, "live reservations to create first");
ABSL_FLAG(int, paths, 1000, "paths per check");
ABSL_FLAG(int, calls, 200, "checks to time");
ABSL_FLAG(int, agents, 100, "agents holding the reservations");
ABSL_FLAG(int, setup_clients, 16, "threads creating reservations");
ABSL_FLAG(int, globbed, 0,
          "more reservations, each of one `**/g<i>.lock` pattern");

namespace {

constexpr char kProject[] = "prj_hbCHECKBENCH0000000000";

std::string FileOf(int i) {
  return absl::StrCat("d", i % 100, "/d", (i / 100) % 100, "/f", i, ".cc");
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  return context;
}

int Run() {
  const std::string addr = absl::GetFlag(FLAGS_addr);
  const int n = absl::GetFlag(FLAGS_reservations);
  const int agents = std::max(1, absl::GetFlag(FLAGS_agents));
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto presence = hub::v1::PresenceService::NewStub(channel);
  for (int a = 0; a < agents; ++a) {
    hub::v1::RegisterAgentRequest r;
    r.set_agent_id(absl::StrCat("check-bench-", a));
    r.set_cli(hub::v1::AGENT_CLI_OTHER);
    r.set_project_id(kProject);
    hub::v1::RegisterAgentResponse reply;
    grpc::Status s = presence->RegisterAgent(Context().get(), r, &reply);
    if (!s.ok()) {
      std::fprintf(stderr, "register: %s\n", s.error_message().c_str());
      return 2;
    }
  }

  const absl::Time setup_start = absl::Now();
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < absl::GetFlag(FLAGS_setup_clients); ++t) {
    threads.emplace_back([&] {
      auto stub = hub::v1::ReservationService::NewStub(channel);
      const int globbed = absl::GetFlag(FLAGS_globbed);
      for (int i = next++; i < n + globbed; i = next++) {
        hub::v1::ReserveRequest r;
        r.set_project_id(kProject);
        r.set_agent_id(absl::StrCat("check-bench-", i % agents));
        r.add_patterns(i < n ? FileOf(i)
                             : absl::StrCat("**/g", i - n, ".lock"));
        if (globbed > 0) r.set_mode(hub::v1::RESERVATION_MODE_SHARED);
        r.mutable_ttl()->set_seconds(3600);
        hub::v1::ReserveResponse reply;
        grpc::Status s = stub->Reserve(Context().get(), r, &reply);
        if (!s.ok() && failed++ == 0) {
          std::fprintf(stderr, "reserve %s: %s\n", r.patterns(0).c_str(),
                       s.error_message().c_str());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double setup_s = absl::ToDoubleSeconds(absl::Now() - setup_start);
  if (failed > 0) {
    std::fprintf(stderr, "%d reservations failed\n", failed.load());
    return 2;
  }

  auto stub = hub::v1::ReservationService::NewStub(channel);
  std::mt19937 rng(19);
  std::uniform_int_distribution<int> any(0, std::max(n - 1, 0));
  std::uniform_int_distribution<int> dir(0, 99), tenth(0, 9);
  std::vector<double> ms;
  int64_t conflicts = 0;
  for (int call = 0; call < absl::GetFlag(FLAGS_calls); ++call) {
    hub::v1::CheckReservationsRequest r;
    r.set_project_id(kProject);
    r.set_agent_id("check-bench-committer");
    r.set_mode(hub::v1::RESERVATION_MODE_SHARED);
    r.set_literal(true);
    for (int p = 0; p < absl::GetFlag(FLAGS_paths); ++p) {
      if (n > 0 && tenth(rng) == 0) {
        r.add_patterns(FileOf(any(rng)));
      } else {
        r.add_patterns(absl::StrCat("d", dir(rng), "/d", dir(rng), "/new", call,
                                    "-", p, ".cc"));
      }
    }
    hub::v1::CheckReservationsResponse reply;
    const absl::Time start = absl::Now();
    grpc::Status s = stub->CheckReservations(Context().get(), r, &reply);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!s.ok()) {
      std::fprintf(stderr, "check: %s\n", s.error_message().c_str());
      return 2;
    }
    conflicts += reply.conflicts_size();
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "{\"workload\":\"reservation_check\",\"reservations\":%d,"
      "\"globbed\":%d,\"paths\":%d,"
      "\"calls\":%zu,\"setup_reserves_per_s\":%.0f,\"p50_ms\":%.2f,"
      "\"p99_ms\":%.2f,\"max_ms\":%.2f,\"conflicts_per_call\":%.1f}\n",
      n, absl::GetFlag(FLAGS_globbed), absl::GetFlag(FLAGS_paths), ms.size(),
      (n + absl::GetFlag(FLAGS_globbed)) / std::max(setup_s, 1e-9), at(0.50),
      at(0.99), ms.back(),
      static_cast<double>(conflicts) / std::max<size_t>(ms.size(), 1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_addr).empty()) {
    std::fprintf(stderr, "reservation_check: --addr is required\n");
    return 64;
  }
  return Run();
}
