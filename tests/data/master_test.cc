// The master with real etcd, master processes and consumer processes: a standby takes over
// when the leader is killed and no task is lost; a killed trainer's tasks come back within its
// lease TTL; a corrupt chunk fails its task with the reason; a restarted master continues from
// etcd; the state of 100,000 chunks fits in etcd.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "client/master_client.h"
#include "client/progress_reporter.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/net.h"
#include "common/random.h"
#include "coord/election.h"
#include "coord/etcd_fixture.h"
#include "coord/keys.h"
#include "coord/registry.h"
#include "dataset/dataset.h"
#include "harness/pids.h"
#include "harness/raw_http.h"
#include "harness/subprocess.h"
#include "job/job_config.h"
#include "job/job_store.h"
#include "job/slot_map.h"
#include "tessera/reader.h"

namespace tessera::testing {
namespace {

class MasterTest : public EtcdTest {
 protected:
  void SetUp() override {
    EtcdTest::SetUp();
    auto d = MakeTempDir("master-test-");
    ASSERT_TRUE(d.ok());
    dir_ = *d;
    JobConfig c;
    c.token = NewUuid();
    token_ = c.token;
    secret_ = security::JobSecret::Generate();
    ASSERT_TRUE(client_->Commit(CreateJobTxn(kJob, &c, secret_)).ok());
  }
  void TearDown() override {
    procs_.clear();
    (void)RemoveAll(dir_);
  }

  // A text data set of `lines` lines in chunks of ~`chunk` bytes.
  void MakeDataset(const std::string& name, int lines, int chunk) {
    dataset::WriterOptions o;
    o.parts = 3;
    o.chunk_bytes = static_cast<size_t>(chunk);
    auto w = dataset::DatasetWriter::Create(dir_ + "/store", name, "text", "line", o);
    ASSERT_TRUE(w.ok()) << w.status();
    for (int i = 0; i < lines; ++i)
      ASSERT_TRUE((*w)->Add("record " + std::to_string(i) + " " + std::string(40, 'x')).ok());
    ASSERT_TRUE((*w)->Commit(nlohmann::json::object()).ok());
  }

  Subprocess& StartMaster(const std::string& dataset, std::vector<std::string> extra = {}) {
    SpawnOptions o;
    o.argv = {BuildPath("src/tessera"), "master",    "--etcd", server_->endpoint(), "--job", kJob, "--store",
              dir_ + "/store",          "--dataset", dataset,  "--lease-ttl",       "2"};
    // These tests count tasks as chunks: one chunk a task unless a test says otherwise.
    if (std::find(extra.begin(), extra.end(), "--chunks-per-task") == extra.end())
      o.argv.insert(o.argv.end(), {"--chunks-per-task", "1"});
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.log_path = dir_ + "/master" + std::to_string(procs_.size()) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    procs_.push_back(std::move(*p));
    return *procs_.back();
  }

  // A data set "d" of 600 records, trainer t0 registered as a trainer registers (the master
  // returns the tasks of a trainer that is not registered whenever the trainers change, which on
  // a loaded machine can come after its first task was handed out), and a master for one pass.
  void StartOnePassWithTrainerT0() {
    MakeDataset("d", 600, 4096);
    auto lease = client_->GrantLease(60);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(Registry(client_.get(), keys::TrainerPrefix(kJob)).Register("t0", "{}", lease->id).ok());
    StartMaster("d", {"--passes", "1"});
  }

  Subprocess& StartConsumer(std::vector<std::string> extra = {}) {
    SpawnOptions o;
    o.argv = {BuildPath("tests/task_consumer"), "--etcd", server_->endpoint(), "--job", kJob};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.log_path = dir_ + "/consumer" + std::to_string(procs_.size()) + ".log";
    auto p = Subprocess::Spawn(o);
    EXPECT_TRUE(p.ok());
    procs_.push_back(std::move(*p));
    return *procs_.back();
  }

  // A reader of the job registering its own trainer id, or null (the test fails).
  std::unique_ptr<Reader> OpenReader() {
    ReaderOptions o;
    o.connection.etcd_endpoints = {server_->endpoint()};
    o.connection.job = kJob;
    o.lease_ttl_seconds = 5;
    auto r = Reader::Open(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  }

  // The pid of the leading master, or 0.
  int64_t LeaderPid() {
    auto l = Election::Leader(client_.get(), keys::MasterElectionPrefix(kJob));
    if (!l.ok() || !l->has_value()) return 0;
    return nlohmann::json::parse((*l)->value)["pid"].get<int64_t>();
  }

  master::StatusReply MasterStatus() {
    master::MasterClient mc(client_.get(), kJob, token_, secret_);
    auto s = mc.GetStatus(Deadline(std::chrono::seconds(20)));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.value_or(master::StatusReply());
  }

  // Whether the master's pending tasks become `want` within 20 s (else how many there were).
  ::testing::AssertionResult PendingBecomes(int64_t want) {
    int64_t pending = 0;
    if (WaitUntil(
            [&] {
              pending = MasterStatus().pending();
              return pending == want;
            },
            std::chrono::seconds(20)))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "tasks held: " << pending;
  }

  // (pass, task) pairs a consumer started, from its "TASK pass id epoch" lines.
  static std::vector<std::pair<int, int64_t>> TasksOf(Subprocess& p) {
    std::vector<std::pair<int, int64_t>> out;
    std::istringstream in(p.Output());
    std::string word;
    while (in >> word) {
      if (word != "TASK") continue;
      int pass;
      int64_t id, epoch;
      in >> pass >> id >> epoch;
      out.emplace_back(pass, id);
    }
    return out;
  }

  const std::string kJob = "mjob";
  std::string dir_, token_;
  security::JobSecret secret_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

// Task calls from a process without the job's secret, or with another job's, are refused and
// leave the queue as it was; the refusals are counted in the master's /metrics.
TEST_F(MasterTest, TaskCallsWithoutTheJobSecretOrWithAnotherJobsAreRefusedAndTheQueueIsUnchanged) {
  ASSERT_NO_FATAL_FAILURE(StartOnePassWithTrainerT0());
  master::MasterClient job_client(client_.get(), kJob, token_, secret_);
  auto first = job_client.GetTask("t0", Deadline(std::chrono::seconds(30)));
  ASSERT_TRUE(first.ok()) << first.status();
  const auto before = MasterStatus();
  for (const auto& secret : {security::JobSecret(), security::JobSecret::Generate()}) {
    master::MasterClient intruder(client_.get(), kJob, token_, secret);
    const Deadline d(std::chrono::seconds(20));
    auto task = intruder.GetTask("t9", d);
    ASSERT_FALSE(task.ok());
    EXPECT_EQ(task.status().code(), StatusCode::kUnauthenticated) << task.status();
    // Finishing or failing the job client's own task: refused too, the task stays pending.
    auto fin = intruder.Finish("t0", first->task().id(), first->task().epoch(), d);
    EXPECT_EQ(fin.status().code(), StatusCode::kUnauthenticated) << fin.status();
    auto fail = intruder.Fail("t0", first->task().id(), first->task().epoch(), "forged", d);
    EXPECT_EQ(fail.status().code(), StatusCode::kUnauthenticated) << fail.status();
    EXPECT_EQ(intruder.GetStatus(d).status().code(), StatusCode::kUnauthenticated);
  }
  const auto after = MasterStatus();
  EXPECT_EQ(after.todo(), before.todo());
  EXPECT_EQ(after.pending(), before.pending());
  EXPECT_EQ(after.done(), before.done());
  EXPECT_EQ(after.failed(), before.failed());
  auto fin =
      job_client.Finish("t0", first->task().id(), first->task().epoch(), Deadline(std::chrono::seconds(30)));
  ASSERT_TRUE(fin.ok()) << fin.status();
  EXPECT_TRUE(*fin) << "the job's own trainer finishes its task";
}

// A trainer whose GetTask answer was lost (its call timed out while the master dispatched, or the
// master died before answering) asks again listing what it holds: the master hands it the same
// task, not a new one while that one waits out its timeout (60 s by default; at a pass's end
// every trainer waits for it). A reader that lists nothing (an older one) is answered as before.
TEST_F(MasterTest, ATaskWhoseAnswerWasLostIsHandedToItsTrainerAgain) {
  ASSERT_NO_FATAL_FAILURE(StartOnePassWithTrainerT0());
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  const Deadline d(std::chrono::seconds(30));
  const std::vector<std::pair<int64_t, int64_t>> none;
  auto lost = mc.GetTask("t0", d, &none);
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_EQ(lost->kind(), master::GetTaskReply::TASK);
  auto again = mc.GetTask("t0", d, &none);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->kind(), master::GetTaskReply::TASK);
  EXPECT_EQ(again->task().id(), lost->task().id());
  EXPECT_EQ(again->task().epoch(), lost->task().epoch());
  EXPECT_EQ(again->task().chunks_size(), lost->task().chunks_size());
  // Listed as held: the next one is new.
  const std::vector<std::pair<int64_t, int64_t>> held = {{lost->task().id(), lost->task().epoch()}};
  auto next = mc.GetTask("t0", d, &held);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->kind(), master::GetTaskReply::TASK);
  EXPECT_NE(next->task().id(), lost->task().id());
  // Not listing at all: a new one too, as before.
  auto old_style = mc.GetTask("t0", d);
  ASSERT_TRUE(old_style.ok()) << old_style.status();
  EXPECT_NE(old_style->task().id(), lost->task().id());
  EXPECT_NE(old_style->task().id(), next->task().id());
  auto fin = mc.Finish("t0", lost->task().id(), lost->task().epoch(), d);
  ASSERT_TRUE(fin.ok()) << fin.status();
  EXPECT_TRUE(*fin) << "the task handed again is the same dispatch: its acknowledgement counts";
  const auto st = MasterStatus();
  EXPECT_EQ(st.pending(), 2) << "the two new tasks; the one handed again counted once";
  EXPECT_EQ(st.done(), 1);
}

// A trainer's progress report goes on a thread of its own: while no master answers (one failing
// over), the training loop goes on, and what the report carried reaches the master later. Before,
// each report held the loop until the master answered or 10 s passed.
TEST_F(MasterTest, ProgressReportsDoNotHoldTheTrainingLoopWhileNoMasterAnswers) {
  MakeDataset("d", 600, 4096);
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  {
    master::ProgressReporter reporter(&mc, "t0");
    const auto start = Now();
    reporter.Add(32, 16.0, 1, 0);
    reporter.FlushPending();  // no master yet
    const double held = std::chrono::duration<double>(Now() - start).count();
    EXPECT_LT(held, 5.0) << "the loop waited " << held << " s for a master that is not there";
    StartMaster("d", {"--passes", "1"});
    reporter.Add(32, 16.0, 2, 0);
    reporter.Flush();  // waits for the first report, then sends the rest
  }
  EXPECT_EQ(MasterStatus().samples(), 64) << "both reports' samples, the first delivered late or sent again";
}

// Reading a task's records does not wait for each report to the master: with the master gone (as
// while one fails over), the reader waits once, for the report it may not read past unanswered,
// and then reads on. Before, every task-progress report (4 a second) held the reader for its 2 s
// deadline, and 4 records a step of 300 ms took over 6 s.
TEST_F(MasterTest, ATaskIsReadOnWhileNoMasterAnswersItsProgressReports) {
  MakeDataset("d", 2000, 4096);
  Subprocess& master = StartMaster("d");
  auto reader = OpenReader();
  ASSERT_TRUE(reader);
  std::string rec;
  auto got = reader->Next(&rec);
  ASSERT_TRUE(got.ok() && *got) << (got.ok() ? "no record" : got.status().ToString());
  master.Kill();
  const auto start = Now();
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a step's training
    auto more = reader->NextInTask(&rec);
    ASSERT_TRUE(more.ok()) << more.status();
    ASSERT_TRUE(*more) << "the task has more records";
  }
  const double took = std::chrono::duration<double>(Now() - start).count();
  // At most once, for one report's deadline (2 s): the reader may not read past where a report
  // said it would be until that report is answered or failed. Each report held it before.
  EXPECT_LT(took, 4.5) << "4 steps of 0.3 s took " << took << " s: the reader waited for the master";
}

// A task-progress report is answered while its reader reads on, but the reader never reads past
// the cut the answer names: it tells the master how far it may read before it sees the answer,
// the master cuts no sooner, and the reader waits for the answer there. Before, a reader that
// took a batch at once read on past the cut, and the records after it were trained twice, by
// it and by the idle trainer (a Wide & Deep job counted 60,099 samples for 60,000).
TEST_F(MasterTest, AReaderTakingABatchAtOnceStopsAtTheCutAndNoRecordIsReadTwice) {
  MakeDataset("d", 2000, 1 << 20);  // one chunk, cut into 2 tasks of 1000 records
  auto lease = client_->GrantLease(60);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(Registry(client_.get(), keys::TrainerPrefix(kJob)).Register("t1", "{}", lease->id).ok());
  Subprocess& m = StartMaster("d", {"--passes", "1", "--min-tasks", "2", "--min-task-records", "50"});
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  const Deadline d(std::chrono::seconds(30));
  auto other = mc.GetTask("t1", d);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->kind(), master::GetTaskReply::TASK);
  auto reader = OpenReader();
  ASSERT_TRUE(reader);
  std::string rec;
  auto got = reader->Next(&rec);
  ASSERT_TRUE(got.ok() && *got) << (got.ok() ? "no record" : got.status().ToString());
  // t1 trains its task and asks for another: none is left, it is idle.
  auto fin = mc.Finish("t1", other->task().id(), other->task().epoch(), d);
  ASSERT_TRUE(fin.ok() && *fin) << (fin.ok() ? "refused" : fin.status().ToString());
  auto idle = mc.GetTask("t1", d);
  ASSERT_TRUE(idle.ok()) << idle.status();
  ASSERT_EQ(idle->kind(), master::GetTaskReply::WAIT);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a step's training: a report is due
  int64_t read = 1;
  for (int i = 0; i < 2000; ++i) {  // the rest of the task at once, as a batch is taken
    auto more = reader->NextInTask(&rec);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ++read;
  }
  std::smatch cut;
  std::string log;
  ASSERT_TRUE(WaitUntil(
      [&] {
        log = m.Output();
        return std::regex_search(log, cut, std::regex("the records from (\\d+) on split off"));
      },
      std::chrono::seconds(20)))
      << log;
  EXPECT_EQ(read, std::stoll(cut[1]))
      << "the reader read " << read << " records of its task, the master cut it at " << cut[1] << ":\n"
      << log;
  EXPECT_EQ(reader->stats().splits, 1);
}

// A task that takes longer than the task timeout stays with a trainer that reports progress on
// it (as every reader does, several times a second). Before, it was handed to another trainer
// after the timeout and trained twice: over a 1 Gbit/s link a 26 M-parameter model's tasks took
// longer than the 60 s default, and a pass of 10,000 records trained 12,586 (bench/link_bench).
TEST_F(MasterTest, ATaskLongerThanTheTimeoutStaysWithATrainerReportingProgress) {
  MakeDataset("d", 600, 4096);
  auto lease = client_->GrantLease(60);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(Registry(client_.get(), keys::TrainerPrefix(kJob)).Register("t0", "{}", lease->id).ok());
  StartMaster("d", {"--passes", "1", "--task-timeout", "2"});
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  const Deadline d(std::chrono::seconds(30));
  auto got = mc.GetTask("t0", d);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->kind(), master::GetTaskReply::TASK);
  for (int i = 1; i <= 12; ++i) {                                 // 6 s of reading: three timeouts' worth
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // some records' training
    auto p = mc.ReportTaskProgress("t0", got->task().id(), got->task().epoch(), i, 1000, 1, d);
    ASSERT_TRUE(p.ok()) << p.status();
  }
  auto fin = mc.Finish("t0", got->task().id(), got->task().epoch(), d);
  ASSERT_TRUE(fin.ok()) << fin.status();
  EXPECT_TRUE(*fin) << "the task was taken from its trainer while it reported progress";
  EXPECT_EQ(MasterStatus().timeouts(), 0);
}

TEST_F(MasterTest, StandbyTakesOverWhenTheLeaderIsKilledAndNoTaskIsLost) {
  MakeDataset("d", 6000, 4096);  // ~75 chunks
  auto m = dataset::LoadManifest(dir_ + "/store/d");
  ASSERT_TRUE(m.ok());
  const int64_t tasks = static_cast<int64_t>(m->chunks.size());
  Subprocess& first = StartMaster("d", {"--passes", "2", "--task-timeout", "20"});
  ASSERT_TRUE(WaitUntil([&] { return LeaderPid() == first.pid(); }, std::chrono::seconds(30)));
  Subprocess& standby = StartMaster("d", {"--passes", "2", "--task-timeout", "20"});
  std::vector<Subprocess*> consumers;
  for (int i = 0; i < 3; ++i) consumers.push_back(&StartConsumer({"--batch", "20", "--sleep-ms", "15"}));
  // Kill the leader while the consumers are mid-way through the first pass.
  ASSERT_TRUE(WaitUntil([&] { return TasksOf(*consumers[0]).size() + TasksOf(*consumers[1]).size() > 20; },
                        std::chrono::seconds(60)));
  int64_t killed = first.pid();
  first.Kill();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil(
      [&] {
        int64_t p = LeaderPid();
        return p != 0 && p != killed;
      },
      std::chrono::seconds(15)));
  double took = SecondsSince(t0);
  EXPECT_LE(took, 2 + 1.0) << "a standby leads within the election TTL + 1 s";
  for (Subprocess* c : consumers) {
    auto code = c->Wait(std::chrono::seconds(120));
    ASSERT_TRUE(code.has_value() && *code == 0) << c->Output();
  }
  // Every task was done in every pass (none failed), and none was lost.
  std::map<int, std::set<int64_t>> done;
  int64_t executions = 0;
  for (Subprocess* c : consumers) {
    for (auto [pass, id] : TasksOf(*c)) {
      done[pass].insert(id);
      ++executions;
    }
  }
  ASSERT_EQ(done.size(), 2u);
  for (auto& [pass, ids] : done) EXPECT_EQ(static_cast<int64_t>(ids.size()), tasks) << "pass " << pass;
  auto st = MasterStatus();
  EXPECT_TRUE(st.finished());
  EXPECT_EQ(st.failed(), 0);
  int64_t duplicates = executions - 2 * tasks;
  std::printf(
      "[ master failover ] %lld tasks x 2 passes, %lld executions, %lld duplicated (at-least-once); "
      "standby led %.2f s after the kill\n",
      static_cast<long long>(tasks), static_cast<long long>(executions), static_cast<long long>(duplicates),
      took);
  EXPECT_GE(duplicates, 0);
  // Every consumer stayed registered: the new leader took back none of their tasks (it once did,
  // all of them, when it judged the trainers before its watch had listed them).
  EXPECT_EQ(standby.Output().find("is gone"), std::string::npos) << standby.Output();
}

// Fencing of a real master: a leader stalled (SIGSTOP) past its lease TTL is replaced; when it
// resumes it leads nothing, serves nothing and exits, and the job finishes under the new leader
// with no task lost.
TEST_F(MasterTest, LeaderStalledPastItsTtlIsReplacedAndExitsWhenItResumes) {
  MakeDataset("d", 3000, 4096);
  auto m = dataset::LoadManifest(dir_ + "/store/d");
  ASSERT_TRUE(m.ok());
  const int64_t tasks = static_cast<int64_t>(m->chunks.size());
  Subprocess& first = StartMaster("d", {"--task-timeout", "30"});
  ASSERT_TRUE(first.WaitForOutput("leading job", std::chrono::seconds(30))) << first.Output();
  Subprocess& standby = StartMaster("d", {"--task-timeout", "30"});
  ASSERT_TRUE(standby.WaitForOutput("campaigning", std::chrono::seconds(30))) << standby.Output();
  std::vector<Subprocess*> consumers;
  for (int i = 0; i < 2; ++i) consumers.push_back(&StartConsumer({"--batch", "20", "--sleep-ms", "15"}));
  ASSERT_TRUE(WaitUntil([&] { return TasksOf(*consumers[0]).size() + TasksOf(*consumers[1]).size() >= 4; },
                        std::chrono::seconds(60)));
  ASSERT_TRUE(first.Signal(SIGSTOP).ok());
  // Its lease (TTL 2 s) runs out while it is stopped: the standby takes over the saved queue.
  bool took_over = standby.WaitForOutput("took over job", std::chrono::seconds(30));
  ASSERT_TRUE(first.Signal(SIGCONT).ok());
  ASSERT_TRUE(took_over) << standby.Output();
  EXPECT_EQ(LeaderPid(), standby.pid());
  // Woken, the old leader finds its lease gone, stops serving and exits 3 (fenced) on its own.
  auto code = first.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << first.Output();
  EXPECT_EQ(*code, 3) << first.Output();
  EXPECT_NE(first.Output().find("master stops leading: lease"), std::string::npos) << first.Output();
  EXPECT_EQ(LeaderPid(), standby.pid());
  for (Subprocess* c : consumers) {
    auto done = c->Wait(std::chrono::seconds(120));
    ASSERT_TRUE(done.has_value() && *done == 0) << c->Output();
  }
  std::set<int64_t> done;
  for (Subprocess* c : consumers)
    for (auto [pass, id] : TasksOf(*c)) done.insert(id);
  EXPECT_EQ(static_cast<int64_t>(done.size()), tasks) << "a task was lost";
  auto st = MasterStatus();
  EXPECT_TRUE(st.finished());
  EXPECT_EQ(st.failed(), 0);
}

TEST_F(MasterTest, KilledTrainersTasksAreHandedOutAgainWithinItsLeaseTtl) {
  MakeDataset("d", 2000, 4096);
  StartMaster("d", {"--task-timeout", "120"});  // the timeout is not what brings the task back
  Subprocess& holder = StartConsumer({"--hold-after", "5"});
  ASSERT_TRUE(holder.WaitForOutput("HOLDING", std::chrono::seconds(30))) << holder.Output();
  int64_t held = TasksOf(holder).back().second;
  holder.Kill();
  auto killed = std::chrono::steady_clock::now();
  Subprocess& other = StartConsumer();
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (auto [pass, id] : TasksOf(other)) {
          if (id == held) return true;
        }
        return false;
      },
      std::chrono::seconds(20)));
  std::printf("handed out again %.2f s after its trainer died (lease TTL 2 s)\n", SecondsSince(killed));
  EXPECT_LT(SecondsSince(killed), 30.0)
      << "brought back by the trainer's lease (2 s), not the 120 s task timeout";
  auto code = other.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value() && *code == 0) << other.Output();
  EXPECT_TRUE(MasterStatus().finished());
}

// A reader fetches its next task ahead: while a trainer reads the last records of a task, the
// master already counts the next one as held by it, and the trainer goes on into that one without
// asking again. Killed while it holds both, both come back and every task is done.
TEST_F(MasterTest, TheNextTaskIsFetchedAheadWhileATasksLastRecordsAreRead) {
  MakeDataset("d", 2000, 4096);  // tasks of about 80 records: fewer than a reader fetches ahead at
  StartMaster("d");
  Subprocess& holder = StartConsumer({"--hold-after", "5"});
  ASSERT_TRUE(holder.WaitForOutput("HOLDING", std::chrono::seconds(30))) << holder.Output();
  EXPECT_TRUE(PendingBecomes(2));
  holder.Kill();
  Subprocess& reader = StartConsumer();
  auto code = reader.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value() && *code == 0) << reader.Output();
  auto st = MasterStatus();
  EXPECT_TRUE(st.finished());
  EXPECT_EQ(st.done(), st.tasks());
  std::smatch m;
  const std::string out = reader.Output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("AHEAD (\\d+)"))) << out;
  const int64_t ahead = std::stoll(m[1]);
  std::printf("%lld of %lld tasks were fetched ahead\n", static_cast<long long>(ahead),
              static_cast<long long>(st.tasks()));
  // All but the first and those asked for while the killed trainer's two were out of the queue.
  EXPECT_GE(ahead, st.tasks() / 2) << out;
}

// NextInTask reads only the task at hand (a trainer reading its next batch while a step travels):
// once that task is empty it says false and takes no next one, so no acknowledgement can go ahead
// of the training. Next() then moves on to another task.
TEST_F(MasterTest, NextInTaskReadsOnlyTheTaskAtHand) {
  MakeDataset("d", 2000, 4096);
  StartMaster("d");
  auto reader = OpenReader();
  ASSERT_TRUE(reader);
  std::string rec;
  auto got = reader->Next(&rec);
  ASSERT_TRUE(got.ok() && *got) << (got.ok() ? "no record" : got.status().ToString());
  const auto task = reader->current_task();
  int in_task = 1;
  for (int i = 0; i < 100000; ++i) {
    auto more = reader->NextInTask(&rec);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ++in_task;
    ASSERT_EQ(reader->current_task(), task);
  }
  EXPECT_GT(in_task, 1);
  auto again = reader->NextInTask(&rec);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again) << "read past its task";
  EXPECT_EQ(reader->current_task(), task);
  got = reader->Next(&rec);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_NE(reader->current_task(), task);
}

// A reader whose records go fast next to the time a fetch takes starts the next fetch long before
// the 256 records left of fetch_ahead_records: here within 240 records of a task of 500.
TEST_F(MasterTest, AFastReaderFetchesAheadBeforeItsLastRecordsByTheTimeAFetchTakes) {
  dataset::WriterOptions o;
  o.chunk_bytes = 25000;  // 500 records of 48 bytes (+2 each) fill a chunk: 3 chunks of 500
  auto w = dataset::DatasetWriter::Create(dir_ + "/store", "d", "text", "line", o);
  ASSERT_TRUE(w.ok()) << w.status();
  for (int i = 0; i < 1500; ++i) ASSERT_TRUE((*w)->Add(std::string(48, 'r')).ok());
  ASSERT_TRUE((*w)->Commit(nlohmann::json::object()).ok());
  auto m = dataset::LoadManifest(dir_ + "/store/d");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->chunks.size(), 3u);
  for (const auto& c : m->chunks) ASSERT_EQ(c.records, 500u);
  StartMaster("d", {"--min-tasks", "0"});  // one chunk a task, never cut
  auto reader = OpenReader();
  ASSERT_TRUE(reader);
  std::string rec;
  for (int i = 0; i < 240; ++i) {
    auto more = reader->Next(&rec);
    ASSERT_TRUE(more.ok() && *more) << (more.ok() ? "no record" : more.status().ToString());
  }
  // 260 records are left, more than 256: only the timing can have started the fetch.
  EXPECT_TRUE(PendingBecomes(2));
}

// A reader of the job (its own trainer id) that has read every record of its first task and the
// first of the next: the first task waits to be acknowledged.
std::unique_ptr<Reader> ReaderPastItsFirstTask(const std::string& etcd, const std::string& job,
                                               std::chrono::milliseconds request_timeout) {
  ReaderOptions o;
  o.connection.etcd_endpoints = {etcd};
  o.connection.job = job;
  o.lease_ttl_seconds = 5;
  o.request_timeout = request_timeout;
  auto reader = Reader::Open(o);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return nullptr;
  std::string rec;
  auto next = [&] {
    auto more = (*reader)->Next(&rec);
    return more.ok() && *more;
  };
  // The first task: with a short request timeout a loaded machine's master may miss a call or
  // two (the last full suite saw it), so it is asked for until it comes (within 60 s).
  EXPECT_TRUE(WaitUntil(next, std::chrono::seconds(60)));
  const auto first = (*reader)->current_task();
  for (int i = 0; i < 10000 && (*reader)->current_task() == first; ++i) {
    if (!next()) break;
  }
  EXPECT_NE((*reader)->current_task(), first);
  return std::move(*reader);
}

// A trainer does not wait for the master to acknowledge a task: with the master stopped, Trained()
// returns at once, and the acknowledgement lands when the master goes on.
TEST_F(MasterTest, TrainedDoesNotWaitForTheMasterAndTheAcknowledgementLandsLater) {
  MakeDataset("d", 2000, 4096);
  Subprocess& master = StartMaster("d");
  auto reader = ReaderPastItsFirstTask(server_->endpoint(), kJob, std::chrono::seconds(30));
  ASSERT_TRUE(reader);
  // The master stops for less than its lease (2 s): it would answer after that.
  ASSERT_TRUE(master.Signal(SIGSTOP).ok());
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));  // the stop's length
    (void)master.Signal(SIGCONT);
  });
  const auto start = std::chrono::steady_clock::now();
  Status trained = reader->Trained();
  const double took = SecondsSince(start);
  resume.join();
  ASSERT_TRUE(trained.ok()) << trained;
  EXPECT_LT(took, 0.5) << "Trained() waited for the stopped master";
  // The first task is acknowledged once the master goes on; the reader counts it.
  EXPECT_TRUE(WaitUntil([&] { return MasterStatus().done() >= 1; }, std::chrono::seconds(30)));
  EXPECT_TRUE(WaitUntil(
      [&] {
        (void)reader->Trained();
        return reader->stats().tasks_done == 1;
      },
      std::chrono::seconds(30)));
}

// A trainer alone hears "wait" once at each pass's end (its own last task is not acknowledged
// before that batch is trained), however soon its acknowledgements land: the run repeats itself
// step for step. Asked before the last acknowledgement landed, the master would say "wait" again.
TEST_F(MasterTest, AReaderAloneWaitsOnceAtEachPassEnd) {
  MakeDataset("d", 2000, 4096);
  StartMaster("d", {"--passes", "3"});
  auto reader = OpenReader();
  ASSERT_TRUE(reader);
  std::string rec;
  int64_t records = 0, waits = 0;
  const Deadline deadline(std::chrono::seconds(60));
  for (int i = 0; i < 100000 && !reader->finished() && !deadline.expired(); ++i) {
    auto more = reader->Next(&rec);
    ASSERT_TRUE(more.ok()) << more.status();
    if (*more) ++records;
    // A batch of 50 trained, or what is held when there is nothing more now.
    if (!*more || records % 50 == 0) {
      ASSERT_TRUE(reader->Trained().ok());
    }
    if (!*more && !reader->finished()) ++waits;
  }
  EXPECT_TRUE(reader->finished());
  EXPECT_EQ(records, 3 * 2000);
  EXPECT_EQ(waits, 3) << "one at each pass's end";
}

// A reader told "wait" hears whether other trainers still hold tasks: in sync mode their steps
// then pace its empty ones (Session::Idle pauses only when nobody trains).
TEST_F(MasterTest, AWaitingReaderHearsWhetherOthersStillHoldTasks) {
  MakeDataset("d", 100, 1 << 20);  // one chunk, one task
  StartMaster("d");
  auto a = OpenReader(), b = OpenReader();
  ASSERT_TRUE(a && b);
  std::string rec;
  auto next = [&](Reader& r) {
    auto more = r.Next(&rec);
    EXPECT_TRUE(more.ok()) << more.status();
    return more.ok() && *more;
  };
  ASSERT_TRUE(next(*a));  // a holds the one task
  EXPECT_FALSE(next(*b));
  EXPECT_FALSE(b->finished());
  EXPECT_TRUE(b->others_training()) << "a holds the task";
  int64_t records = 1;
  while (records < 1000 && next(*a)) ++records;
  EXPECT_EQ(records, 100);
  // a waits for its own task's acknowledgement: nobody else trains.
  EXPECT_FALSE(a->finished());
  EXPECT_FALSE(a->others_training());
  ASSERT_TRUE(a->Trained().ok());
  EXPECT_TRUE(WaitUntil([&] { return !next(*a) && a->finished(); }, std::chrono::seconds(30)));
  EXPECT_TRUE(WaitUntil([&] { return !next(*b) && b->finished(); }, std::chrono::seconds(30)));
}

// An acknowledgement that fails in the background (the master did not answer within the request
// timeout) is reported by a later Trained(), and its task is sent again with the next round.
TEST_F(MasterTest, AFailedAcknowledgementIsReportedAndSentAgain) {
  MakeDataset("d", 2000, 4096);
  Subprocess& master = StartMaster("d");
  auto reader = ReaderPastItsFirstTask(server_->endpoint(), kJob, std::chrono::milliseconds(300));
  ASSERT_TRUE(reader);
  ASSERT_TRUE(master.Signal(SIGSTOP).ok());  // less than its lease (2 s), longer than 300 ms
  ASSERT_TRUE(reader->Trained().ok());
  Status failed;
  EXPECT_TRUE(WaitUntil(
      [&] {
        failed = reader->Trained();
        return !failed.ok();
      },
      std::chrono::seconds(5)));
  ASSERT_TRUE(master.Signal(SIGCONT).ok());
  EXPECT_TRUE(failed.code() == StatusCode::kDeadlineExceeded || failed.code() == StatusCode::kUnavailable)
      << failed;
  // The next rounds send it again and the reader counts its answer once: done, or stale if the
  // master, once resumed, had still taken the call that timed out.
  EXPECT_TRUE(WaitUntil(
      [&] {
        (void)reader->Trained();
        return reader->stats().tasks_done + reader->stats().stale == 1;
      },
      std::chrono::seconds(30)));
  EXPECT_GE(MasterStatus().done(), 1);
}

TEST_F(MasterTest, CorruptChunkFailsItsTaskWithTheReasonAndTheRestIsDone) {
  MakeDataset("d", 1000, 4096);
  auto m = dataset::LoadManifest(dir_ + "/store/d");
  ASSERT_TRUE(m.ok());
  const auto& c = m->chunks[3];
  std::string part = dir_ + "/store/d/" + dataset::Manifest::PartName(c.part);
  auto bytes = ReadFile(part);
  (*bytes)[c.offset + 60] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomic(part, *bytes).ok());
  StartMaster("d", {"--max-failures", "1"});
  Subprocess& consumer = StartConsumer();
  auto code = consumer.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value() && *code == 0) << consumer.Output();
  auto st = MasterStatus();
  EXPECT_TRUE(st.finished());
  EXPECT_EQ(st.failed(), 1);
  EXPECT_EQ(st.done(), static_cast<int64_t>(m->chunks.size()) - 1);
  ASSERT_EQ(st.failed_tasks_size(), 1);
  EXPECT_EQ(st.failed_tasks(0).id(), 3);
  EXPECT_EQ(st.failed_tasks(0).failures(), 2);
  EXPECT_NE(st.failed_tasks(0).reason().find("chunk 3 at offset"), std::string::npos)
      << st.failed_tasks(0).reason();
  EXPECT_NE(st.failed_tasks(0).reason().find("checksum"), std::string::npos) << st.failed_tasks(0).reason();
  // `tessera status` shows it to the user.
  SpawnOptions o;
  o.argv = {BuildPath("src/tessera"), "status", "--etcd", server_->endpoint(), "--job", kJob};
  o.log_path = dir_ + "/status.log";
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE((*p)->Wait(std::chrono::seconds(30)).has_value());
  EXPECT_NE((*p)->Output().find("failed task 3"), std::string::npos) << (*p)->Output();
}

TEST_F(MasterTest, RestartedMasterContinuesFromItsStateInEtcd) {
  MakeDataset("d", 3000, 4096);
  Subprocess& first = StartMaster("d", {"--passes", "3"});
  Subprocess& part = StartConsumer({"--hold-after", "1500", "--batch", "10"});
  ASSERT_TRUE(part.WaitForOutput("HOLDING", std::chrono::seconds(60)));
  part.Kill();
  auto before = MasterStatus();
  EXPECT_GT(before.done(), 10);
  ASSERT_TRUE(first.Signal(SIGTERM).ok());
  ASSERT_TRUE(first.Wait(std::chrono::seconds(20)).has_value());
  // A new master (with other flags: the saved job settings win) picks up where it stopped.
  StartMaster("d", {"--passes", "1", "--chunks-per-task", "7"});
  auto after = MasterStatus();
  EXPECT_EQ(after.done() + after.pending() + after.todo() + after.failed(), before.tasks());
  EXPECT_EQ(after.passes(), 3);
  EXPECT_GE(after.done(), before.done());
  EXPECT_EQ(after.dispatches(), before.dispatches());
  Subprocess& rest = StartConsumer();
  auto code = rest.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value() && *code == 0) << rest.Output();
  EXPECT_TRUE(MasterStatus().finished());
}

// --chunks-per-task 0 (tessera local's and tessera master's default): the master groups
// consecutive chunks into tasks of about 4 MiB, keeping at least --min-tasks (8 here) a pass.
TEST_F(MasterTest, TheMasterChoosesTasksOfSeveralChunksYetKeepsEnoughTasks) {
  MakeDataset("d", 2000, 4096);
  auto m = dataset::LoadManifest(dir_ + "/store/d");
  ASSERT_TRUE(m.ok()) << m.status();
  const auto chunks = static_cast<int64_t>(m->chunks.size());
  ASSERT_GE(chunks, 16);  // so tasks of several chunks are possible
  const int64_t per = chunks / 8;
  Subprocess& master = StartMaster("d", {"--chunks-per-task", "0"});
  const auto status = MasterStatus();
  EXPECT_EQ(status.tasks(), (chunks + per - 1) / per);
  EXPECT_GE(status.tasks(), 8);
  ASSERT_TRUE(master.WaitForOutput("tasks of " + std::to_string(per) + " chunks", std::chrono::seconds(10)))
      << master.Output();
  // Every record is handed out once.
  Subprocess& consumer = StartConsumer();
  auto code = consumer.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value() && *code == 0) << consumer.Output();
  EXPECT_NE(consumer.Output().find("RECORDS 2000\n"), std::string::npos) << consumer.Output();
  EXPECT_TRUE(MasterStatus().finished());
  EXPECT_EQ(MasterStatus().done(), status.tasks());
}

TEST_F(MasterTest, StateOfAHundredThousandChunksFitsInEtcdAndSurvivesARestart) {
  // A manifest of 100,000 (tiny) chunks; the part files are not read by the master.
  dataset::WriterOptions o;
  o.parts = 1;
  o.chunk_bytes = 1024;
  o.compressor = recordio::Compressor::kNone;
  auto w = dataset::DatasetWriter::Create(dir_ + "/store", "big", "text", "line", o);
  ASSERT_TRUE(w.ok());
  std::string rec(1100, 'r');
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE((*w)->Add(rec).ok());
  ASSERT_TRUE((*w)->Commit(nlohmann::json::object()).ok());
  Subprocess& m1 = StartMaster("big", {"--passes", "2"});
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  // Dispatch and finish 3,000 tasks; leave some pending.
  for (int i = 0; i < 3000; ++i) {
    auto t = mc.GetTask("t" + std::to_string(i % 4), Deadline(std::chrono::seconds(30)));
    ASSERT_TRUE(t.ok()) << t.status();
    if (i % 100 == 0) continue;
    ASSERT_TRUE(mc.Finish("t" + std::to_string(i % 4), t->task().id(), t->task().epoch(),
                          Deadline(std::chrono::seconds(30)))
                    .ok());
  }
  // Everything the master keeps in etcd is small: the base plus not-yet-compacted deltas.
  etcd::GetOptions g;
  g.prefix = true;
  auto state = client_->Get(keys::MasterStatePrefix(kJob), g);
  ASSERT_TRUE(state.ok());
  size_t total = 0, largest = 0;
  for (const auto& kv : state->kvs) {
    total += kv.value.size();
    largest = std::max(largest, kv.value.size());
  }
  std::printf("[ master state ] 100,000 tasks: %zu keys, %zu bytes in all, largest value %zu bytes\n",
              state->kvs.size(), total, largest);
  EXPECT_LT(largest, 1572864u / 10) << "etcd's request limit is 1.5 MiB";
  EXPECT_LT(state->kvs.size(), 600u);  // compacted: not one key per RPC
  auto before = mc.GetStatus(Deadline(std::chrono::seconds(10)));
  ASSERT_TRUE(before.ok());
  m1.Kill();
  StartMaster("big", {"--passes", "2"});
  auto after = mc.GetStatus(Deadline(std::chrono::seconds(30)));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->done(), before->done());
  EXPECT_EQ(after->dispatches(), before->dispatches());
  EXPECT_EQ(after->tasks(), 100000);
}

TEST_F(MasterTest, ConsoleRequestsDeclaringATerabyteBodyAreRefusedAtOnceAndCostNoMemory) {
  MakeDataset("d", 500, 4096);
  Subprocess& m = StartMaster("d", {"--http-port", "0"});
  std::string console;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto l = Election::Leader(client_.get(), keys::MasterElectionPrefix(kJob));
        if (!l.ok() || !l->has_value()) return false;
        console = nlohmann::json::parse((*l)->value).value("console", "");
        return !console.empty();
      },
      std::chrono::seconds(30)));
  std::smatch u;
  ASSERT_TRUE(std::regex_match(console, u, std::regex("http://([0-9.]+):([0-9]+)/"))) << console;
  const int64_t before = RssKib(m.pid());
  for (int i = 0; i < 50; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::string reply = RawHttp(u[1].str(), std::stoi(u[2].str()),
                                "POST /api/job HTTP/1.1\r\nHost: x\r\nContent-Length: 1099511627776",
                                std::string(1 << 20, 'y'));
    ASSERT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << "request " << i << ": " << reply.substr(0, 200);
    EXPECT_LT(SecondsSince(t0), 10.0) << "the refusal waited for the body";
  }
  int64_t after = RssKib(m.pid());
  WaitUntil([&] { return (after = RssKib(m.pid())) <= before + 20 * 1024; }, std::chrono::seconds(20));
  std::printf("master RSS: %lld KiB before and %lld KiB after 50 requests declaring 2^40-byte bodies\n",
              static_cast<long long>(before), static_cast<long long>(after));
  EXPECT_LE(after, before + 20 * 1024);
  EXPECT_TRUE(m.running());
}

// One trainer slowed on purpose: once the other has nothing left, it takes the rest of the slow
// one's task, piece by piece, so the pass does not wait for the slow one to read it all alone.
// Every record is read exactly once.
TEST_F(MasterTest, AnIdleTrainerTakesTheRestOfASlowTrainersTask) {
  MakeDataset("d", 2000, 1 << 20);  // one chunk, cut into 2 tasks of 1000 records
  StartMaster("d", {"--passes", "1", "--min-tasks", "2", "--min-task-records", "50"});
  const auto started = Now();
  Subprocess& slow = StartConsumer({"--batch", "50", "--sleep-ms", "400"});  // 8 s for a task alone
  ASSERT_TRUE(slow.WaitForOutput("TASK", std::chrono::seconds(60))) << slow.Output();
  Subprocess& fast = StartConsumer({"--batch", "50"});
  auto records = [](Subprocess& p) {
    std::smatch m;
    const std::string out = p.Output();
    return std::regex_search(out, m, std::regex("RECORDS (\\d+)")) ? std::stoll(m[1]) : -1;
  };
  ASSERT_TRUE(fast.Wait(std::chrono::seconds(120)).has_value()) << fast.Output();
  ASSERT_TRUE(slow.Wait(std::chrono::seconds(120)).has_value()) << slow.Output();
  const double took = std::chrono::duration<double>(Now() - started).count();
  ASSERT_NE(slow.Output().find("DONE"), std::string::npos) << slow.Output();
  ASSERT_NE(fast.Output().find("DONE"), std::string::npos) << fast.Output();
  EXPECT_EQ(records(slow) + records(fast), 2000) << slow.Output() << fast.Output();
  EXPECT_LT(records(slow), 1000) << "the slow trainer did not read its whole task";
  EXPECT_GT(records(fast), 1000) << "the fast one read pieces of the slow one's task";
  EXPECT_EQ(slow.Output().find("SPLITS 0"), std::string::npos) << slow.Output();
  const auto st = MasterStatus();
  EXPECT_TRUE(st.finished());
  EXPECT_GE(st.splits(), 1);
  EXPECT_EQ(st.failed(), 0);
  std::printf(
      "slow trainer %lld records, fast %lld, %lld splits; the pass took %.1f s (the slow trainer alone "
      "needs about 8 s for its task)\n",
      static_cast<long long>(records(slow)), static_cast<long long>(records(fast)),
      static_cast<long long>(st.splits()), took);
}

// A job of many trainers is paced: the master asks each for fewer reports, so that it handles
// about the same number a second whatever their number (master/report_pace.h), and a reader
// follows what it says. With 200 trainers registered: progress every 4 s, task progress every
// 4 s before the pass's tail and 400 ms in it; the reader, before the tail, then reports its
// task's progress at most twice in 3 s of reading (it did every 250 ms: 12 times).
TEST_F(MasterTest, ManyTrainersAreAskedForFewerReportsAndTheReaderFollows) {
  MakeDataset("d", 6000, 1 << 20);  // one chunk, cut into 3 tasks
  const int http = FreeLoopbackPort();
  StartMaster("d", {"--passes", "1", "--min-tasks", "3", "--min-task-records", "50", "--http-port",
                    std::to_string(http)});
  auto lease = client_->GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  Registry trainers(client_.get(), keys::TrainerPrefix(kJob));
  for (int i = 0; i < 199; ++i)
    ASSERT_TRUE(trainers.Register("idle-" + std::to_string(i), "{}", lease->id).ok());
  std::unique_ptr<Reader> reader = OpenReader();  // the 200th, registered by the reader itself
  ASSERT_NE(reader, nullptr);
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  // The master's pace once it counts the 200 (its watch may take a moment); a report with
  // nothing in it changes nothing.
  std::chrono::milliseconds paced{0};
  const Deadline counted(std::chrono::seconds(30));
  while (!counted.expired() && paced.count() != 4000) {
    auto r = mc.Report(master::ProgressReport(), Deadline(std::chrono::seconds(10)));
    ASSERT_TRUE(r.ok()) << r.status();
    paced = *r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(paced.count(), 4000) << "200 trainers' progress: about 50 reports a second";
  auto got = mc.GetTask("idle-0", Deadline(std::chrono::seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  const master::GetTaskReply reply = *got;
  ASSERT_EQ(reply.kind(), master::GetTaskReply::TASK);
  EXPECT_EQ(reply.progress_every_ms(), 4000);
  EXPECT_EQ(reply.task_progress_every_ms(), 4000) << "before the tail: only to learn it began";
  // The reader takes the second task and, reading slowly for 3 s, reports its progress in it as
  // seldom as told.
  std::string rec;
  auto more = reader->Next(&rec);
  ASSERT_TRUE(more.ok() && *more) << (more.ok() ? "no record" : more.status().ToString());
  auto reports = [&] {
    const std::string page =
        RawHttpUntilClosed("127.0.0.1", http, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1", "");
    std::smatch m;
    static const std::regex count(
        "tessera_master_rpc_seconds_count\\{[^}]*method=\"ReportTaskProgress\"[^}]*\\} ([0-9.e+]+)");
    return std::regex_search(page, m, count) ? std::stod(m[1]) : 0.0;
  };
  const double before = reports();
  const auto start = Now();
  while (Now() - start < std::chrono::seconds(3)) {
    more = reader->Next(&rec);
    ASSERT_TRUE(more.ok()) << more.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(reports() - before, 2) << "the reader reported more often than the master asked";
  // The third task out: the pass is in its tail, and task progress may free an idle trainer.
  got = mc.GetTask("idle-1", Deadline(std::chrono::seconds(10)));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->kind(), master::GetTaskReply::TASK);
  auto progress = mc.ReportTaskProgress("idle-0", reply.task().id(), reply.task().epoch(), 1, 2000, 0,
                                        Deadline(std::chrono::seconds(10)));
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->next.count(), 400) << "in the tail: more often, spread over the 200";
}

// A progress report sent again with its evaluation (its answer lost, as when the master is
// killed between recording it and answering) records the evaluation once; the next pass's is
// another. (The run's history held a pass's accuracy twice after a master failover.)
TEST_F(MasterTest, AnEvaluationReportedAgainIsRecordedOnce) {
  StartOnePassWithTrainerT0();
  master::MasterClient mc(client_.get(), kJob, token_, secret_);
  master::ProgressReport r;
  r.set_trainer("t0");
  r.set_step(5);
  auto* m = r.add_metrics();
  m->set_name("accuracy");
  m->set_value(0.875);
  m->set_pass(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(mc.Report(r, Deadline(std::chrono::seconds(20))).ok());
  auto status = MasterStatus();
  ASSERT_EQ(status.metrics_size(), 1) << status.DebugString();
  EXPECT_EQ(status.metrics(0).value(), 0.875);
  r.set_step(9);
  r.mutable_metrics(0)->set_pass(1);
  ASSERT_TRUE(mc.Report(r, Deadline(std::chrono::seconds(20))).ok());
  EXPECT_EQ(MasterStatus().metrics_size(), 2);
}

TEST_F(MasterTest, MasterRefusesAnotherDataSetsQueue) {
  MakeDataset("a", 100, 1024);
  MakeDataset("b", 200, 1024);
  Subprocess& m1 = StartMaster("a");
  // Leading in etcd is not enough: a master stopped between winning the election and writing
  // its queue leaves no queue behind. Wait for the queue itself.
  ASSERT_TRUE(m1.WaitForOutput("leading job", std::chrono::seconds(30))) << m1.Output();
  ASSERT_TRUE(m1.Signal(SIGTERM).ok());
  ASSERT_TRUE(m1.Wait(std::chrono::seconds(20)).has_value());
  Subprocess& m2 = StartMaster("b");
  auto code = m2.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << m2.Output();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(m2.Output().find("already has a task queue for another data set"), std::string::npos)
      << m2.Output();
}

}  // namespace
}  // namespace tessera::testing
