// Parameter-level configuration shared by the job, the pservers and the trainer client:
// server-side optimizers, sparse-row initializers and the consistency mode.
// Plain values; thread-safe as values are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera {

// A server-side optimizer and its hyper-parameters. Defaults follow PyTorch where it has one.
//   sgd:      w -= lr * (g + wd*w)
//   momentum: v = momentum*v + (g + wd*w);  w -= lr * v   (nesterov: w -= lr * (g' + momentum*v))
//   adagrad:  a += g'^2;  w -= lr * g' / (sqrt(a) + eps)
//   adam:     m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*g'^2;
//             w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//   ftrl:     FTRL-Proximal (McMahan et al., "Ad Click Prediction", 2013), per coordinate with
//             alpha = lr:  sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;  z += g - sigma*w;  n += g^2;
//             w = |z| <= l1 ? 0 : -(z - sign(z)*l1) / ((beta + sqrt(n)) / alpha + l2)
// where g is the gradient averaged over the samples it was computed on, and g' = g + wd*w.
struct OptimizerConfig {
  enum class Type { kSgd, kMomentum, kAdagrad, kAdam, kFtrl };
  Type type = Type::kSgd;
  float lr = 0.01f;
  float weight_decay = 0.0f;
  float momentum = 0.9f;             // momentum only
  bool nesterov = false;             // momentum only
  float beta1 = 0.9f;                // adam only
  float beta2 = 0.999f;              // adam only
  float eps = 1e-8f;                 // adagrad, adam
  float initial_accumulator = 0.0f;  // adagrad only
  float ftrl_beta = 1.0f;            // ftrl only ("beta")
  float l1 = 0.0f;                   // ftrl only
  float l2 = 0.0f;                   // ftrl only

  // "sgd", "adam:lr=0.001,beta2=0.99", "momentum:lr=0.1,momentum=0.9,nesterov=1",
  // "ftrl:alpha=0.1,beta=1,l1=1,l2=1" (alpha is ftrl's name for lr).
  static StatusOr<OptimizerConfig> Parse(std::string_view spec);
  std::string ToString() const;
  Status Validate() const;
  // Number of per-element state arrays the optimizer keeps (0, 1 or 2; ftrl: z and n).
  int StateArrays() const;
  bool operator==(const OptimizerConfig&) const = default;
};

std::string_view OptimizerTypeName(OptimizerConfig::Type t);

// How rows of a sparse table are created on first touch. Deterministic: the same (seed, table,
// key) gives the same row on every pserver, every run.
struct InitializerConfig {
  enum class Type { kZeros, kUniform, kNormal };
  Type type = Type::kZeros;
  float a = 0.0f;  // uniform: low; normal: mean
  float b = 0.0f;  // uniform: high; normal: standard deviation
  uint64_t seed = 0;

  // "zeros", "uniform:-0.1,0.1", "normal:0,0.01", each optionally ",seed=N".
  static StatusOr<InitializerConfig> Parse(std::string_view spec);
  std::string ToString() const;
  bool operator==(const InitializerConfig&) const = default;
};

// How a sparse table stays within memory on each pserver (all off by default). A row is "seen"
// when a push updates it; pulls never create rows of a table with limits, they answer an id
// without a row with the initializer's value.
//   admit=N       a new id gets a row at its N-th push (counted in a fixed 64 KiB count-min
//                 sketch, so an id may be admitted early, never late); earlier pushes are dropped
//   admit_prob=P  or: each push of a new id admits it with probability P (deterministic: a hash
//                 of the table, the id and the table's update number)
//   evict_after=T a row not pushed in the table's last T updates on this pserver is dropped (an
//                 update: one applied push of the table, in sync mode one per step)
//   budget=B      the table's rows on one pserver use at most B bytes (K, M, G, KiB, MiB, GiB
//                 suffixes); past it the least recently pushed rows are dropped
// A dropped row comes back as new (initial value, admitted again) if its id is pushed again.
struct TableLimits {
  int admit_after = 0;
  float admit_prob = 1.0f;
  int64_t evict_after = 0;
  int64_t budget_bytes = 0;

  // "" (none), "admit=2,evict_after=100000,budget=64MiB", "admit_prob=0.2".
  static StatusOr<TableLimits> Parse(std::string_view spec);
  std::string ToString() const;
  Status Validate() const;
  bool any() const { return admit_after > 1 || admit_prob < 1.0f || evict_after > 0 || budget_bytes > 0; }
  bool operator==(const TableLimits&) const = default;
};

// When pushed gradients are applied and when pulls may answer.
//   sync:   all live trainers' gradients of a step are summed (in trainer-id order), divided by
//           the total sample count and applied once; pulls for the next version wait.
//   async:  every push is applied on arrival.
//   ssp:S   pushes apply on arrival; a pull at clock c waits until the slowest live trainer has
//           reached c - S.
struct ConsistencyMode {
  enum class Kind { kSync, kAsync, kSsp };
  Kind kind = Kind::kSync;
  int64_t staleness = 0;  // ssp only

  static StatusOr<ConsistencyMode> Parse(std::string_view spec);  // "sync", "async", "ssp:2"
  std::string ToString() const;
  bool operator==(const ConsistencyMode&) const = default;
};

}  // namespace tessera
