// Fixture for `tessera local` tests: a temp directory with a store, helpers to upload data sets
// and to run `tessera local` as a process. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "client/master_client.h"
#include "common/files.h"
#include "coord/etcd_client.h"
#include "coord/keys.h"
#include "data/data_fixture.h"
#include "harness/job_probe.h"
#include "harness/subprocess.h"
#include "harness/wait.h"
#include "job/job_config.h"
#include "tessera/model_file.h"

namespace tessera::testing {

// The weights (4, then the bias) of WriteLinearData's records.
inline const std::vector<float> kLinearTruth = {2.0f, -3.0f, 0.5f, 1.0f, 0.7f};

class LocalTest : public TempDirTest {
 protected:
  // 8000 records "x1,x2,x3,x4,y" with y = kLinearTruth . (x, 1) + a little noise, for
  // examples/c/linreg.c and tests/python/linreg.py.
  static void WriteLinearData(const std::string& path) {
    std::ofstream f(path);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::normal_distribution<float> noise(0, 0.01f);
    for (int i = 0; i < 8000; ++i) {
      float x[4], y = kLinearTruth[4] + noise(rng);
      for (int j = 0; j < 4; ++j) {
        x[j] = u(rng);
        y += kLinearTruth[j] * x[j];
      }
      f << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << "," << y << "\n";
    }
  }

  std::string store() const { return dir_ + "/store"; }

  // A `tessera gen-ctr` click log (`gen_args` after the output files) uploaded as data sets "ctr"
  // (with `upload_args`) and "ctr-eval"; returns the best achievable AUC gen-ctr printed.
  double UploadCtr(const std::vector<std::string>& gen_args,
                   const std::vector<std::string>& upload_args = {}) {
    std::vector<std::string> gen = {"gen-ctr", "--train-out", dir_ + "/train.svm", "--eval-out",
                                    dir_ + "/eval.svm"};
    gen.insert(gen.end(), gen_args.begin(), gen_args.end());
    auto g = Tessera(gen);
    EXPECT_EQ(g.code, 0) << g.out;
    size_t at = g.out.find("best achievable AUC on the evaluation rows: ");
    EXPECT_NE(at, std::string::npos) << g.out;
    std::vector<std::string> up = {"upload",   "--store", store(),   "--dataset",        "ctr",
                                   "--format", "libsvm",  "--input", dir_ + "/train.svm"};
    up.insert(up.end(), upload_args.begin(), upload_args.end());
    auto a = Tessera(up);
    EXPECT_EQ(a.code, 0) << a.out;
    auto b = Tessera({"upload", "--store", store(), "--dataset", "ctr-eval", "--format", "libsvm", "--input",
                      dir_ + "/eval.svm"});
    EXPECT_EQ(b.code, 0) << b.out;
    return at == std::string::npos ? 0 : std::stod(g.out.substr(at + 44));
  }
  std::string run() const { return dir_ + "/" + run_name_; }

  // WriteLinearData's records as data set "lin": `format` "text" (lines), or "csv" (the label in
  // the last column).
  void UploadLinearData(const std::string& format) {
    WriteLinearData(dir_ + "/lin.csv");
    std::vector<std::string> args = {"upload",   "--store", store(),   "--dataset",       "lin",
                                     "--format", format,    "--input", dir_ + "/lin.csv", "--chunk-size",
                                     "32768"};
    if (format == "csv") args.insert(args.end(), {"--label-column", "4"});
    auto up = Tessera(args);
    ASSERT_EQ(up.code, 0) << up.out;
  }
  // The finished run's model holds "w" = kLinearTruth, each within `tolerance`.
  void ExpectLinearTruthLearned(float tolerance) {
    auto m = models::ReadModelFile(Result()["model"].get<std::string>());
    ASSERT_TRUE(m.ok()) << m.status();
    const auto* w = m->Find("w");
    ASSERT_NE(w, nullptr);
    ASSERT_EQ(w->values.size(), kLinearTruth.size());
    for (size_t j = 0; j < kLinearTruth.size(); ++j)
      EXPECT_NEAR(w->values[j], kLinearTruth[j], tolerance) << "w[" << j << "]";
  }

  void UploadFashionMnist(bool test_set = true) {
    const std::string f = "/usr/share/datasets/fashion-mnist/";
    auto a = Tessera({"upload", "--store", store(), "--dataset", "fm", "--format", "idx", "--images",
                      f + "train-images-idx3-ubyte.gz", "--labels", f + "train-labels-idx1-ubyte.gz"});
    ASSERT_EQ(a.code, 0) << a.out;
    if (test_set) {
      auto b = Tessera({"upload", "--store", store(), "--dataset", "fm-test", "--format", "idx", "--images",
                        f + "t10k-images-idx3-ubyte.gz", "--labels", f + "t10k-labels-idx1-ubyte.gz"});
      ASSERT_EQ(b.code, 0) << b.out;
    }
  }

  // Starts `tessera local` with `args` (after --run, --store and --lease-ttl) as a process, with
  // `env` beside the build directory in its environment.
  Subprocess& StartLocal(const std::vector<std::string>& args, int lease_ttl = 3,
                         const std::map<std::string, std::string>& env = {}) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera"), "local", "--run", run(), "--store", store(), "--lease-ttl",
              std::to_string(lease_ttl)};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_path = dir_ + "/local" + std::to_string(starts_++) + ".log";  // one per run: Output() is its own
    o.env = env;
    o.env["TESSERA_BUILD_DIR"] = BuildPath("");
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    local_ = std::move(*p);
    return *local_;
  }

  // Runs `tessera local` with `args` (StartLocal's) as run `name` to its end, and reads the model
  // it saved (nullopt, with the failure recorded, when it failed).
  std::optional<models::ModelFile> TrainToModel(const std::string& name, const std::vector<std::string>& args,
                                                const std::map<std::string, std::string>& env = {}) {
    run_name_ = name;
    Subprocess& p = StartLocal(args, 3, env);
    auto code = p.Wait(std::chrono::seconds(240));
    EXPECT_TRUE(code.has_value() && *code == 0) << p.Output() << LogsTail(30);
    auto m = models::ReadModelFile(run() + "/model.tsm");
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return std::nullopt;
    return *m;
  }

  // result.json of the finished run.
  nlohmann::json Result() {
    auto text = ReadFile(run() + "/result.json");
    EXPECT_TRUE(text.ok()) << "no result.json; tessera local said:\n" << (local_ ? local_->Output() : "");
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json::object();
  }

  // An etcd client for the running job (from run.json; with `pid`, once the run.json of that
  // `tessera local` process is written, not an earlier run's).
  std::unique_ptr<etcd::EtcdClient> JobEtcd(int64_t pid = 0) {
    auto written = [&] {
      auto text = ReadFile(run() + "/run.json");
      if (!text.ok()) return false;
      auto j = nlohmann::json::parse(*text, nullptr, false);
      return !j.is_discarded() && (pid == 0 || j.value("pid", int64_t{0}) == pid);
    };
    if (!WaitUntil(written, std::chrono::seconds(60))) return nullptr;
    auto j = nlohmann::json::parse(*ReadFile(run() + "/run.json"));
    etcd::EtcdOptions o;
    o.endpoints = {j["etcd"].get<std::string>()};
    return std::move(*etcd::EtcdClient::Create(o));
  }

  // The last lines of every process log of the run, for failure messages.
  std::string LogsTail(size_t lines = 15) {
    std::string out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(run() + "/logs", ec)) {
      auto text = ReadFile(e.path().string());
      if (!text.ok()) continue;
      size_t pos = text->size();
      for (size_t n = 0; n <= lines && pos > 0 && pos != std::string::npos; ++n)
        pos = text->rfind('\n', pos - 1);
      out += "--- " + e.path().filename().string() + " ---\n" +
             text->substr(pos == std::string::npos ? 0 : pos) + "\n";
    }
    return out;
  }

  // The job's master status (an empty reply while none answers).
  master::StatusReply MasterStatus(etcd::EtcdClient* etcd, const std::string& job) {
    return MasterStatusOf(etcd, job);
  }

  // Bit for bit the same parameters, at the same step.
  static void ExpectSameParameters(const models::ModelFile& a, const models::ModelFile& b) {
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    ASSERT_EQ(a.step, b.step);
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      const auto& ta = a.tensors[i];
      const auto& tb = b.tensors[i];
      ASSERT_EQ(ta.name, tb.name);
      ASSERT_EQ(ta.values.size(), tb.values.size()) << ta.name;
      size_t differ = 0;
      for (size_t k = 0; k < ta.values.size(); ++k)
        differ += std::memcmp(&ta.values[k], &tb.values[k], 4) != 0;
      EXPECT_EQ(differ, 0u) << ta.name << ": " << differ << " of " << ta.values.size() << " values differ";
    }
  }

  std::unique_ptr<Subprocess> local_;
  std::string run_name_ = "run";  // the run directory under the temp dir
  int starts_ = 0;
};

}  // namespace tessera::testing
