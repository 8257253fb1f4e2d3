// task_consumer: a trainer-like process for the master tests. It reads records through a
// tessera::Reader, says every --batch records that they were trained, and prints one line per
// task it starts ("TASK <pass> <id> <epoch>") and a summary at the end ("RECORDS n",
// "STATS done failed stale", "SPLITS n" (tasks it was told to stop early), "AHEAD n" (tasks fetched
// ahead), "DONE"). With --hold-after N it
// stops after N records and holds its task until killed. Test-only.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "tessera/reader.h"

using namespace tessera;

int main(int argc, char** argv) {
  CLI::App app{"task consumer for tests"};
  std::string etcd, job;
  int batch = 50, sleep_ms = 0;
  int64_t hold_after = -1;
  app.add_option("--etcd", etcd)->required();
  app.add_option("--job", job)->required();
  app.add_option("--batch", batch);
  app.add_option("--sleep-ms", sleep_ms, "pause per batch");
  app.add_option("--hold-after", hold_after, "stop after this many records and hold the task");
  CLI11_PARSE(app, argc, argv);
  ReaderOptions o;
  o.connection.etcd_endpoints = {etcd};
  o.connection.job = job;
  o.lease_ttl_seconds = 2;
  o.request_timeout = std::chrono::seconds(60);
  auto reader = Reader::Open(o);
  if (!reader.ok()) {
    std::printf("ERROR %s\n", reader.status().ToString().c_str());
    return 2;
  }
  std::string rec;
  int64_t n = 0;
  std::pair<int64_t, int64_t> last{-1, -1};
  while (!(*reader)->finished()) {
    auto more = (*reader)->Next(&rec);
    if (!more.ok()) {
      std::printf("ERROR %s\n", more.status().ToString().c_str());
      return 2;
    }
    if (!*more) {  // nothing now: "train" the partial batch, acknowledge, ask again shortly
      if (Status s = (*reader)->Trained(); !s.ok()) {
        std::printf("ERROR %s\n", s.ToString().c_str());
        return 2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto t = (*reader)->current_task();
    if (t != last) {
      std::printf("TASK %d %lld %lld\n", (*reader)->pass(), static_cast<long long>(t.first),
                  static_cast<long long>(t.second));
      std::fflush(stdout);
      last = t;
    }
    ++n;
    if (hold_after >= 0 && n >= hold_after) {
      std::printf("HOLDING\n");
      std::fflush(stdout);
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (n % batch == 0) {
      if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
      if (Status s = (*reader)->Trained(); !s.ok()) {
        std::printf("ERROR %s\n", s.ToString().c_str());
        return 2;
      }
    }
  }
  auto st = (*reader)->stats();
  std::printf("RECORDS %lld\nSTATS %lld %lld %lld\nSPLITS %lld\nAHEAD %lld\nDONE\n",
              static_cast<long long>(n), static_cast<long long>(st.tasks_done),
              static_cast<long long>(st.tasks_failed), static_cast<long long>(st.stale),
              static_cast<long long>(st.splits), static_cast<long long>(st.fetched_ahead));
  return 0;
}
