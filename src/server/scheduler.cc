// The job scheduler's rules (see scheduler.h).
#include "server/scheduler.h"

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

std::vector<Decision> Schedule(const SchedInput& in) {
  std::vector<Decision> out;
  // Working copies: trainers of running jobs as decided so far.
  std::vector<SchedJob> jobs = in.jobs;
  std::vector<const SchedJob*> queued, running;
  Resources used;
  std::map<std::string, Usage> ns_used;
  for (auto& j : jobs) {
    if (j.running) {
      running.push_back(&j);
      Usage u = UsageOf(j, j.trainers);
      used = Add(used, u.resources);
      AddUsage(&ns_used[j.ns], u);
    } else {
      queued.push_back(&j);
    }
  }
  std::sort(queued.begin(), queued.end(), Before);
  auto free_now = [&] { return Add(in.capacity, used, -1); };
  auto quota_of = [&](const std::string& ns) {
    auto it = in.quotas.find(ns);
    return it == in.quotas.end() ? QuotaLimits{} : it->second;
  };
  // Largest t in [lo, hi] that fits capacity and quota (with the job's current usage removed), or -1.
  auto largest_fit = [&](const SchedJob& j, int lo, int hi, int current) {
    for (int t = hi; t >= lo; --t) {
      Usage now = current > 0 ? UsageOf(j, current) : Usage{};
      Usage want = UsageOf(j, t);
      Usage ns = ns_used[j.ns];
      AddUsage(&ns, now, -1);
      AddUsage(&ns, want);
      Resources cap_free = Add(free_now(), now.resources);
      if (Short(want.resources, cap_free).empty() && OverQuota(ns, quota_of(j.ns)).empty()) return t;
    }
    return -1;
  };
  std::optional<int64_t> blocked;  // priority of the first job waiting for resources
  std::string blocked_id;
  for (const SchedJob* q : queued) {
    Usage min_use = UsageOf(*q, q->min_trainers);
    Usage ns = ns_used[q->ns];
    AddUsage(&ns, min_use);
    if (std::string over = OverQuota(ns, quota_of(q->ns)); !over.empty()) {
      out.push_back(
          {Decision::kWait, q->id, 0, "over the quota of namespace '" + q->ns + "': would use " + over});
      continue;
    }
    if (blocked && q->priority <= *blocked) {
      out.push_back({Decision::kWait, q->id, 0, "waiting behind job " + blocked_id + " for resources"});
      continue;
    }
    auto start = [&](int t, const std::string& why) {
      out.push_back({Decision::kStart, q->id, t, why});
      Usage u = UsageOf(*q, t);
      used = Add(used, u.resources);
      AddUsage(&ns_used[q->ns], u);
    };
    if (int t = largest_fit(*q, q->min_trainers, q->max_trainers, 0); t >= 0) {
      start(t, "resources free");
      continue;
    }
    // Shrink lower-priority elastic jobs, lowest priority and newest first.
    std::vector<SchedJob*> victims;
    for (auto& j : jobs)
      if (j.running && j.priority < q->priority && j.trainers > j.min_trainers) victims.push_back(&j);
    std::sort(victims.begin(), victims.end(),
              [](const SchedJob* a, const SchedJob* b) { return Before(b, a); });
    std::vector<std::pair<SchedJob*, int>> undo;  // job, trainers before
    bool fits = false;
    for (SchedJob* v : victims) {
      const int before = v->trainers;
      while (v->trainers > v->min_trainers && !fits) {
        --v->trainers;
        used = Add(used, v->per_process, -1);
        AddUsage(&ns_used[v->ns], Usage{0, 1, 0, v->per_process}, -1);
        fits = Short(min_use.resources, free_now()).empty();
      }
      if (v->trainers != before) undo.push_back({v, before});
      if (fits) break;
    }
    if (fits) {
      for (auto& [v, before] : undo)
        out.push_back(
            {Decision::kResize, v->id, v->trainers,
             "shrunk from " + std::to_string(before) + " trainers for job " + q->id + " of higher priority"});
      start(q->min_trainers, "started on resources freed by shrinking lower-priority jobs");
      continue;
    }
    for (auto& [v, before] : undo) {
      used = Add(used, v->per_process, before - v->trainers);
      AddUsage(&ns_used[v->ns],
               Usage{0, before - v->trainers, 0, Add(Resources{}, v->per_process, before - v->trainers)});
      v->trainers = before;
    }
    out.push_back(
        {Decision::kWait, q->id, 0, "waiting for resources: " + Short(min_use.resources, free_now())});
    if (!blocked) {
      blocked = q->priority;
      blocked_id = q->id;
    }
  }
  if (!blocked) {
    std::vector<SchedJob*> growable;
    for (auto& j : jobs) {
      bool shrunk_now = false;
      for (const auto& d : out) shrunk_now = shrunk_now || (d.kind == Decision::kResize && d.id == j.id);
      if (j.running && j.trainers < j.max_trainers && !shrunk_now) growable.push_back(&j);
    }
    std::sort(growable.begin(), growable.end(),
              [](const SchedJob* a, const SchedJob* b) { return Before(a, b); });
    for (SchedJob* g : growable) {
      int t = largest_fit(*g, g->trainers + 1, g->max_trainers, g->trainers);
      if (t < 0) continue;
      Usage before = UsageOf(*g, g->trainers), after = UsageOf(*g, t);
      used = Add(Add(used, before.resources, -1), after.resources);
      AddUsage(&ns_used[g->ns], before, -1);
      AddUsage(&ns_used[g->ns], after);
      out.push_back({Decision::kResize, g->id, t,
                     "grown from " + std::to_string(g->trainers) + " trainers: resources free"});
      g->trainers = t;
    }
  }
  return out;
}

}  // namespace tessera::server
