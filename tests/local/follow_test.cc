// Online learning under `tessera local --follow`: a click log lands in four slices (one uploaded,
// three appended with `tessera upload --append` while the job trains); every record is trained
// exactly once, `tessera export` takes the model while the job runs, and that model's AUC on
// held-out rows rises with each slice. The first Ctrl-C ends the job gracefully.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include "common/hash.h"
#include "coord/election.h"
#include "coord/keys.h"
#include "local/local_fixture.h"
#include "models/metrics.h"
#include "tessera/model_file.h"

namespace tessera::testing {
namespace {

constexpr int kSlices = 4;
constexpr int64_t kSliceRows = 20000;

// The AUC of an exported logreg model (bias + the "weights" rows of the hashed feature ids) on
// libsvm rows.
double AucOf(const models::ModelFile& m, const std::string& svm) {
  std::unordered_map<uint64_t, float> w;
  float bias = 0;
  for (const auto& t : m.tensors) {
    if (t.name == "bias" && !t.values.empty()) bias = t.values[0];
    if (t.name == "weights")
      for (size_t i = 0; i < t.keys.size(); ++i) w[t.keys[i]] = t.values[i];
  }
  std::vector<float> scores;
  std::vector<int> labels;
  std::ifstream in(svm);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string label, feature;
    s >> label;
    float z = bias;
    while (s >> feature) {
      const size_t colon = feature.find(':');
      auto it = w.find(Mix64(std::stoull(feature.substr(0, colon))));
      if (it != w.end()) z += it->second * std::stof(feature.substr(colon + 1));
    }
    scores.push_back(z);
    labels.push_back(std::stod(label) > 0 ? 1 : 0);
  }
  return models::Auc(scores, labels);
}

class FollowTest : public LocalTest {
 protected:
  // Trains on the slices as they land; with `kill_master`, the leading master is killed once it
  // took the second slice's chunks (with the trainers frozen, so none is handed out yet), and
  // the standby takes over the followed data set.
  void Run(bool kill_master);
};

void FollowTest::Run(bool kill_master) {
  auto g = Tessera({"gen-ctr", "--train-out", dir_ + "/train.svm", "--eval-out", dir_ + "/eval.svm", "--rows",
                    std::to_string(kSlices * kSliceRows), "--features", "200000"});
  ASSERT_EQ(g.code, 0) << g.out;
  // The slices, in the order they land.
  {
    std::ifstream in(dir_ + "/train.svm");
    std::string line;
    for (int k = 0; k < kSlices; ++k) {
      std::ofstream out(dir_ + "/slice" + std::to_string(k) + ".svm");
      for (int64_t n = 0; n < kSliceRows && std::getline(in, line); ++n) out << line << "\n";
    }
  }
  auto upload = [&](int k, bool append) {
    std::vector<std::string> args = {"upload",    "--store", store(),
                                     "--dataset", "ctr",     "--format",
                                     "libsvm",    "--input", dir_ + "/slice" + std::to_string(k) + ".svm"};
    if (append) args.push_back("--append");
    auto r = Tessera(args);
    EXPECT_EQ(r.code, 0) << r.out;
  };
  upload(0, false);
  auto e = Tessera({"upload", "--store", store(), "--dataset", "ctr-eval", "--format", "libsvm", "--input",
                    dir_ + "/eval.svm"});
  ASSERT_EQ(e.code, 0) << e.out;
  std::vector<std::string> args = {
      "--dataset",  "ctr",    "--eval-dataset", "ctr-eval",
      "--model",    "logreg", "--optimizer",    "ftrl:alpha=0.1,beta=0.01,l1=0.0003",
      "--trainers", "2",      "--follow",       "--job",
      "online"};
  if (kill_master) args.insert(args.end(), {"--standby-masters", "1"});
  Subprocess& p = StartLocal(args);
  auto etcd = JobEtcd();
  ASSERT_NE(etcd, nullptr);
  auto run_json = nlohmann::json::parse(*ReadFile(run() + "/run.json"));
  const std::string endpoint = run_json["etcd"];
  std::vector<double> aucs;
  int64_t tasks = 0;  // after the slices so far: the first one's (cut in record ranges), one per chunk since
  for (int k = 0; k < kSlices; ++k) {
    std::vector<pid_t> frozen;
    if (kill_master && k == 1) {
      // The trainers wait (frozen) while the leader takes the new chunks; then it dies, and the
      // standby, which read the manifest before they landed, must hand them out.
      for (const char* id : {"0", "1"}) {
        auto pid = static_cast<pid_t>(RegisteredPid(etcd.get(), keys::TrainerPrefix("online"), id));
        ASSERT_GT(pid, 0);
        ASSERT_EQ(::kill(pid, SIGSTOP), 0);
        frozen.push_back(pid);
      }
    }
    if (k > 0) upload(k, true);
    if (!frozen.empty()) {
      ASSERT_TRUE(WaitUntil([&] { return MasterStatus(etcd.get(), "online").tasks() == tasks + 3; },
                            std::chrono::seconds(60), std::chrono::milliseconds(50)))
          << LogsTail(30);
      auto leader = Election::Leader(etcd.get(), keys::MasterElectionPrefix("online"));
      ASSERT_TRUE(leader.ok() && leader->has_value());
      auto pid = static_cast<pid_t>(nlohmann::json::parse((*leader)->value)["pid"].get<int64_t>());
      ASSERT_EQ(::kill(pid, SIGKILL), 0);
      for (pid_t t : frozen) ::kill(t, SIGCONT);
      std::printf("[ follow ] killed the leading master (pid %d) once it took the new chunks\n",
                  static_cast<int>(pid));
    }
    // Everything that landed is trained on (and nothing more exists to train on): each appended
    // slice is 3 chunks, one task each.
    const int64_t landed = (k + 1) * kSliceRows;
    master::StatusReply st;
    ASSERT_TRUE(WaitUntil(
        [&] {
          st = MasterStatus(etcd.get(), "online");
          return (k == 0 ? st.tasks() > 0 : st.tasks() == tasks + 3) && st.done() == st.tasks() &&
                 (kill_master || st.samples() >= landed);
        },
        std::chrono::seconds(180), std::chrono::milliseconds(100)))
        << "slice " << k << ": " << st.done() << " of " << st.tasks() << " tasks, " << st.samples() << " of "
        << landed << " samples\n"
        << p.Output() << LogsTail(30);
    tasks = st.tasks();
    // Progress reports sent while no master leads are lost: samples count only without a kill.
    if (!kill_master) {
      EXPECT_EQ(st.samples(), landed) << "slice " << k << ": a record was trained twice";
    }
    // The model as it is now, taken while the job runs.
    const std::string out = dir_ + "/model" + std::to_string(k) + ".tsm";
    auto x = Tessera({"export", "--etcd", endpoint, "--job", "online", "--out", out});
    ASSERT_EQ(x.code, 0) << x.out;
    auto m = models::ReadModelFile(out);
    ASSERT_TRUE(m.ok()) << m.status();
    aucs.push_back(AucOf(*m, dir_ + "/eval.svm"));
    std::printf("[ follow ] %lld records landed and trained; exported model's AUC %.4f\n",
                static_cast<long long>(landed), aucs.back());
  }
  EXPECT_TRUE(p.running()) << "the job ended without being stopped";
  ASSERT_TRUE(p.Signal(SIGINT).ok());
  auto code = p.Wait(std::chrono::seconds(120));
  ASSERT_TRUE(code.has_value()) << p.Output();
  ASSERT_EQ(*code, 0) << p.Output() << LogsTail(30);
  EXPECT_NE(p.Output().find("taking no more new data"), std::string::npos) << p.Output();
  auto r = Result();
  if (!kill_master) {
    EXPECT_EQ(r["samples"].get<int64_t>(), kSlices * kSliceRows) << "every record exactly once";
  }
  EXPECT_EQ(r["tasks"].get<int64_t>(), tasks);
  EXPECT_EQ(r["failed_tasks"], 0);
  for (int k = 1; k < kSlices; ++k) EXPECT_GT(aucs[k], aucs[k - 1]) << "slice " << k;
  const std::string logs = LogsTail(400);
  EXPECT_NE(logs.find("following ctr: 3 new chunks (20000 records)"), std::string::npos) << logs;
}

TEST_F(FollowTest, AFollowingJobTrainsOnceOnEveryAppendedRecordAndItsExportsImprove) { Run(false); }

TEST_F(FollowTest, ANewMasterGoesOnFollowingWhereTheOldOneStopped) { Run(true); }

}  // namespace
}  // namespace tessera::testing
