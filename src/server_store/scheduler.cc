// The job scheduler's rules (see scheduler.h).
#include "server_store/scheduler.h"

#include <algorithm>
#include <cstdio>

namespace tessera::server {
namespace {

constexpr double kEps = 1e-9;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Resources Add(Resources a, const Resources& b, double k = 1) {
  a.cpu += b.cpu * k;
  a.memory_mb += static_cast<int64_t>(b.memory_mb * k);
  a.gpus += static_cast<int64_t>(b.gpus * k);
  return a;
}

void AddUsage(Usage* u, const Usage& d, int sign = 1) {
  u->jobs += sign * d.jobs;
  u->trainers += sign * d.trainers;
  u->pservers += sign * d.pservers;
  u->resources = Add(u->resources, d.resources, sign);
}

bool Before(const SchedJob* a, const SchedJob* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->submitted_ms != b->submitted_ms) return a->submitted_ms < b->submitted_ms;
  return a->id < b->id;
}

}  // namespace

Usage UsageOf(const SchedJob& j, int trainers) {
  Usage u;
  u.jobs = 1;
  u.trainers = trainers;
  u.pservers = j.pservers;
  u.resources = Add(Resources{}, j.per_process, j.pservers + trainers);
  return u;
}

Usage NamespaceUsage(const SchedInput& in, const std::string& ns) {
  Usage u;
  for (const auto& j : in.jobs)
    if (j.running && j.ns == ns) AddUsage(&u, UsageOf(j, j.trainers));
  return u;
}

std::string OverQuota(const Usage& u, const QuotaLimits& q) {
  auto over = [](int64_t used, const std::optional<int64_t>& limit, const char* what) -> std::string {
    if (!limit || used <= *limit) return "";
    return std::to_string(used) + " " + what + " (quota " + std::to_string(*limit) + ")";
  };
  for (std::string s :
       {over(u.jobs, q.jobs, "concurrent jobs"), over(u.trainers, q.trainers, "trainers"),
        over(u.pservers, q.pservers, "pservers"), over(u.resources.memory_mb, q.memory_mb, "MB of memory"),
        over(u.resources.gpus, q.gpus, "GPUs")})
    if (!s.empty()) return s;
  if (q.cpu && u.resources.cpu > *q.cpu + kEps)
    return Num(u.resources.cpu) + " CPUs (quota " + Num(*q.cpu) + ")";
  return "";
}

std::string Short(const Resources& need, const Resources& free) {
  if (need.cpu > free.cpu + kEps)
    return "needs " + Num(need.cpu) + " CPUs, " + Num(std::max(0.0, free.cpu)) + " free";
  if (need.memory_mb > free.memory_mb)
    return "needs " + std::to_string(need.memory_mb) + " MB of memory, " +
           std::to_string(std::max<int64_t>(0, free.memory_mb)) + " free";
  if (need.gpus > free.gpus)
    return "needs " + std::to_string(need.gpus) + " GPUs, " +
           std::to_string(std::max<int64_t>(0, free.gpus)) + " free";
  return "";
}

namespace {

// One scheduling pass: the running jobs' usage as decided so far (working copies of the jobs,
// whose trainers change as jobs are shrunk and grown), and the decisions made.
class SchedulingPass {
 public:
  explicit SchedulingPass(const SchedInput& in) : in_(in), jobs_(in.jobs) {
    for (auto& j : jobs_) {
      if (!j.running) continue;
      Usage u = UsageOf(j, j.trainers);
      used_ = Add(used_, u.resources);
      AddUsage(&ns_used_[j.ns], u);
    }
  }

  std::vector<Decision> Run() {
    std::vector<const SchedJob*> queued;
    for (const auto& j : jobs_)
      if (!j.running) queued.push_back(&j);
    std::sort(queued.begin(), queued.end(), Before);
    for (const SchedJob* q : queued) Place(*q);
    if (!blocked_) Grow();
    return std::move(out_);
  }

 private:
  Resources FreeNow() const { return Add(in_.capacity, used_, -1); }

  QuotaLimits QuotaOf(const std::string& ns) const {
    auto it = in_.quotas.find(ns);
    return it == in_.quotas.end() ? QuotaLimits{} : it->second;
  }

  // Largest t in [lo, hi] that fits capacity and quota (with the job's current usage removed), or -1.
  int LargestFit(const SchedJob& j, int lo, int hi, int current) {
    for (int t = hi; t >= lo; --t) {
      Usage now = current > 0 ? UsageOf(j, current) : Usage{};
      Usage want = UsageOf(j, t);
      Usage ns = ns_used_[j.ns];
      AddUsage(&ns, now, -1);
      AddUsage(&ns, want);
      Resources cap_free = Add(FreeNow(), now.resources);
      if (Short(want.resources, cap_free).empty() && OverQuota(ns, QuotaOf(j.ns)).empty()) return t;
    }
    return -1;
  }

  void Start(const SchedJob& q, int t, const std::string& why) {
    out_.push_back({Decision::kStart, q.id, t, why});
    Usage u = UsageOf(q, t);
    used_ = Add(used_, u.resources);
    AddUsage(&ns_used_[q.ns], u);
  }

  // A queued job: started (as large as fits, else at its minimum on what shrinking lower-priority
  // elastic jobs frees), or left waiting with the reason.
  void Place(const SchedJob& q) {
    Usage min_use = UsageOf(q, q.min_trainers);
    Usage ns = ns_used_[q.ns];
    AddUsage(&ns, min_use);
    if (std::string over = OverQuota(ns, QuotaOf(q.ns)); !over.empty()) {
      out_.push_back(
          {Decision::kWait, q.id, 0, "over the quota of namespace '" + q.ns + "': would use " + over});
      return;
    }
    if (blocked_ && q.priority <= *blocked_) {
      out_.push_back({Decision::kWait, q.id, 0, "waiting behind job " + blocked_id_ + " for resources"});
      return;
    }
    if (int t = LargestFit(q, q.min_trainers, q.max_trainers, 0); t >= 0) {
      Start(q, t, "resources free");
      return;
    }
    if (ShrinkFor(q, min_use)) {
      Start(q, q.min_trainers, "started on resources freed by shrinking lower-priority jobs");
      return;
    }
    out_.push_back(
        {Decision::kWait, q.id, 0, "waiting for resources: " + Short(min_use.resources, FreeNow())});
    if (!blocked_) {
      blocked_ = q.priority;
      blocked_id_ = q.id;
    }
  }

  // Shrinks lower-priority elastic jobs, lowest priority and newest first, until `min_use` fits;
  // true (the resizes decided) if it does, else nothing is changed.
  bool ShrinkFor(const SchedJob& q, const Usage& min_use) {
    std::vector<SchedJob*> victims;
    for (auto& j : jobs_)
      if (j.running && j.priority < q.priority && j.trainers > j.min_trainers) victims.push_back(&j);
    std::sort(victims.begin(), victims.end(),
              [](const SchedJob* a, const SchedJob* b) { return Before(b, a); });
    std::vector<std::pair<SchedJob*, int>> undo;  // job, trainers before
    bool fits = false;
    for (SchedJob* v : victims) {
      const int before = v->trainers;
      while (v->trainers > v->min_trainers && !fits) {
        --v->trainers;
        used_ = Add(used_, v->per_process, -1);
        AddUsage(&ns_used_[v->ns], Usage{0, 1, 0, v->per_process}, -1);
        fits = Short(min_use.resources, FreeNow()).empty();
      }
      if (v->trainers != before) undo.push_back({v, before});
      if (fits) break;
    }
    if (fits) {
      for (auto& [v, before] : undo)
        out_.push_back(
            {Decision::kResize, v->id, v->trainers,
             "shrunk from " + std::to_string(before) + " trainers for job " + q.id + " of higher priority"});
      return true;
    }
    for (auto& [v, before] : undo) {
      used_ = Add(used_, v->per_process, before - v->trainers);
      AddUsage(&ns_used_[v->ns],
               Usage{0, before - v->trainers, 0, Add(Resources{}, v->per_process, before - v->trainers)});
      v->trainers = before;
    }
    return false;
  }

  // Nothing waits for resources: running elastic jobs not shrunk in this pass grow as far as fits,
  // in priority order.
  void Grow() {
    std::vector<SchedJob*> growable;
    for (auto& j : jobs_) {
      bool shrunk_now = false;
      for (const auto& d : out_) shrunk_now = shrunk_now || (d.kind == Decision::kResize && d.id == j.id);
      if (j.running && j.trainers < j.max_trainers && !shrunk_now) growable.push_back(&j);
    }
    std::sort(growable.begin(), growable.end(),
              [](const SchedJob* a, const SchedJob* b) { return Before(a, b); });
    for (SchedJob* g : growable) {
      int t = LargestFit(*g, g->trainers + 1, g->max_trainers, g->trainers);
      if (t < 0) continue;
      Usage before = UsageOf(*g, g->trainers), after = UsageOf(*g, t);
      used_ = Add(Add(used_, before.resources, -1), after.resources);
      AddUsage(&ns_used_[g->ns], before, -1);
      AddUsage(&ns_used_[g->ns], after);
      out_.push_back({Decision::kResize, g->id, t,
                      "grown from " + std::to_string(g->trainers) + " trainers: resources free"});
      g->trainers = t;
    }
  }

  const SchedInput& in_;
  std::vector<SchedJob> jobs_;
  Resources used_;
  std::map<std::string, Usage> ns_used_;
  std::vector<Decision> out_;
  std::optional<int64_t> blocked_;  // priority of the first job waiting for resources
  std::string blocked_id_;
};

}  // namespace

std::vector<Decision> Schedule(const SchedInput& in) { return SchedulingPass(in).Run(); }

}  // namespace tessera::server
