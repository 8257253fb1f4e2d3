// sandbox_bench: what the platform's job sandbox costs (docs/security.md, "Sandboxes"). Two real
// `tessera server`s on this machine, one running jobs in sandboxes (--sandbox on, the default: a
// user of its own, namespaces, a control group with its quota) and one without (--sandbox off),
// each with Fashion-MNIST's training set uploaded; the same built-in mlp job (1 pserver, 1
// trainer, sync) submitted to each in turn, `--pairs` times. Per run: the start (submitted ->
// its master answers) and the trainer's samples/s (from its log: joined -> trainer done).
// Prints a Markdown table and the mean ratios. Needs root (the sandboxes do).
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "common/net.h"
#include "common/strings.h"
#include "harness/log_lines.h"
#include "harness/subprocess.h"
#include "harness/wait.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::BuildPath;

class Server {
 public:
  static StatusOr<std::unique_ptr<Server>> Start(const std::string& dir, bool sandbox) {
    auto s = std::unique_ptr<Server>(new Server());
    s->dir_ = dir;
    std::error_code ec;
    if (!std::filesystem::create_directories(dir, ec) && ec)
      return Status::Unavailable("cannot make " + dir + ": " + ec.message());
    const int port = FreeLoopbackPort();
    testing::SpawnOptions o;
    o.argv = {BuildPath("src/tessera"),
              "server",
              "--port",
              std::to_string(port),
              "--data-dir",
              dir + "/data",
              "--sandbox",
              sandbox ? "on" : "off"};
    o.log_path = dir + "/server.log";
    TESSERA_ASSIGN_OR_RETURN(s->proc_, testing::Subprocess::Spawn(o));
    if (!s->proc_->WaitForOutput("API at http", std::chrono::seconds(30)))
      return Status::Unavailable("the server did not start: " + s->proc_->Output());
    s->url_ = "http://127.0.0.1:" + std::to_string(port);
    s->http_ = std::make_unique<httplib::Client>("127.0.0.1", port);
    s->http_->set_read_timeout(60, 0);
    // An account, and Fashion-MNIST's training set through the command line.
    s->Post("/api/v1/signup", {{"name", "ada"}, {"password", "correct horse"}});
    s->token_ = s->Post("/api/v1/login", {{"name", "ada"}, {"password", "correct horse"}}).value("token", "");
    testing::SpawnOptions up;
    up.argv = {BuildPath("src/tessera"),
               "datasets",
               "upload",
               "fm",
               "--format",
               "idx",
               "--images",
               "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               "--labels",
               "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"};
    up.env = {
        {"TESSERA_SERVER", s->url_}, {"TESSERA_TOKEN", s->token_}, {"TESSERA_CONFIG_DIR", dir + "/cfg"}};
    up.log_path = dir + "/upload.log";
    TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(up));
    if (p->Wait(std::chrono::minutes(5)).value_or(1) != 0) return Status::Internal("upload: " + p->Output());
    return s;
  }
  Json Post(const std::string& path, const Json& body) {
    httplib::Headers h;
    if (!token_.empty()) h.emplace("Authorization", "Bearer " + token_);
    auto r = http_->Post(path, h, body.dump(), "application/json");
    return r ? Json::parse(r->body, nullptr, false) : Json();
  }
  Json Get(const std::string& path) {
    auto r = http_->Get(path, {{"Authorization", "Bearer " + token_}});
    return r ? Json::parse(r->body, nullptr, false) : Json();
  }
  ~Server() {
    if (proc_) proc_->Terminate(std::chrono::seconds(10));
  }

  struct Run {
    double start_s = 0, samples_per_s = 0;
  };
  StatusOr<Run> Job(int passes) {
    const Json j = Post("/api/v1/namespaces/ada/jobs", {{"model", "mlp"},
                                                        {"dataset", "fm"},
                                                        {"passes", passes},
                                                        {"trainers", 1},
                                                        {"pservers", 1},
                                                        {"optimizer", "adam:lr=0.001"}});
    const std::string id = j.value("id", "");
    if (id.empty()) return Status::Internal("submit: " + j.dump());
    Json done;
    if (!testing::WaitUntil(
            [&] {
              done = Get("/api/v1/jobs/" + id);
              return done.value("ended_ms", Json()).is_number();
            },
            std::chrono::minutes(10), std::chrono::milliseconds(200)) ||
        done.value("state", "") != "succeeded")
      return Status::Internal("job " + id + ": " + done.dump().substr(0, 2000));
    Run r;
    for (const auto& e : done["events"])
      if (e.value("state", "") == "running")
        r.start_s = (e.value("time_ms", int64_t{0}) - done.value("submitted_ms", int64_t{0})) / 1e3;
    const std::string log = Get("/api/v1/jobs/" + id + "/logs/trainer-0?tail=10000").value("text", "");
    double first = 0, last = 0;
    int64_t samples = 0;
    std::smatch m;
    for (const auto& line : Split(log, '\n')) {
      if (line.find(" joined ") != std::string::npos && first == 0) first = testing::LogLineSeconds(line);
      if (std::regex_search(line, m, std::regex("trainer done: \\d+ steps, (\\d+) samples"))) {
        last = testing::LogLineSeconds(line);
        samples = std::stoll(m[1]);
      }
    }
    if (samples == 0 || last <= first) return Status::Internal("no trainer times in job " + id + "'s log");
    r.samples_per_s = samples / (last - first);
    return r;
  }

 private:
  Server() = default;
  std::string dir_, url_, token_;
  std::unique_ptr<testing::Subprocess> proc_;
  std::unique_ptr<httplib::Client> http_;
};

int Main(int argc, char** argv) {
  CLI::App app{"sandbox_bench: a 1x1 job's start and samples/s with and without the platform's sandbox"};
  int pairs = 5, passes = 3;
  app.add_option("--pairs", pairs, "runs of each, alternated")->capture_default_str();
  app.add_option("--passes", passes, "passes over Fashion-MNIST's 60,000 training images")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (::geteuid() != 0) {
    std::printf("sandbox_bench: skipped: sandboxes need root\n");
    return 0;
  }
  auto dir = MakeTempDir("sandbox-bench-");
  if (!dir.ok()) return 1;
  auto on = Server::Start(*dir + "/on", true), off = Server::Start(*dir + "/off", false);
  if (!on.ok() || !off.ok()) {
    std::fprintf(stderr, "sandbox_bench: %s\n", (!on.ok() ? on.status() : off.status()).ToString().c_str());
    return 1;
  }
  std::printf(
      "| pair | sandboxed: start s | samples/s | unconfined: start s | samples/s | samples/s ratio |\n"
      "|---|---|---|---|---|---|\n");
  std::vector<double> ratios, starts_on, starts_off;
  for (int i = 1; i <= pairs; ++i) {
    auto a = (*on)->Job(passes);
    auto b = (*off)->Job(passes);
    if (!a.ok() || !b.ok()) {
      std::printf("| %d | failed: %s |\n", i, (!a.ok() ? a.status() : b.status()).ToString().c_str());
      continue;
    }
    ratios.push_back(a->samples_per_s / b->samples_per_s);
    starts_on.push_back(a->start_s);
    starts_off.push_back(b->start_s);
    std::printf("| %d | %.2f | %.0f | %.2f | %.0f | %.3f |\n", i, a->start_s, a->samples_per_s, b->start_s,
                b->samples_per_s, ratios.back());
    std::fflush(stdout);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / v.size();
  };
  std::printf(
      "\nmean samples/s ratio (sandboxed / unconfined): %.3f over %zu pairs; start: %.2f s against %.2f s\n",
      mean(ratios), ratios.size(), mean(starts_on), mean(starts_off));
  on->reset();
  off->reset();
  (void)RemoveAll(*dir);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) { return tessera::bench::Main(argc, argv); }
