// Registry and MemberWatch (see registry.h).
#include "coord/registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <unordered_set>

#include "common/random.h"
#include "common/strings.h"
#include "coord/keys.h"

namespace tessera {

using etcd::Compare;
using etcd::Op;
using etcd::Txn;

static void SortMembers(std::vector<Member>* members) {
  std::sort(members->begin(), members->end(),
            [](const Member& a, const Member& b) { return MemberNameLess(a.name, b.name); });
}

static Member MemberFromKv(const etcd::KeyValue& kv) {
  Member m;
  m.key = kv.key;
  m.name = std::string(keys::LastElement(kv.key));
  m.value = kv.value;
  m.epoch = kv.create_revision;
  m.lease = kv.lease;
  return m;
}

MemberList MembersFromRange(const std::string& prefix, const etcd::RangeResult& range) {
  MemberList list;
  list.revision = range.revision;
  for (const auto& kv : range.kvs) {
    if (kv.key.size() <= prefix.size()) continue;
    // Only direct children: "<prefix><name>".
    if (kv.key.find('/', prefix.size()) != std::string::npos) continue;
    list.members.push_back(MemberFromKv(kv));
  }
  SortMembers(&list.members);
  return list;
}

Registry::Registry(etcd::EtcdClient* etcd, std::string prefix) : etcd_(etcd), prefix_(std::move(prefix)) {}

StatusOr<MemberList> Registry::List() {
  etcd::GetOptions o;
  o.prefix = true;
  TESSERA_ASSIGN_OR_RETURN(auto range, etcd_->Get(prefix_, o));
  return MembersFromRange(prefix_, range);
}

StatusOr<MemberList> Registry::ListKeys() {
  etcd::GetOptions o;
  o.prefix = true;
  o.keys_only = true;
  TESSERA_ASSIGN_OR_RETURN(auto range, etcd_->Get(prefix_, o));
  return MembersFromRange(prefix_, range);
}

StatusOr<Claim> Registry::ClaimIndex(int n, const std::string& value, int64_t lease, int only) {
  if (n < 1) return Status::InvalidArgument("cannot claim an index in [0, " + std::to_string(n) + ")");
  if (only >= n) {
    return Status::InvalidArgument("index " + std::to_string(only) + " is not in [0, " + std::to_string(n) + ")");
  }
  std::vector<int> candidates;
  for (int i = 0; i < n; ++i) {
    if (only < 0 || i == only) candidates.push_back(i);
  }
  TESSERA_ASSIGN_OR_RETURN(Claim claim, ClaimFirstFree(candidates, value, lease));
  if (claim.index < 0) {
    return Status::ResourceExhausted(only >= 0 ? "index " + std::to_string(only) + " under " + prefix_ + " is taken"
                                               : "all " + std::to_string(n) + " indices under " + prefix_ +
                                                     " are taken");
  }
  return claim;
}

std::vector<int> LowestFreeIndices(const MemberList& list, int count) {
  // The numeric names in a set first: the lowest `count` free ones are then found in
  // O(members + count), not one scan of the members per index tried.
  std::unordered_set<int64_t> taken;
  for (const auto& m : list.members) {
    auto i = ParseInt64(m.name, "");
    if (i.ok()) taken.insert(*i);
  }
  std::vector<int> free;
  for (int i = 0; static_cast<int>(free.size()) < count; ++i) {
    if (!taken.count(i)) free.push_back(i);
  }
  return free;
}

std::vector<int> ClaimCandidates(const MemberList& list, int attempt, int count, uint64_t seed) {
  if (attempt <= 0) return LowestFreeIndices(list, count);
  const int window = count << std::min(2 * attempt, 10);
  std::vector<int> free = LowestFreeIndices(list, window);
  std::mt19937_64 rng(seed);
  std::shuffle(free.begin(), free.end(), rng);
  free.resize(static_cast<size_t>(count));
  return free;
}

StatusOr<Claim> Registry::ClaimLowestFree(const std::string& value, int64_t lease, int attempts) {
  // A handful of candidates per transaction: enough that a few racing claimers do not make each
  // other start over, few enough to stay far below etcd's limit on operations per transaction.
  constexpr int kCandidates = 8;
  // The members are listed again every few lost rounds only: in between, the candidates others
  // took count as taken. A join storm of N claimers then reads O(N) keys each, not O(N) a round.
  constexpr int kRelistEvery = 4;
  const uint64_t seed = RandomSeed();
  MemberList list;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt % kRelistEvery == 0) {
      TESSERA_ASSIGN_OR_RETURN(list, ListKeys());
    }
    const std::vector<int> candidates = ClaimCandidates(list, attempt, kCandidates, seed + attempt);
    TESSERA_ASSIGN_OR_RETURN(Claim claim, ClaimFirstFree(candidates, value, lease));
    if (claim.index >= 0) return claim;
    for (int taken : candidates)
      list.members.push_back(Member{std::to_string(taken), prefix_ + std::to_string(taken)});
    SortMembers(&list.members);
  }
  return Status::Aborted("could not claim a free index under " + prefix_ + ": others took every candidate " +
                         std::to_string(attempts) + " times in a row");
}

StatusOr<std::vector<Member>> Registry::KeysOfLease(int64_t lease, const std::string& except) {
  std::vector<Member> out;
  if (lease == 0) {  // no lease to ask: every member without one
    TESSERA_ASSIGN_OR_RETURN(MemberList list, ListKeys());
    for (const auto& m : list.members)
      if (m.lease == 0 && m.key != except) out.push_back(m);
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(etcd::LeaseInfo info, etcd_->LeaseTimeToLive(lease, /*with_keys=*/true));
  for (const auto& key : info.keys) {
    if (key == except || key.rfind(prefix_, 0) != 0 || key.find('/', prefix_.size()) != std::string::npos)
      continue;
    TESSERA_ASSIGN_OR_RETURN(auto kv, etcd_->Get(key));  // its epoch (a key the lease lists is rare here)
    if (kv.kvs.empty() || kv.kvs[0].lease != lease) continue;
    out.push_back(MemberFromKv(kv.kvs[0]));
  }
  return out;
}

StatusOr<Claim> Registry::ClaimFirstFree(const std::vector<int>& candidates, const std::string& value,
                                         int64_t lease) {
  // Build "if key0 absent: put key0, else if key1 absent: put key1, else ..." inside out.
  Txn txn;
  for (size_t c = candidates.size(); c-- > 0;) {
    Txn level;
    std::string key = prefix_ + std::to_string(candidates[c]);
    level.compares.push_back(Compare::Absent(key));
    level.success.push_back(Op::Put(key, value, lease));
    if (c + 1 < candidates.size()) level.failure.push_back(Op::Nested(std::move(txn)));
    txn = std::move(level);
  }
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Commit(txn));
  Claim claim;
  const etcd::TxnResult* r = &result;
  for (int i : candidates) {
    if (r->succeeded) {
      // Nested responses carry no header: the key was created at the outer txn's revision.
      claim.index = i;
      claim.epoch = result.revision;
      claim.key = prefix_ + std::to_string(i);
      break;
    }
    if (r->results.empty() || !r->results[0].txn) break;
    r = r->results[0].txn.get();
  }
  // A transaction retried after a lost reply may have claimed an index already: keep exactly one.
  // The lease's own keys say which (etcd lists them per lease: no read of every member).
  TESSERA_ASSIGN_OR_RETURN(std::vector<Member> ours, KeysOfLease(lease, claim.key));
  for (const auto& m : ours) {
    auto idx = ParseInt64(m.name, "index");
    if (claim.index < 0 && idx.ok()) {
      claim.index = static_cast<int>(*idx);
      claim.epoch = m.epoch;
      claim.key = m.key;
      continue;
    }
    Txn release;
    release.compares.push_back(Compare::Lease(m.key, Compare::Result::kEqual, lease));
    release.success.push_back(Op::Delete(m.key));
    (void)etcd_->Commit(release);
  }
  return claim;
}

StatusOr<int64_t> Registry::Register(const std::string& name, const std::string& value, int64_t lease) {
  std::string key = prefix_ + name;
  Txn txn;
  txn.compares.push_back(Compare::Absent(key));
  txn.success.push_back(Op::Put(key, value, lease));
  txn.failure.push_back(Op::Get(key));
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Commit(txn));
  if (result.succeeded) return result.revision;
  if (!result.results.empty() && !result.results[0].range.kvs.empty()) {
    const auto& kv = result.results[0].range.kvs[0];
    if (kv.lease == lease && lease != 0) return kv.create_revision;  // our own earlier attempt
    return Status::AlreadyExists("member '" + name + "' under " + prefix_ + " is already registered (epoch " +
                                 std::to_string(kv.create_revision) + ")");
  }
  return Status::Aborted("registering '" + name + "' raced with its deletion; try again");
}

Status Registry::Update(const std::string& name, const std::string& value, int64_t epoch, int64_t lease) {
  std::string key = prefix_ + name;
  Txn txn;
  txn.compares.push_back(Compare::CreateRevision(key, Compare::Result::kEqual, epoch));
  txn.success.push_back(Op::Put(key, value, lease));
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Commit(txn));
  if (!result.succeeded) {
    return Status::FailedPrecondition("member '" + name + "' (epoch " + std::to_string(epoch) +
                                      ") is no longer registered");
  }
  return Status::OK();
}

Status Registry::Deregister(const std::string& name, int64_t epoch, const std::vector<etcd::Op>& also) {
  std::string key = prefix_ + name;
  Txn txn;
  txn.compares.push_back(Compare::CreateRevision(key, Compare::Result::kEqual, epoch));
  txn.success.push_back(Op::Delete(key));
  txn.success.insert(txn.success.end(), also.begin(), also.end());
  TESSERA_ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Commit(txn));
  (void)result;  // already gone is fine
  return Status::OK();
}

std::unique_ptr<MemberWatch> Registry::Watch(std::function<void(const MemberList&)> on_change) {
  return std::unique_ptr<MemberWatch>(new MemberWatch(etcd_, prefix_, std::move(on_change), nullptr));
}

std::unique_ptr<MemberWatch> Registry::WatchChanges(std::function<void(const MemberChanges&)> on_changes) {
  return std::unique_ptr<MemberWatch>(new MemberWatch(etcd_, prefix_, nullptr, std::move(on_changes)));
}

// ---- MemberWatch ------------------------------------------------------------------------------

MemberWatch::MemberWatch(etcd::EtcdClient* etcd, std::string prefix,
                         std::function<void(const MemberList&)> on_change,
                         std::function<void(const MemberChanges&)> on_changes)
    : etcd_(etcd),
      prefix_(std::move(prefix)),
      on_change_(std::move(on_change)),
      on_changes_(std::move(on_changes)) {
  thread_ = std::thread([this] { Run(); });
}

MemberWatch::~MemberWatch() { Cancel(); }

void MemberWatch::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

MemberList MemberWatch::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return list_;
}

bool MemberWatch::WaitFor(const std::function<bool(const MemberList&)>& pred,
                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pred(list_); });
}

void MemberWatch::Apply(const etcd::WatchUpdate& u) {
  MemberList copy;
  MemberChanges changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!u.status.ok()) {
      restart_ = true;
      cv_.notify_all();
      return;
    }
    list_.revision = std::max(list_.revision, u.revision);
    if (u.events.empty()) return;
    // Each event in O(log N) (and a move of the members after it): a storm of N joins costs a
    // watcher O(N log N), not O(N^2 log N).
    for (const auto& ev : u.events) {
      if (ev.kv.key.find('/', prefix_.size()) != std::string::npos) continue;
      std::string name(keys::LastElement(ev.kv.key));
      auto it =
          std::lower_bound(list_.members.begin(), list_.members.end(), name,
                           [](const Member& m, const std::string& n) { return MemberNameLess(m.name, n); });
      const bool found = it != list_.members.end() && it->name == name;
      if (ev.type == etcd::WatchEvent::Type::kDelete) {
        if (!found) continue;
        if (on_changes_) {
          MemberChange c;
          c.removed = true;
          c.member.name = std::move(name);
          c.member.key = ev.kv.key;
          changes.changes.push_back(std::move(c));
        }
        list_.members.erase(it);
        continue;
      }
      Member m = MemberFromKv(ev.kv);
      if (on_changes_) changes.changes.push_back(MemberChange{false, m});
      if (found) {
        *it = std::move(m);
      } else {
        list_.members.insert(it, std::move(m));
      }
    }
    changes.revision = list_.revision;
    if (on_change_) copy = list_;
  }
  cv_.notify_all();
  if (on_change_) on_change_(copy);
  if (on_changes_ && !changes.changes.empty()) on_changes_(changes);
}

void MemberWatch::Run() {
  Registry registry(etcd_, prefix_);
  while (!cancelled_) {
    auto listed = registry.List();
    if (!listed.ok()) {
      if (cancelled_ || etcd_->shut_down()) return;
      spdlog::warn("listing members under {} failed: {}; retrying", prefix_, listed.status().ToString());
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return cancelled_.load(); });
      continue;
    }
    MemberList copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      list_ = *listed;
      restart_ = false;
      copy = list_;
    }
    cv_.notify_all();
    if (on_change_) on_change_(copy);
    if (on_changes_) {
      MemberChanges all;
      all.relisted = true;
      all.revision = copy.revision;
      all.changes.reserve(copy.members.size());
      for (auto& m : copy.members) all.changes.push_back(MemberChange{false, std::move(m)});
      on_changes_(all);
    }
    etcd::WatchOptions wo;
    wo.prefix = true;
    wo.start_revision = copy.revision + 1;
    auto watcher = etcd_->Watch(prefix_, wo, [this](const etcd::WatchUpdate& u) { Apply(u); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return cancelled_.load() || restart_; });
    lock.unlock();
    watcher->Cancel();
  }
}

}  // namespace tessera
