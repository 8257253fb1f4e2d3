// The simulated trainers, in this process or in host processes (see trainer_fleet.h).
#include "trainer_fleet.h"

#include <unistd.h>

#include <algorithm>

#include "harness/wait.h"
#include "proc_stats.h"

namespace tessera::bench {

TrainerFleet::~TrainerFleet() {
  for (size_t i = 0; i < index_.size(); ++i) RequestStop(i);
  for (auto& h : hosts_)
    if (h->process) h->process->Stop(std::chrono::seconds(5));
  for (auto& h : hosts_) {
    if (h->local) h->local->Stop();
    if (h->process) h->process->Terminate(std::chrono::seconds(5));
  }
}

StatusOr<std::unique_ptr<TrainerFleet::Host>> TrainerFleet::NewHost(int capacity) {
  const int k = static_cast<int>(hosts_.size());
  // Named after the job: the sizes of one run share the directory, each with a job of its own.
  const std::string name = o_.dir + "/" + o_.trainer.job + "-trainers-" + std::to_string(k);
  const std::string path = o_.per_process > 0 ? name + ".region" : "";
  TESSERA_ASSIGN_OR_RETURN(MappedRegion region, MappedRegion::Create(path, capacity));
  if (o_.given_ids) region->first_id = slots_;  // ids in the order of the slots
  slots_ += capacity;
  auto host = std::unique_ptr<Host>(new Host{std::move(region), nullptr, nullptr, 0});
  if (o_.per_process == 0) {
    host->local = std::make_unique<TrainerHost>(host->region.get(), o_.trainer);
    host->local->Start();
    return host;
  }
  const SimTrainerOptions& t = o_.trainer;
  ProcessOptions po;
  po.argv = {o_.host_binary,
             "--region",
             path,
             "--etcd",
             t.etcd,
             "--job",
             t.job,
             "--store",
             t.store,
             "--pservers",
             std::to_string(t.pservers),
             "--lease-ttl",
             std::to_string(t.lease_ttl_seconds),
             "--batch",
             std::to_string(t.batch),
             "--step-ms",
             std::to_string(t.step.count()),
             "--clients-per-connection",
             std::to_string(o_.clients_per_connection)};
  if (o_.deadlock_checks) po.argv.push_back("--deadlock-checks");
  po.log_path = name + ".log";
  TESSERA_ASSIGN_OR_RETURN(host->process, Process::Spawn(po));
  // Ready once it has done a round.
  Process& p = *host->process;
  const bool over = testing::WaitUntil([&] { return host->region->heartbeat_ms.load() > 0 || !p.running(); },
                                       std::chrono::seconds(30), std::chrono::milliseconds(10));
  if (!p.running()) return Status::Aborted("a trainer host exited as it started; its output: " + p.Output());
  if (!over)
    return Status::DeadlineExceeded("a trainer host did not start within 30 s; its output: " + p.Output());
  return host;
}

Status TrainerFleet::Start(int count) {
  // The hosts first, then every trainer asked for at once: they all start within a round.
  int room = 0;
  for (const auto& h : hosts_) room += static_cast<int>(h->region->capacity.load()) - h->used;
  // Bounded by `count`: each host adds room.
  while (room < count) {
    TESSERA_ASSIGN_OR_RETURN(auto host, NewHost(o_.per_process == 0 ? count - room : o_.per_process));
    room += static_cast<int>(host->region->capacity.load());
    hosts_.push_back(std::move(host));
  }
  for (size_t k = 0; k < hosts_.size() && count > 0; ++k) {
    Host& h = *hosts_[k];
    const int here = std::min(count, static_cast<int>(h.region->capacity.load()) - h.used);
    for (int i = 0; i < here; ++i) index_.emplace_back(k, h.used + i);
    h.used += here;
    count -= here;
  }
  for (auto& h : hosts_) h->region->wanted = h->used;
  return Status::OK();
}

double TrainerFleet::CpuSeconds() const {
  double sum = ::tessera::bench::CpuSeconds(::getpid());
  for (const auto& h : hosts_)
    if (h->process) sum += ::tessera::bench::CpuSeconds(h->process->pid());
  return sum;
}

int TrainerFleet::processes() const {
  int n = 0;
  for (const auto& h : hosts_) n += h->process ? 1 : 0;
  return n;
}

Status TrainerFleet::FirstError() const {
  for (const auto& h : hosts_)
    if (h->process && !h->process->running())
      return Status::Aborted("a trainer host exited; its output: " + h->process->Output());
  for (size_t i = 0; i < index_.size(); ++i) {
    const Status e = Slot(i).Error();
    if (!e.ok()) return e;
  }
  return Status::OK();
}

}  // namespace tessera::bench
