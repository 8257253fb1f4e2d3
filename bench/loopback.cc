// iperf3 on loopback (see loopback.h).
#include "loopback.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/files.h"
#include "harness/ports.h"
#include "harness/subprocess.h"
#include "harness/wait.h"

namespace tessera::bench {

StatusOr<double> MeasureIperf3(double seconds) {
  using testing::SpawnOptions;
  using testing::Subprocess;
  TESSERA_ASSIGN_OR_RETURN(std::string dir, MakeTempDir("iperf-"));
  int port = testing::FreePort();
  SpawnOptions so;
  so.argv = {"/usr/bin/iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", std::to_string(port)};
  so.log_path = dir + "/server.log";
  TESSERA_ASSIGN_OR_RETURN(auto server, Subprocess::Spawn(so));
  StatusOr<double> result = Status::Unavailable("iperf3 did not run");
  for (int attempt = 0; attempt < 50 && !result.ok(); ++attempt) {
    SpawnOptions co;
    co.argv = {"/usr/bin/iperf3",
               "-c",
               "127.0.0.1",
               "-p",
               std::to_string(port),
               "-l",
               "1M",
               "-t",
               std::to_string(std::max(1, static_cast<int>(seconds + 0.5))),
               "-J"};
    co.log_path = dir + "/client" + std::to_string(attempt) + ".json";
    TESSERA_ASSIGN_OR_RETURN(auto client, Subprocess::Spawn(co));
    auto code = client->Wait(std::chrono::seconds(static_cast<int>(seconds) + 30));
    auto j = nlohmann::json::parse(client->Output(), nullptr, false);
    auto bps = j.is_discarded() ? nlohmann::json() : j["end"]["sum_received"]["bits_per_second"];
    if (code && *code == 0 && bps.is_number()) {
      result = bps.get<double>() / 8.0;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // server not listening yet
    }
  }
  server->Kill();
  (void)RemoveAll(dir);
  return result;
}

}  // namespace tessera::bench
