// Supervisor's scaling (see supervisor_impl.h): `tessera local scale` writes the wanted numbers
// of trainers and (elastic jobs) pservers to etcd; the supervisor adds children in the lowest
// free slots or stops the highest ones. A pserver stopped this way hands its shards over to the
// others before it exits, so nothing is lost and nothing rolled back.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/clock.h"
#include "common/files.h"
#include "common/strings.h"
#include "coord/keys.h"
#include "local/supervisor_impl.h"

namespace tessera::local {

void Supervisor::FollowScaleRequests() {
  etcd::CallOptions quick;
  quick.retry_timeout = std::chrono::milliseconds(500);
  if (!o_.scale_file.empty()) {
    // A new number in the file becomes the trainers' key, followed below like any other change.
    auto text = ReadFile(o_.scale_file);
    if (text.ok() && *text != scale_file_text_) {
      scale_file_text_ = *text;
      auto n = ParseInt64(Trim(*text), o_.scale_file);
      if (n.ok() && *n >= 0 && *n <= 1000) {
        (void)etcd_->Put(keys::LocalTrainers(o_.spec.name), std::to_string(*n), 0, quick);
      } else {
        console_.Event(o_.scale_file + " does not hold a number of trainers (0..1000); left as it is");
      }
    }
  }
  // Only a change of a wanted count scales (trainers that finished are not replaced).
  auto follow = [&](const std::string& key, int64_t* revision, int most, auto scale) {
    auto want = etcd_->Get(key, {}, quick);
    if (!want.ok() || want->kvs.empty() || want->kvs[0].mod_revision == *revision) return;
    *revision = want->kvs[0].mod_revision;
    auto n = ParseInt64(want->kvs[0].value, key);
    if (n.ok() && *n >= 0 && *n <= most) scale(static_cast<int>(*n));
  };
  follow(keys::LocalTrainers(o_.spec.name), &trainers_revision_, 1000, [&](int n) { ScaleTrainers(n); });
  if (elastic()) {
    follow(keys::LocalPservers(o_.spec.name), &pservers_revision_, job_.pservers, [&](int n) {
      if (n >= 1) ScalePservers(n);
    });
  }
}

void Supervisor::ScaleTrainers(int desired) { Scale(Role::kTrainer, desired); }

void Supervisor::ScalePservers(int desired) { Scale(Role::kPserver, desired); }

void Supervisor::Scale(Role role, int desired) {
  const bool trainers = role == Role::kTrainer;
  const char* what = trainers ? "trainers" : "pservers";
  int running = Active(role);
  if (desired == running || desired < 0) return;
  if (desired > running) {
    // New children take the lowest free slots (ids; a pserver's host index).
    std::set<int> used;
    for (const auto& m : procs_) {
      if (m->role() == role && (m->state.active() || m->state.alive())) used.insert(m->slot);
    }
    for (int slot = 0; running < desired; ++slot) {
      if (used.count(slot)) continue;
      Managed& m = trainers ? AddTrainer(slot) : AddPserver(slot);
      if (Status s = Spawn(m); !s.ok()) {
        failed_ = s;
        return;
      }
      ++running;
      console_.Event(fmt::format("scaled up: started {} ({} {})", m.name(), running, what));
    }
    return;
  }
  // Fewer: stop the highest slots. Trainers finish their step, acknowledge and deregister;
  // pservers hand their shards over first. SIGKILL after the grace period.
  std::vector<Managed*> active;
  for (auto& m : procs_) {
    if (m->role() == role && m->state.active()) active.push_back(m.get());
  }
  std::sort(active.begin(), active.end(), [](Managed* a, Managed* b) { return a->slot > b->slot; });
  for (int i = 0; i < running - desired; ++i) {
    // Said before it is done: the process may be gone before a line written after it.
    console_.Event(fmt::format("scaled down: stopping {}{} ({} {})", active[i]->name(),
                               trainers ? "" : " once it has handed its shards over", desired, what));
    if (active[i]->state.Stop().kind == ChildAction::Kind::kTerminate)
      active[i]->proc->Stop(trainers ? std::chrono::milliseconds(kTrainerStopGrace)
                                     : std::chrono::milliseconds(kPserverDrainGrace));
  }
}

}  // namespace tessera::local
