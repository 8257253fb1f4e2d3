// Data positions for consistent checkpoints (see position.h).
#include "master/position.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace tessera::master {
namespace {

// The done bitmap as hex, four tasks per character (task 4k+i is bit i of character k).
std::string BitsToHex(const std::vector<bool>& bits) {
  static const char kHex[] = "0123456789abcdef";
  std::vector<int> nibbles((bits.size() + 3) / 4, 0);
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) nibbles[i / 4] |= 1 << (i % 4);
  }
  std::string out;
  for (int n : nibbles) out.push_back(kHex[n]);
  return out;
}

bool HexToBits(const std::string& hex, int64_t n, std::vector<bool>* bits) {
  if (static_cast<int64_t>(hex.size()) != (n + 3) / 4) return false;
  bits->assign(static_cast<size_t>(n), false);
  for (size_t k = 0; k < hex.size(); ++k) {
    char c = hex[k];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    for (int i = 0; i < 4; ++i) {
      size_t t = k * 4 + static_cast<size_t>(i);
      if (v & (1 << i)) {
        if (t >= bits->size()) return false;
        (*bits)[t] = true;
      }
    }
  }
  return true;
}

}  // namespace

DataPosition DataPosition::Start(int64_t tasks) {
  DataPosition p;
  p.done.assign(static_cast<size_t>(tasks), false);
  return p;
}

std::string DataPosition::ToJson() const {
  nlohmann::json j;
  j["version"] = version;
  j["pass"] = pass;
  j["tasks"] = done.size();
  j["done"] = BitsToHex(done);
  auto parts = nlohmann::json::array();
  for (const auto& [task, records] : partial) parts.push_back({task, records});
  j["partial"] = parts;
  return j.dump();
}

StatusOr<DataPosition> DataPosition::FromJson(const std::string& json, int64_t tasks) {
  auto bad = [](const std::string& what) { return Status::DataLoss("saved data position: " + what); };
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  DataPosition p;
  try {
    p.version = j.at("version").get<int64_t>();
    p.pass = j.at("pass").get<int>();
    if (j.at("tasks").get<int64_t>() != tasks) {
      return bad("made for " + std::to_string(j.at("tasks").get<int64_t>()) + " tasks, the queue has " +
                 std::to_string(tasks));
    }
    if (!HexToBits(j.at("done").get<std::string>(), tasks, &p.done)) return bad("bad done bitmap");
    for (const auto& e : j.at("partial")) {
      int64_t task = e.at(0).get<int64_t>(), records = e.at(1).get<int64_t>();
      if (task < 0 || task >= tasks || records < 0) return bad("bad partial task " + e.dump());
      p.partial.emplace_back(task, records);
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  if (p.version < 0 || p.pass < 0) return bad("negative version or pass");
  return p;
}

void PositionBook::Add(const TrainerPosition& p) {
  first_step_[p.trainer] = p.first_step;
  reports_[p.version][p.trainer] = p;
}

std::vector<int64_t> PositionBook::Complete() const {
  std::vector<int64_t> out;
  for (const auto& t : live_) {
    if (!first_step_.count(t)) return out;  // not heard from yet: it may hold data of any version
  }
  for (const auto& [version, by_trainer] : reports_) {
    bool complete = true;
    for (const auto& t : live_) {
      if (by_trainer.count(t) || first_step_.at(t) > version) continue;
      complete = false;
      break;
    }
    if (complete) out.push_back(version);
  }
  return out;
}

std::vector<TrainerPosition> PositionBook::ReportsAt(int64_t version) const {
  std::vector<TrainerPosition> out;
  auto it = reports_.find(version);
  if (it == reports_.end()) return out;
  for (const auto& [t, p] : it->second) out.push_back(p);
  // Trainer ids are numbers: continue their tasks in trainer order.
  std::stable_sort(out.begin(), out.end(), [](const TrainerPosition& a, const TrainerPosition& b) {
    return a.trainer.size() != b.trainer.size() ? a.trainer.size() < b.trainer.size() : a.trainer < b.trainer;
  });
  return out;
}

void PositionBook::ForgetThrough(int64_t version) {
  reports_.erase(reports_.begin(), reports_.upper_bound(version));
}

std::optional<int64_t> ChooseRollbackVersion(int pservers, const std::map<int, std::set<int64_t>>& good,
                                             const std::set<int64_t>& positions) {
  auto first = good.find(0);
  if (pservers < 1 || first == good.end()) return std::nullopt;
  for (auto it = first->second.rbegin(); it != first->second.rend(); ++it) {
    int64_t v = *it;
    if (v != 0 && !positions.count(v)) continue;
    bool everywhere = true;
    for (int i = 1; i < pservers && everywhere; ++i) {
      auto g = good.find(i);
      everywhere = g != good.end() && g->second.count(v);
    }
    if (everywhere) return v;
  }
  return std::nullopt;
}

std::string DescribeRollbackCandidates(int pservers, const std::map<int, std::set<int64_t>>& good,
                                       const std::set<int64_t>& positions) {
  auto list = [](const std::set<int64_t>& v) {
    std::vector<std::string> parts;
    for (int64_t x : v) parts.push_back(std::to_string(x));
    return "[" + Join(parts, ",") + "]";
  };
  std::string out;
  for (int i = 0; i < pservers; ++i) {
    auto g = good.find(i);
    out += "pserver " + std::to_string(i) + " holds " +
           list(g == good.end() ? std::set<int64_t>() : g->second) + "; ";
  }
  return out + "data positions saved for " + list(positions);
}

}  // namespace tessera::master
