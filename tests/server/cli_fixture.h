// CliTest: the `tessera` command line as a user types it, against a real `tessera server` (on each
// database backend): a config directory of the test's own, the server's URL, helpers for the
// usual steps (sign up and log in, upload Fashion-MNIST, submit, read a job).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "common/files.h"
#include "common/strings.h"
#include "harness/wait.h"
#include "server/api_fixture.h"

namespace tessera::server {

inline const char* kImages = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
inline const char* kLabels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliTest : public ApiFixture {
 protected:
  struct Ran {
    int code = -1;
    std::string out;  // stdout and stderr
  };
  // `tessera ARGS`, with this test's config directory and the running server; `stdin_text`
  // (e.g. a password) is piped in through a shell.
  testing::SpawnOptions CliOptions(const std::vector<std::string>& args, const std::string& stdin_text = "") {
    testing::SpawnOptions o;
    if (stdin_text.empty()) {
      o.argv = {testing::BuildPath("src/tessera")};
      o.argv.insert(o.argv.end(), args.begin(), args.end());
    } else {
      std::string cmd =
          "printf '%s\\n' " + ShellQuote(stdin_text) + " | " + testing::BuildPath("src/tessera");
      for (const auto& a : args) cmd += " " + ShellQuote(a);
      o.argv = {"/bin/sh", "-c", cmd};
    }
    o.env = {{"TESSERA_CONFIG_DIR", dir_ + "/cfg"}, {"TESSERA_SERVER", url_}};
    o.log_path = dir_ + "/cli-" + std::to_string(runs_++) + ".log";
    o.cwd = cwd_.empty() ? dir_ : cwd_;
    return o;
  }
  Ran Cli(const std::vector<std::string>& args, const std::string& stdin_text = "", int seconds = 120) {
    auto p = testing::Subprocess::Spawn(CliOptions(args, stdin_text));
    EXPECT_TRUE(p.ok());
    if (!p.ok()) return {};
    auto code = (*p)->Wait(std::chrono::seconds(seconds));
    EXPECT_TRUE(code.has_value()) << "tessera " << Join(args, " ") << " did not end: " << (*p)->Output();
    return {code.value_or(-1), (*p)->Output()};
  }
  std::unique_ptr<testing::Subprocess> Start(const std::vector<std::string>& args) {
    auto p = testing::Subprocess::Spawn(CliOptions(args));
    EXPECT_TRUE(p.ok());
    return p.ok() ? std::move(*p) : nullptr;
  }
  void SignUpAndLogIn() {
    Ran up = Cli({"signup", "--password-stdin", "ada"}, "correct horse");
    ASSERT_EQ(up.code, 0) << up.out;
    Ran in = Cli({"login", "--password-stdin", "ada"}, "correct horse");
    ASSERT_EQ(in.code, 0) << in.out;
    ASSERT_TRUE(Has(in.out, "logged in to " + url_ + " as ada")) << in.out;
  }
  void UploadFm(const std::string& name = "fm") {
    Ran r = Cli({"datasets", "upload", name, "--format", "idx", "--images", kImages, "--labels", kLabels});
    ASSERT_EQ(r.code, 0) << r.out;
    ASSERT_TRUE(Has(r.out, "data set " + name + ": 10000 records")) << r.out;
  }
  std::string Token() {
    auto text = ReadFile(dir_ + "/cfg/login.json");
    return text.ok() ? Json::parse(*text).value("token", "") : "";
  }
  // The job id in `tessera submit`'s output.
  static std::string JobId(const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, std::regex("job ([a-z][a-z0-9-]*-[0-9a-f]{8}) queued")) ? m[1].str()
                                                                                             : "";
  }
  Json JobJson(const std::string& id) {
    Ran r = Cli({"jobs", id, "--json"});
    return r.code == 0 ? Json::parse(r.out.substr(r.out.find('{')), nullptr, false) : Json();
  }
  bool WaitJob(const std::string& id, const std::function<bool(const Json&)>& cond, int seconds) {
    return testing::WaitUntil([&] { return cond(JobJson(id)); }, std::chrono::seconds(seconds),
                              std::chrono::milliseconds(300));
  }
  // Uploaded bytes the server has of the unfinished upload of `name`.
  int64_t Received(const std::string& name) {
    Got g = Call("GET", "/api/v1/namespaces/ada/uploads", "", Token());
    int64_t n = 0;
    for (const auto& u : g.body.value("uploads", Json::array()))
      if (u.value("name", "") == name)
        for (const auto& [_, f] : u["files"].items()) n += f.value("received", int64_t{0});
    return n;
  }
  void WriteProject(bool ignore_big) {
    cwd_ = dir_ + "/project";
    std::filesystem::create_directories(cwd_ + "/data");
    std::filesystem::copy_file(std::string(TESSERA_SOURCE_DIR) + "/examples/fashion_mnist/train.py",
                               cwd_ + "/train.py", std::filesystem::copy_options::overwrite_existing);
    std::string noise(6 << 20, '\0');
    std::mt19937_64 rng(3);
    for (auto& c : noise) c = static_cast<char>(rng());
    std::ofstream(cwd_ + "/data/big.bin") << noise;
    if (ignore_big) std::ofstream(cwd_ + "/.tesseraignore") << "# data goes in data sets\ndata/\n";
  }
  std::string cwd_;
  int runs_ = 0;
};

}  // namespace tessera::server
