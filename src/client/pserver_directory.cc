// PserverDirectory (see pserver_directory.h).
#include "client/pserver_directory.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "coord/keys.h"

namespace tessera {

PserverDirectory::PserverDirectory(etcd::EtcdClient* etcd, const std::string& job, int pservers)
    : n_(pservers), current_(pservers), ready_epoch_(pservers, 0) {
  pserver_watch_ =
      Registry(etcd, keys::PserverPrefix(job)).Watch([this](const MemberList& l) { OnPservers(l); });
  ready_watch_ =
      Registry(etcd, keys::PserverReadyPrefix(job)).Watch([this](const MemberList& l) { OnReady(l); });
}

PserverDirectory::~PserverDirectory() {
  Interrupt();
  pserver_watch_->Cancel();
  ready_watch_->Cancel();
}

void PserverDirectory::Interrupt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
  }
  cv_.notify_all();
}

void PserverDirectory::OnPservers(const MemberList& list) {
  std::vector<PserverAddress> now(n_);
  for (const auto& m : list.members) {
    auto idx = ParseInt64(m.name, "index");
    if (!idx.ok() || *idx < 0 || *idx >= n_) continue;
    auto j = nlohmann::json::parse(m.value, nullptr, false);
    if (j.is_discarded() || !j.contains("address") || !j["address"].is_string()) continue;
    auto endpoints = ParsePserverEndpoints(m.value);
    if (!endpoints.ok()) continue;
    now[*idx] = PserverAddress{j["address"].get<std::string>(), m.epoch, std::move(*endpoints)};
  }
  std::vector<std::pair<int, int64_t>> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n_; ++i) {
      if (now[i].epoch != current_[i].epoch) changed.emplace_back(i, now[i].epoch);
    }
    current_ = std::move(now);
  }
  cv_.notify_all();
  if (changed.empty()) return;
  std::lock_guard<std::mutex> lock(subs_mu_);
  for (const auto& [index, epoch] : changed) {
    for (const auto& s : subs_) {
      if (s.index == index) s.fn(epoch);
    }
  }
}

int PserverDirectory::Subscribe(int index, std::function<void(int64_t epoch)> fn) {
  std::lock_guard<std::mutex> lock(subs_mu_);
  int token = next_token_++;
  subs_.push_back(Subscriber{token, index, std::move(fn)});
  return token;
}

void PserverDirectory::Unsubscribe(int token) {
  std::lock_guard<std::mutex> lock(subs_mu_);
  std::erase_if(subs_, [&](const Subscriber& s) { return s.token == token; });
}

void PserverDirectory::OnReady(const MemberList& list) {
  std::vector<int64_t> now(n_, 0);
  for (const auto& m : list.members) {
    auto idx = ParseInt64(m.name, "index");
    if (!idx.ok() || *idx < 0 || *idx >= n_) continue;
    auto j = nlohmann::json::parse(m.value, nullptr, false);
    if (j.is_discarded() || !j.contains("epoch") || !j["epoch"].is_number_integer()) continue;
    now[*idx] = j["epoch"].get<int64_t>();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_epoch_ = std::move(now);
  }
  cv_.notify_all();
}

StatusOr<PserverAddress> PserverDirectory::Resolve(int index, const Deadline& deadline, int64_t not_epoch) {
  std::unique_lock<std::mutex> lock(mu_);
  bool ok = cv_.wait_until(lock, deadline.at(), [&] {
    return interrupted_ || (current_[index].epoch != 0 && current_[index].epoch != not_epoch);
  });
  if (interrupted_) return Status::Cancelled("client is closing");
  if (!ok) {
    if (current_[index].epoch == 0) {
      return Status::NotFound("pserver " + std::to_string(index) + " is not registered (is it running?)");
    }
    return current_[index];  // no newer registration: retry the current one
  }
  return current_[index];
}

bool PserverDirectory::ReadyLocked(int index) const {
  return current_[index].epoch != 0 && ready_epoch_[index] == current_[index].epoch;
}

bool PserverDirectory::Ready(int index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ReadyLocked(index);
}

bool PserverDirectory::AllReady() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < n_; ++i) {
    if (!ReadyLocked(i)) return false;
  }
  return true;
}

Status PserverDirectory::WaitAllRegistered(const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all = [&] {
    for (const auto& a : current_) {
      if (a.epoch == 0) return false;
    }
    return true;
  };
  if (!cv_.wait_until(lock, deadline.at(), [&] { return interrupted_ || all(); })) {
    std::string missing;
    for (int i = 0; i < n_; ++i) {
      if (current_[i].epoch == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    }
    return Status::DeadlineExceeded("pservers " + missing + " never registered");
  }
  return interrupted_ ? Status::Cancelled("client is closing") : Status::OK();
}

Status PserverDirectory::WaitAllReady(const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all = [&] {
    for (int i = 0; i < n_; ++i) {
      if (!ReadyLocked(i)) return false;
    }
    return true;
  };
  if (!cv_.wait_until(lock, deadline.at(), [&] { return interrupted_ || all(); })) {
    return Status::DeadlineExceeded("pservers were not initialized in time");
  }
  return interrupted_ ? Status::Cancelled("client is closing") : Status::OK();
}

}  // namespace tessera
