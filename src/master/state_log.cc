// StateLog (see state_log.h).
#include "master/state_log.h"

#include <spdlog/spdlog.h>
#include <zstd.h>

#include <cstdio>

#include "common/bytes.h"
#include "common/strings.h"
#include "coord/keys.h"

namespace tessera::master {
namespace {
constexpr uint64_t kBaseMagic = 0x54534231;  // "TSB1"
}

StateLog::StateLog(etcd::EtcdClient* etcd, std::string job, Fence fence, int compact_every)
    : etcd_(etcd), job_(std::move(job)), fence_(std::move(fence)), compact_every_(compact_every) {}

StateLog::~StateLog() { Stop(); }

std::string StateLog::BaseKey() const { return keys::MasterStatePrefix(job_) + "base"; }

std::string StateLog::DeltaKey(int64_t seq) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(seq));
  return keys::MasterStatePrefix(job_) + "delta/" + buf;
}

std::string StateLog::EncodeBase(int64_t seq, const std::string& snapshot) const {
  std::string packed(ZSTD_compressBound(snapshot.size()), '\0');
  packed.resize(ZSTD_compress(packed.data(), packed.size(), snapshot.data(), snapshot.size(), 3));
  std::string out;
  ByteWriter w(&out);
  w.PutVarint(kBaseMagic);
  w.PutVarint(static_cast<uint64_t>(seq));
  w.PutString(settings_);
  w.PutVarint(snapshot.size());
  w.PutString(packed);
  return out;
}

StatusOr<std::optional<LoadedState>> StateLog::Load() {
  TESSERA_ASSIGN_OR_RETURN(auto base, etcd_->Get(BaseKey()));
  if (base.kvs.empty()) return std::optional<LoadedState>();
  LoadedState s;
  ByteReader r(base.kvs[0].value);
  uint64_t magic, seq, raw_size;
  std::string packed;
  if (!r.GetVarint(&magic) || magic != kBaseMagic || !r.GetVarint(&seq) || !r.GetString(&s.settings) ||
      !r.GetVarint(&raw_size) || !r.GetString(&packed) || raw_size > (uint64_t{1} << 30)) {
    return Status::DataLoss(BaseKey() + " is corrupt");
  }
  s.snapshot.resize(raw_size);
  size_t n = ZSTD_decompress(s.snapshot.data(), s.snapshot.size(), packed.data(), packed.size());
  if (ZSTD_isError(n) || n != raw_size) return Status::DataLoss(BaseKey() + ": snapshot does not decompress");
  s.seq = static_cast<int64_t>(seq);
  etcd::GetOptions o;
  o.prefix = true;
  o.sort = etcd::GetOptions::Sort::kKeyAscend;
  TESSERA_ASSIGN_OR_RETURN(auto deltas, etcd_->Get(keys::MasterStatePrefix(job_) + "delta/", o));
  for (const auto& kv : deltas.kvs) {
    auto d = ParseInt64(keys::LastElement(kv.key), "delta sequence");
    if (!d.ok()) return Status::DataLoss(kv.key + ": not a delta key");
    if (*d <= s.seq) continue;  // left over from before the base (a compaction raced a crash)
    if (*d != s.seq + 1) {
      return Status::DataLoss("master state: delta " + std::to_string(*d) + " follows " +
                              std::to_string(s.seq) + " (a delta is missing)");
    }
    s.deltas.push_back(kv.value);
    s.seq = *d;
  }
  return std::optional<LoadedState>(std::move(s));
}

Status StateLog::Commit(const etcd::Txn& txn) {
  auto r = Election::FencedCommit(etcd_, fence_, txn);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kFailedPrecondition) {
      return Status::Aborted("deposed: " + r.status().message());
    }
    return r.status();
  }
  return Status::OK();
}

Status StateLog::WriteBase(const std::string& settings, const std::string& snapshot, int64_t seq) {
  settings_ = settings;
  etcd::Txn txn;
  std::string value = EncodeBase(seq, snapshot);
  txn.success.push_back(etcd::Op::Put(BaseKey(), value));
  txn.success.push_back(etcd::Op::Delete(keys::MasterStatePrefix(job_) + "delta/", /*prefix=*/true));
  bytes_written_ += static_cast<int64_t>(value.size());
  ++writes_;
  return Commit(txn);
}

void StateLog::Start(int64_t seq, std::string settings) {
  seq_ = seq;
  settings_ = std::move(settings);
  thread_ = std::thread([this] { Run(); });
}

uint64_t StateLog::Append(std::string events) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t t = next_ticket_++;
  queue_.push_back(Item{false, std::move(events), t});
  ++appended_since_base_;
  cv_.notify_all();
  return t;
}

bool StateLog::WantsCompaction() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appended_since_base_ >= compact_every_;
}

uint64_t StateLog::Compact(std::string snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t t = next_ticket_++;
  queue_.push_back(Item{true, std::move(snapshot), t});
  appended_since_base_ = 0;
  cv_.notify_all();
  return t;
}

uint64_t StateLog::LastTicket() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ticket_ - 1;
}

Status StateLog::WaitDurable(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return durable_ >= ticket || !failure_.ok() || stop_; });
  if (durable_ >= ticket) return Status::OK();
  if (!failure_.ok()) return failure_;
  return Status::Unavailable("master is stopping");
}

Status StateLog::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void StateLog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StateLog::Run() {
  while (true) {
    std::vector<Item> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left
      if (queue_.front().base) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      } else {
        while (!queue_.empty() && !queue_.front().base) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
    }
    int64_t seq = seq_ + 1;
    etcd::Txn txn;
    std::string value;
    if (batch[0].base) {
      value = EncodeBase(seq, batch[0].data);
      txn.success.push_back(etcd::Op::Put(BaseKey(), value));
      txn.success.push_back(etcd::Op::Delete(keys::MasterStatePrefix(job_) + "delta/", /*prefix=*/true));
    } else {
      ByteWriter w(&value);
      w.PutVarint(batch.size());
      for (const auto& item : batch) w.PutString(item.data);
      txn.success.push_back(etcd::Op::Put(DeltaKey(seq), value));
    }
    Status s = Commit(txn);
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      failure_ = s;
      spdlog::error("master state could not be written: {}", s.ToString());
      cv_.notify_all();
      return;
    }
    seq_ = seq;
    durable_ = batch.back().ticket;
    bytes_written_ += static_cast<int64_t>(value.size());
    ++writes_;
    cv_.notify_all();
  }
}

}  // namespace tessera::master
