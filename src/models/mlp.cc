// mlp: a softmax classifier with one ReLU hidden layer, for image records (tessera.data.Example
// with pixel bytes and a numeric label, e.g. Fashion-MNIST). Settings: hidden (256), classes
// (10). Cost: cross-entropy summed over the batch. Evaluation: accuracy and mean loss.
#include <Eigen/Dense>
#include <cmath>
#include <functional>
#include <random>
#include <span>

#include "models/model.h"
#include "tessera/example.pb.h"

namespace tessera::models {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using Vec = Eigen::RowVectorXf;

class Mlp : public Model {
 public:
  explicit Mlp(const ModelOptions& o)
      : opts_(o),
        hidden_(o.Int("hidden", 256)),
        classes_(o.Int("classes", 10)),
        inputs_(o.Int("inputs", 784)) {}

  std::string name() const override { return "mlp"; }
  std::string record_type() const override { return "example"; }

  Status Declare(Client& client) override {
    if (hidden_ < 1 || classes_ < 2 || inputs_ < 1)
      return Status::InvalidArgument("mlp: bad hidden/classes/inputs");
    // Values and gradients in the client's dense memory, each set back to back in declaration
    // order: over shared memory the pserver reads the gradients and writes the values there.
    const size_t sizes[] = {static_cast<size_t>(inputs_ * hidden_), static_cast<size_t>(hidden_),
                            static_cast<size_t>(hidden_ * classes_), static_cast<size_t>(classes_)};
    const size_t total = sizes[0] + sizes[1] + sizes[2] + sizes[3];
    const size_t grads_at = (total + 15) / 16 * 16;  // the gradients start on 64 bytes too
    TESSERA_ASSIGN_OR_RETURN(std::span<float> memory, client.DenseMemory(grads_at + total));
    std::span<float>* parts[] = {&w1_, &b1_, &w2_, &b2_, &g_w1_, &g_b1_, &g_w2_, &g_b2_};
    size_t at = 0;
    for (int i = 0; i < 8; ++i) {
      if (i == 4) at = grads_at;
      *parts[i] = memory.subspan(at, sizes[i % 4]);
      at += sizes[i % 4];
    }
    // He-uniform initialization, seeded: every trainer computes the same values.
    std::mt19937_64 rng(opts_.seed);
    float l1 = std::sqrt(6.0f / static_cast<float>(inputs_)),
          l2 = std::sqrt(6.0f / static_cast<float>(hidden_));
    std::uniform_real_distribution<float> d1(-l1, l1), d2(-l2, l2);
    for (auto& v : w1_) v = d1(rng);
    for (auto& v : w2_) v = d2(rng);
    TESSERA_RETURN_IF_ERROR(client.AddDense("w1", w1_.data(), w1_.size()));
    TESSERA_RETURN_IF_ERROR(client.AddDense("b1", b1_.data(), b1_.size()));
    TESSERA_RETURN_IF_ERROR(client.AddDense("w2", w2_.data(), w2_.size()));
    return client.AddDense("b2", b2_.data(), b2_.size());
  }

  StatusOr<StepResult> Step(Client&, const std::vector<std::string>& records, Gradients* grads) override {
    TESSERA_ASSIGN_OR_RETURN(StepResult r, Compute(records, nullptr, 0));
    grads->Dense("w1", g_w1_);
    grads->Dense("b1", g_b1_);
    grads->Dense("w2", g_w2_);
    grads->Dense("b2", g_b2_);
    return r;
  }

  bool pushes_in_pieces() const override { return opts_.Int("pieces", 0) != 0; }
  // Pieces: {w2, b2, b1} as soon as backward has them, then w1 in ranges of whole blocks, each
  // pushed as soon as it is computed (the pserver applies one while the next is computed).
  StatusOr<StepResult> StepInPieces(Client& client, const std::vector<std::string>& records) override {
    TESSERA_RETURN_IF_ERROR(Settle());
    const int64_t samples = static_cast<int64_t>(records.size());
    auto send = [&](int64_t row_begin, int64_t row_end, bool last) {
      Gradients g;
      g.samples = samples;
      if (row_begin < 0) {
        g.Dense("w2", g_w2_);
        g.Dense("b2", g_b2_);
        g.Dense("b1", g_b1_);
      } else {
        const int64_t at = row_begin * hidden_;
        g.DenseRange("w1", at, std::span<const float>(g_w1_.data() + at, (row_end - row_begin) * hidden_));
      }
      in_flight_.push_back(client.PushPiece(g, last, /*pull=*/true));
    };
    return Compute(records, send, client.block_size());
  }

  Status Settle() override {
    Status first;
    for (const Handle& h : in_flight_) {
      Status s = h.Wait();
      if (first.ok() && !s.ok()) first = s;
    }
    in_flight_.clear();
    return first;
  }
  StatusOr<std::vector<Metric>> Evaluate(Client&, dataset::DatasetReader& eval) override {
    int64_t correct = 0, total = 0;
    double loss = 0;
    std::vector<std::string_view> recs;
    std::vector<std::string> batch;
    for (size_t c = 0; c < eval.manifest().chunks.size(); ++c) {
      TESSERA_RETURN_IF_ERROR(eval.ReadChunk(c, &recs));
      batch.assign(recs.begin(), recs.end());
      RowMat x;
      std::vector<int> y;
      TESSERA_RETURN_IF_ERROR(Decode(batch, &x, &y));
      MatMap W1(w1_.data(), inputs_, hidden_), W2(w2_.data(), hidden_, classes_);
      Eigen::Map<Vec> B1(b1_.data(), hidden_), B2(b2_.data(), classes_);
      RowMat p = (((x * W1).rowwise() + B1).cwiseMax(0.0f) * W2).rowwise() + B2;
      for (int64_t i = 0; i < p.rows(); ++i) {
        Eigen::Index arg;
        p.row(i).maxCoeff(&arg);
        correct += arg == y[i];
      }
      loss += Softmax(&p, y);
      total += p.rows();
    }
    if (total == 0) return Status::InvalidArgument("the evaluation data set is empty");
    return std::vector<Metric>{{"accuracy", static_cast<double>(correct) / total}, {"loss", loss / total}};
  }

 private:
  Status Decode(const std::vector<std::string>& records, RowMat* x, std::vector<int>* y) const {
    x->resize(static_cast<int64_t>(records.size()), inputs_);
    y->resize(records.size());
    data::Example ex;
    for (size_t i = 0; i < records.size(); ++i) {
      if (!ex.ParseFromString(records[i])) return Status::DataLoss("mlp: record is not an Example");
      if (static_cast<int64_t>(ex.data().size()) != inputs_) {
        return Status::InvalidArgument("mlp: an image has " + std::to_string(ex.data().size()) +
                                       " pixels, the model " + std::to_string(inputs_));
      }
      if (ex.label_id() < 0 || ex.label_id() >= classes_) {
        return Status::InvalidArgument("mlp: label " + std::to_string(ex.label_id()) + " is outside 0.." +
                                       std::to_string(classes_ - 1));
      }
      const unsigned char* px = reinterpret_cast<const unsigned char*>(ex.data().data());
      for (int64_t j = 0; j < inputs_; ++j) (*x)(static_cast<int64_t>(i), j) = px[j] * (1.0f / 255.0f);
      (*y)[i] = static_cast<int>(ex.label_id());
    }
    return Status::OK();
  }

  // Forward and backward of one batch into the gradient buffers. The gradient of w1 is computed
  // in ranges of rows that are whole blocks of `block_size` elements (one range when hidden does
  // not divide it); with `send`, each part is handed over as soon as it is computed: send(-1, -1,
  // false) for w2, b2 and b1, then send(first_row, end_row, last) for each range of w1. Without,
  // the same arithmetic (the same bits).
  using Send = std::function<void(int64_t, int64_t, bool)>;
  StatusOr<StepResult> Compute(const std::vector<std::string>& records, const Send& send,
                               int64_t block_size) {
    RowMat x;
    std::vector<int> y;
    RowMat z1;
    if (ahead_ == Ahead::kKept) {
      x.swap(ahead_x_);
      y.swap(ahead_y_);
      z1.swap(ahead_z1_);
    } else {
      TESSERA_RETURN_IF_ERROR(Decode(records, &x, &y));
      FirstLayer(x, &z1, nullptr);
    }
    ahead_ = Ahead::kNone;
    const int64_t b = x.rows();
    MatMap W1(w1_.data(), inputs_, hidden_), W2(w2_.data(), hidden_, classes_);
    Eigen::Map<Vec> B1(b1_.data(), hidden_), B2(b2_.data(), classes_);
    z1.rowwise() += B1;
    RowMat a1 = z1.cwiseMax(0.0f);
    RowMat p = (a1 * W2).rowwise() + B2;
    double cost = Softmax(&p, y);
    for (int64_t i = 0; i < b; ++i) p(i, y[i]) -= 1.0f;  // dLoss/dLogits, summed over the batch
    MatMap GW1(g_w1_.data(), inputs_, hidden_), GW2(g_w2_.data(), hidden_, classes_);
    Eigen::Map<Vec> GB1(g_b1_.data(), hidden_), GB2(g_b2_.data(), classes_);
    GW2.noalias() = a1.transpose() * p;
    GB2 = p.colwise().sum();
    RowMat da1 = p * W2.transpose();
    da1 = da1.cwiseProduct((z1.array() > 0.0f).cast<float>().matrix());
    GB1 = da1.colwise().sum();
    if (send) send(-1, -1, false);
    const int64_t rows = RowsPerRange(block_size);
    for (int64_t r0 = 0; r0 < inputs_; r0 += rows) {
      // A short tail joins the range before it (one message less).
      const int64_t n = inputs_ - r0 < 2 * rows ? inputs_ - r0 : rows;
      GW1.middleRows(r0, n).noalias() = x.middleCols(r0, n).transpose() * da1;
      if (send) send(r0, r0 + n, r0 + n >= inputs_);
      r0 += n - rows;
    }
    return StepResult{cost, b};
  }

  // x * w1, in ranges of kAheadRows rows of w1 (the same sums whether ahead or not); with
  // `ready`, each range only once its values are the next step's (false: they will not be).
  static constexpr int64_t kAheadRows = 64;
  bool FirstLayer(const RowMat& x, RowMat* z, const ValuesReady* ready) const {
    MatMap W1(w1_.data(), inputs_, hidden_);
    z->setZero(x.rows(), hidden_);
    for (int64_t r0 = 0; r0 < inputs_; r0 += kAheadRows) {
      const int64_t n = std::min(kAheadRows, inputs_ - r0);
      if (ready && !(*ready)(w1_.data() + (r0 + n) * hidden_)) return false;
      z->noalias() += x.middleCols(r0, n) * W1.middleRows(r0, n);
    }
    return true;
  }

 public:
  bool ComputeAhead(const std::vector<std::string>& records, const ValuesReady& ready) override {
    ahead_ = Ahead::kNone;
    if (!Decode(records, &ahead_x_, &ahead_y_).ok()) return false;  // the step will say why
    if (!FirstLayer(ahead_x_, &ahead_z1_, &ready)) return false;
    ahead_ = Ahead::kMade;
    return true;
  }
  void KeepAhead(bool keep) override {
    ahead_ = keep && ahead_ == Ahead::kMade ? Ahead::kKept : Ahead::kNone;
  }

 private:
  // Rows of w1 in one range of the gradient: whole blocks of the job (64 Ki elements = 256 rows
  // of 256 by default), at least 64 rows, or all of them.
  int64_t RowsPerRange(int64_t block_size) const {
    if (block_size <= 0) block_size = int64_t{1} << 16;
    if (block_size % hidden_ != 0) return inputs_;
    int64_t rows = block_size / hidden_;
    while (rows < 64) rows *= 2;
    return rows;
  }

  // Turns logits into probabilities in place; returns the summed cross-entropy.
  static double Softmax(RowMat* p, const std::vector<int>& y) {
    double cost = 0;
    for (int64_t i = 0; i < p->rows(); ++i) {
      float m = p->row(i).maxCoeff();
      p->row(i) = (p->row(i).array() - m).exp();
      float s = p->row(i).sum();
      p->row(i) /= s;
      cost -= std::log(std::max((*p)(i, y[i]), 1e-12f));
    }
    return cost;
  }

  ModelOptions opts_;
  int64_t hidden_, classes_, inputs_;
  // In the client's dense memory (page-aligned, the same offsets in every run): Eigen's
  // vectorized loops over these start at the same lane in every run, so the same batch gives the
  // same bits (a rollback to a checkpoint replays the run exactly).
  std::span<float> w1_, b1_, w2_, b2_;
  std::span<float> g_w1_, g_b1_, g_w2_, g_b2_;
  std::vector<Handle> in_flight_;  // the pieces of the last StepInPieces
  // The next batch decoded and its x * w1, made while the step before travelled (ComputeAhead).
  enum class Ahead { kNone, kMade, kKept } ahead_ = Ahead::kNone;
  RowMat ahead_x_, ahead_z1_;
  std::vector<int> ahead_y_;
};

}  // namespace

std::unique_ptr<Model> NewMlp(const ModelOptions& o) { return std::make_unique<Mlp>(o); }

}  // namespace tessera::models
