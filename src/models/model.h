// Built-in models: what a model must do to be trained by Tessera's generic trainer loop
// (models/trainer.h): declare its parameters, turn a batch of records into gradients (pulling
// sparse rows it needs first), evaluate itself on a held-out data set, and load a model file.
// A model owns its dense parameter buffers and gradient buffers; the client pulls into the
// former and pushes from the latter. Not thread-safe (the trainer loop owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataset/dataset.h"
#include "tessera/client.h"
#include "tessera/model_file.h"

namespace tessera::models {

struct ModelOptions {
  int batch_size = 64;  // records per step
  uint64_t seed = 1;
  std::map<std::string, std::string> args;  // model settings, e.g. hidden=256 (--model-arg k=v)
  // Reads an integer/double/string setting or its default.
  int64_t Int(const std::string& key, int64_t def) const;
  double Double(const std::string& key, double def) const;
  std::string Str(const std::string& key, const std::string& def) const;
};

struct Metric {
  std::string name;
  double value = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  // The record type it trains on: "example" or "line".
  virtual std::string record_type() const = 0;
  // Declares its parameters with the client (dense values live in the model's buffers).
  virtual Status Declare(Client& client) = 0;
  // Computes the gradient sums of a batch into `grads` (buffers owned by the model) and returns
  // the summed training cost. REQUIRES: the dense parameters hold the step's version.
  struct StepResult {
    double cost_sum = 0;
    int64_t samples = 0;
  };
  virtual StatusOr<StepResult> Step(Client& client, const std::vector<std::string>& records,
                                    Gradients* grads) = 0;
  // Models that push their gradients in pieces as backward produces them (Client::PushPiece), so
  // the pservers apply one piece while the next is computed, say so; the trainer loop then calls
  // StepInPieces, then Settle, instead of Step and PushPull.
  virtual bool pushes_in_pieces() const { return false; }
  // Computes the batch's gradients and pushes them in pieces, pulling each piece's parameters back.
  virtual StatusOr<StepResult> StepInPieces(Client& client, const std::vector<std::string>& records) {
    (void)client;
    (void)records;
    return Status::Unimplemented(name() + " does not push in pieces");
  }
  // Waits until every piece pushed is done (the parameters hold the next version); the first error.
  virtual Status Settle() { return Status::OK(); }
  // Work on the next batch while the step before it travels (optional). `ready(p)` waits until
  // the model's values before address p are the next step's (a pull written in place, in order)
  // and says false when they will not be known before the call ends. Returns whether the work
  // is complete; the next Step on the same records uses it if KeepAhead(true) came between.
  using ValuesReady = std::function<bool(const void*)>;
  virtual bool ComputeAhead(const std::vector<std::string>& records, const ValuesReady& ready) {
    (void)records;
    (void)ready;
    return false;
  }
  // After the call: whether what ComputeAhead made still holds (the call ended well, and nothing
  // else changed the values since).
  virtual void KeepAhead(bool keep) { (void)keep; }
  // Evaluates the current parameters on a data set (read directly, not through tasks).
  virtual StatusOr<std::vector<Metric>> Evaluate(Client& client, dataset::DatasetReader& eval) = 0;
};

// What a built-in model is, before one is made: its settings and the data it trains on, so a
// mistake is refused before any process starts.
struct ModelSetting {
  std::string key;
  int64_t default_value = 0;
  int64_t min_value = 1;
  std::string help;
  int64_t max_value = INT64_MAX;
};
struct ModelInfo {
  std::string name;
  std::string summary;
  std::string formats;  // the upload formats (tessera upload --format) it trains on, e.g. "idx"
  std::vector<ModelSetting> settings;
};
const std::vector<ModelInfo>& BuiltinModels();
// The model named `name`; InvalidArgument listing the built-in ones.
StatusOr<const ModelInfo*> FindModel(const std::string& name);
// Every setting is one the model has, with a whole number >= its minimum: InvalidArgument naming
// the setting (and the model's settings) otherwise.
Status CheckModelArgs(const ModelInfo& model, const std::map<std::string, std::string>& args);
// A data set (its manifest) suits the model: the upload format, and for images the size the model
// expects. `role` names the data set in the message ("training data set").
Status CheckModelData(const ModelInfo& model, const ModelOptions& options, const dataset::Manifest& data,
                      const std::string& role);

// Checks the name, the settings and the batch size, then makes the model.
StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& name, const ModelOptions& options);

// Helpers for models.
// Parses "key=value" settings.
StatusOr<std::map<std::string, std::string>> ParseModelArgs(const std::vector<std::string>& args);

}  // namespace tessera::models
