// word2vec: skip-gram with negative sampling over text records (one line each), as in the
// cluster-training example the design grew from. Words are lower-cased runs of letters (tokens
// with digits, like verse numbers, are skipped) hashed to 64-bit keys of two sparse tables:
// "in" (the word vectors) and "out" (context vectors). Negatives come from a running sample of
// the tokens seen so far (which follows the unigram distribution). Settings: dim (32), window
// (3), negatives (5). Cost: the negative-sampling loss summed per line. Evaluation: a
// nearest-neighbour sanity check on the held-out text: words that often occur together should be
// closer than random pairs of frequent words ("related" minus "random" mean cosine similarity),
// and the nearest neighbours of a few frequent words are logged.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <random>
#include <unordered_map>

#include "common/hash.h"
#include "models/metrics.h"
#include "models/model.h"

namespace tessera::models {
namespace {

std::vector<std::string> Tokenize(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool digits = false;
  auto flush = [&] {
    if (!cur.empty() && !digits) out.push_back(cur);
    cur.clear();
    digits = false;
  };
  for (char ch : line) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalpha(c)) {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else if (std::isdigit(c)) {
      digits = true;
    } else if (std::isspace(c)) {
      flush();
    } else if (c == '\'') {
      // keep words like "lord's" whole: drop the apostrophe
    } else {
      // punctuation ends a word but does not spoil it
      if (!cur.empty() && !digits) out.push_back(cur);
      cur.clear();
    }
  }
  flush();
  return out;
}

uint64_t Key(const std::string& w) { return Hash64(w, 7); }

class Word2vec : public Model {
 public:
  explicit Word2vec(const ModelOptions& o)
      : opts_(o),
        dim_(static_cast<int>(o.Int("dim", 32))),
        window_(static_cast<int>(o.Int("window", 3))),
        negatives_(static_cast<int>(o.Int("negatives", 5))),
        rng_(o.seed) {}

  std::string name() const override { return "word2vec"; }
  std::string record_type() const override { return "line"; }

  Status Declare(Client& client) override {
    if (dim_ < 1 || window_ < 1 || negatives_ < 0)
      return Status::InvalidArgument("word2vec: bad dim/window/negatives");
    InitializerConfig in;
    in.type = InitializerConfig::Type::kUniform;
    in.a = -0.5f / static_cast<float>(dim_);
    in.b = 0.5f / static_cast<float>(dim_);
    in.seed = opts_.seed;
    TESSERA_RETURN_IF_ERROR(client.AddSparse("in", dim_, in));
    return client.AddSparse("out", dim_, InitializerConfig{});
  }

  StatusOr<StepResult> Step(Client& client, const std::vector<std::string>& records,
                            Gradients* grads) override {
    // Pairs (center, context, +1) and (center, negative, 0) with keys indexed per table.
    struct Pair {
      size_t in, out;
      int label;
    };
    std::vector<Pair> pairs;
    in_keys_.clear();
    out_keys_.clear();
    std::unordered_map<uint64_t, size_t> in_index, out_index;
    auto idx = [](std::unordered_map<uint64_t, size_t>& m, std::vector<uint64_t>& keys, uint64_t k) {
      auto [it, inserted] = m.try_emplace(k, keys.size());
      if (inserted) keys.push_back(k);
      return it->second;
    };
    for (const auto& line : records) {
      auto words = Tokenize(line);
      std::vector<uint64_t> ks;
      for (const auto& w : words) ks.push_back(Key(w));
      for (size_t i = 0; i < ks.size(); ++i) {
        Remember(ks[i]);
        size_t c = idx(in_index, in_keys_, ks[i]);
        size_t lo = i >= static_cast<size_t>(window_) ? i - window_ : 0;
        size_t hi = std::min(ks.size(), i + window_ + 1);
        for (size_t j = lo; j < hi; ++j) {
          if (j == i) continue;
          pairs.push_back({c, idx(out_index, out_keys_, ks[j]), 1});
          for (int n = 0; n < negatives_ && !seen_.empty(); ++n) {
            uint64_t neg = seen_[rng_() % seen_.size()];
            if (neg == ks[j]) continue;
            pairs.push_back({c, idx(out_index, out_keys_, neg), 0});
          }
        }
      }
    }
    in_rows_.resize(in_keys_.size() * dim_);
    out_rows_.resize(out_keys_.size() * dim_);
    Handle a = client.SparsePull("in", in_keys_, in_rows_.data());
    Handle b = client.SparsePull("out", out_keys_, out_rows_.data());
    TESSERA_RETURN_IF_ERROR(a.Wait());
    TESSERA_RETURN_IF_ERROR(b.Wait());
    g_in_.assign(in_rows_.size(), 0.0f);
    g_out_.assign(out_rows_.size(), 0.0f);
    double cost = 0;
    for (const auto& p : pairs) {
      const float* u = in_rows_.data() + p.in * dim_;
      const float* v = out_rows_.data() + p.out * dim_;
      float dot = 0;
      for (int d = 0; d < dim_; ++d) dot += u[d] * v[d];
      float s = Sigmoid(dot);
      cost -= p.label ? std::log(std::max(s, 1e-7f)) : std::log(std::max(1 - s, 1e-7f));
      float g = s - static_cast<float>(p.label);
      float* gu = g_in_.data() + p.in * dim_;
      float* gv = g_out_.data() + p.out * dim_;
      for (int d = 0; d < dim_; ++d) {
        gu[d] += g * v[d];
        gv[d] += g * u[d];
      }
    }
    grads->Sparse("in", in_keys_, g_in_);
    grads->Sparse("out", out_keys_, g_out_);
    return StepResult{cost, static_cast<int64_t>(records.size())};
  }

  StatusOr<std::vector<Metric>> Evaluate(Client& client, dataset::DatasetReader& eval) override {
    // Frequent words of the held-out text, and how often pairs of them occur together.
    std::unordered_map<std::string, int64_t> count;
    std::vector<std::vector<std::string>> lines;
    std::vector<std::string_view> recs;
    for (size_t c = 0; c < eval.manifest().chunks.size(); ++c) {
      TESSERA_RETURN_IF_ERROR(eval.ReadChunk(c, &recs));
      for (auto r : recs) {
        lines.push_back(Tokenize(r));
        for (const auto& w : lines.back()) ++count[w];
      }
    }
    std::vector<std::pair<int64_t, std::string>> ranked;
    for (const auto& [w, n] : count) ranked.emplace_back(n, w);
    std::sort(ranked.rbegin(), ranked.rend());
    // Skip the most frequent (function) words; keep the next few hundred.
    std::vector<std::string> vocab;
    for (size_t i = 40; i < ranked.size() && vocab.size() < 400; ++i) vocab.push_back(ranked[i].second);
    if (vocab.size() < 20) return Status::InvalidArgument("word2vec: the evaluation text is too small");
    std::unordered_map<std::string, size_t> vi;
    for (size_t i = 0; i < vocab.size(); ++i) vi[vocab[i]] = i;
    std::map<std::pair<size_t, size_t>, int64_t> together;
    for (const auto& ws : lines) {
      for (size_t i = 0; i < ws.size(); ++i) {
        auto a = vi.find(ws[i]);
        if (a == vi.end()) continue;
        for (size_t j = i + 1; j < std::min(ws.size(), i + window_ + 1); ++j) {
          auto b = vi.find(ws[j]);
          if (b == vi.end() || a->second == b->second) continue;
          ++together[{std::min(a->second, b->second), std::max(a->second, b->second)}];
        }
      }
    }
    std::vector<std::pair<int64_t, std::pair<size_t, size_t>>> top;
    for (const auto& [p, n] : together) top.push_back({n, p});
    std::sort(top.rbegin(), top.rend());
    top.resize(std::min<size_t>(top.size(), 100));
    // The vectors of the vocabulary.
    std::vector<uint64_t> keys;
    for (const auto& w : vocab) keys.push_back(Key(w));
    std::vector<float> vecs(keys.size() * dim_);
    TESSERA_RETURN_IF_ERROR(client.SparsePull("in", keys, vecs.data()).Wait());
    auto cosine = [&](size_t a, size_t b) {
      const float* x = vecs.data() + a * dim_;
      const float* y = vecs.data() + b * dim_;
      double d = 0, nx = 0, ny = 0;
      for (int k = 0; k < dim_; ++k) {
        d += x[k] * y[k];
        nx += x[k] * x[k];
        ny += y[k] * y[k];
      }
      return nx > 0 && ny > 0 ? d / std::sqrt(nx * ny) : 0.0;
    };
    double related = 0;
    for (const auto& t : top) related += cosine(t.second.first, t.second.second);
    related /= std::max<size_t>(1, top.size());
    std::mt19937_64 r(17);
    double random = 0;
    const int kRandom = 1000;
    for (int i = 0; i < kRandom; ++i) random += cosine(r() % vocab.size(), r() % vocab.size());
    random /= kRandom;
    // Nearest neighbours of a few frequent words, for people to look at.
    for (size_t probe = 0; probe < 3 && probe < vocab.size(); ++probe) {
      std::vector<std::pair<double, size_t>> near;
      for (size_t j = 0; j < vocab.size(); ++j) {
        if (j != probe) near.push_back({cosine(probe, j), j});
      }
      std::partial_sort(near.begin(), near.begin() + 5, near.end(), std::greater<>());
      std::string s;
      for (int k = 0; k < 5; ++k) s += (k ? ", " : "") + vocab[near[k].second];
      spdlog::info("word2vec: nearest to '{}': {}", vocab[probe], s);
    }
    return std::vector<Metric>{
        {"related_minus_random", related - random}, {"related", related}, {"random", random}};
  }

 private:
  // Keeps a running sample of tokens (reservoir sampling) for negative sampling.
  void Remember(uint64_t key) {
    ++tokens_;
    if (seen_.size() < 1000000) {
      seen_.push_back(key);
    } else {
      uint64_t j = rng_() % tokens_;
      if (j < seen_.size()) seen_[j] = key;
    }
  }

  ModelOptions opts_;
  int dim_, window_, negatives_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> seen_;
  uint64_t tokens_ = 0;
  std::vector<uint64_t> in_keys_, out_keys_;
  std::vector<float> in_rows_, out_rows_, g_in_, g_out_;
};

}  // namespace

std::unique_ptr<Model> NewWord2vec(const ModelOptions& o) { return std::make_unique<Word2vec>(o); }

}  // namespace tessera::models
