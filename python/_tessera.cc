// _tessera: the native half of the Python module `tessera` (python/tessera/__init__.py is the
// half users see). It wraps api::Session and the model-file functions. Arrays cross without
// copies: dense parameters and gradients are numpy views of the caller's buffers (torch tensors
// via .numpy()), checked for dtype, contiguity and size; sparse keys are uint64 arrays.
// Blocking calls release the GIL. Errors raise tessera.Error with the status code name.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/background_step.h"
#include "tessera/example.pb.h"
#include "tessera/model_file.h"
#include "tessera/session.h"

namespace py = pybind11;

namespace tessera::python {
namespace {

using FloatArray = py::array_t<float, py::array::c_style>;
using KeyArray = py::array_t<uint64_t, py::array::c_style>;

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(const Status& s) {
  if (!s.ok()) throw Error(s.ToString());
}

template <typename T>
T Value(StatusOr<T> s) {
  Check(s.status());
  return std::move(*s);
}

// A float32 C-contiguous numpy array that shares memory with `obj` (no copy, no cast).
FloatArray FloatView(const py::handle& obj, const std::string& what, bool writeable) {
  if (!py::isinstance<py::array>(obj)) throw py::type_error(what + ": expected a numpy array");
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!a.dtype().is(py::dtype::of<float>())) {
    throw py::type_error(what + ": expected float32, got " + std::string(py::str(a.dtype())));
  }
  if (!(a.flags() & py::array::c_style)) throw py::value_error(what + ": the array is not contiguous");
  if (writeable && !a.writeable()) throw py::value_error(what + ": the array is read-only");
  return py::reinterpret_borrow<FloatArray>(a);
}

KeyArray KeyView(const py::handle& obj, const std::string& what) {
  if (!py::isinstance<py::array>(obj)) throw py::type_error(what + ": expected a numpy array of keys");
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!a.dtype().is(py::dtype::of<uint64_t>())) {
    throw py::type_error(what + ": keys must be uint64, got " + std::string(py::str(a.dtype())));
  }
  if (!(a.flags() & py::array::c_style)) throw py::value_error(what + ": the keys are not contiguous");
  return py::reinterpret_borrow<KeyArray>(a);
}

class PySession {
 public:
  // The connection: every argument left None comes from its TESSERA_* variable
  // (tessera/connection.h).
  struct Connection {
    std::optional<std::string> etcd, job, etcd_user, etcd_password, etcd_ca, etcd_cert, etcd_key, secret_file;
    std::optional<std::string> etcd_credentials, tls_ca, tls_cert, tls_key;
  };

  PySession(const Connection& conn, std::optional<std::string> trainer_id, std::optional<std::string> store,
            int64_t lease_ttl, double timeout_s, std::optional<std::string> transport) {
    api::SessionOptions o;
    if (conn.etcd) o.connection.SetEtcd(*conn.etcd);
    o.connection.job = conn.job.value_or("");
    o.connection.etcd_username = conn.etcd_user.value_or("");
    o.connection.etcd_password = conn.etcd_password.value_or("");
    o.connection.etcd_ca_file = conn.etcd_ca.value_or("");
    o.connection.etcd_cert_file = conn.etcd_cert.value_or("");
    o.connection.etcd_key_file = conn.etcd_key.value_or("");
    o.connection.secret_file = conn.secret_file.value_or("");
    o.connection.etcd_credentials_file = conn.etcd_credentials.value_or("");
    o.connection.tls_ca_file = conn.tls_ca.value_or("");
    o.connection.tls_cert_file = conn.tls_cert.value_or("");
    o.connection.tls_key_file = conn.tls_key.value_or("");
    o.trainer_id = trainer_id.value_or("");
    o.store = store.value_or("");
    o.lease_ttl_seconds = lease_ttl;
    o.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    o.transport = transport.value_or("");
    py::gil_scoped_release release;
    session_ = Value(api::Session::Open(std::move(o)));
  }

  // The client's dense memory (Client::DenseMemory) as a float32 array; it keeps the session
  // alive, whose client owns the memory.
  FloatArray DenseMemory(size_t floats, py::object self) {
    std::span<float> m = Value(session_->client().DenseMemory(floats));
    return FloatArray({static_cast<py::ssize_t>(m.size())}, {static_cast<py::ssize_t>(sizeof(float))},
                      m.data(), self);
  }

  void AddDense(const std::string& name, py::object values, std::optional<std::string> optimizer) {
    FloatArray a = FloatView(values, "parameter '" + name + "'", /*writeable=*/true);
    if (a.size() == 0) throw py::value_error("parameter '" + name + "' is empty");
    std::optional<OptimizerConfig> opt;
    if (optimizer) opt = Value(OptimizerConfig::Parse(*optimizer));
    Check(session_->client().AddDense(name, a.mutable_data(), static_cast<size_t>(a.size()),
                                      opt ? &*opt : nullptr));
    dense_.emplace_back(name, a);  // pulls write into it: keep it alive
  }

  void AddSparse(const std::string& name, int dim, const std::string& init,
                 std::optional<std::string> optimizer, const std::string& limits) {
    auto ic = Value(InitializerConfig::Parse(init));
    std::optional<OptimizerConfig> opt;
    if (optimizer) opt = Value(OptimizerConfig::Parse(*optimizer));
    auto lim = Value(TableLimits::Parse(limits));
    Check(session_->client().AddSparse(name, dim, ic, opt ? &*opt : nullptr, &lim));
  }

  void Initialize() {
    py::gil_scoped_release release;
    Check(session_->Initialize());
  }

  void Pull() {
    py::gil_scoped_release release;
    Check(session_->client().Pull().Wait());
  }

  // dense: [(name, float32 gradient sums)], sparse: [(table, uint64 keys, float32 [n, dim])].
  // Returns False if the step went on without this trainer's gradient (the step closed without
  // it, or it held NaN or infinity and the job's policy is skip); the parameters then hold the
  // current version either way.
  // [(name, float32 array)] and [(table, uint64 keys, float32 rows)] as Gradients over the
  // arrays' memory; the arrays are appended to `keep` (they must outlive the push).
  static Gradients ToGradients(const py::list& dense, const py::list& sparse, int64_t samples,
                               std::vector<py::object>* keep) {
    if (samples < 0) throw py::value_error("samples is negative");
    Gradients g;
    for (const auto& item : dense) {
      auto t = item.cast<py::tuple>();
      std::string name = t[0].cast<std::string>();
      FloatArray a = FloatView(t[1], "gradient of '" + name + "'", false);
      g.Dense(name, std::span<const float>(a.data(), static_cast<size_t>(a.size())));
      keep->push_back(a);
    }
    for (const auto& item : sparse) {
      auto t = item.cast<py::tuple>();
      std::string table = t[0].cast<std::string>();
      KeyArray k = KeyView(t[1], "keys of '" + table + "'");
      FloatArray a = FloatView(t[2], "gradient rows of '" + table + "'", false);
      g.Sparse(table, std::span<const uint64_t>(k.data(), static_cast<size_t>(k.size())),
               std::span<const float>(a.data(), static_cast<size_t>(a.size())));
      keep->push_back(k);
      keep->push_back(a);
    }
    g.samples = samples;
    return g;
  }

  // The step's gradients, converted once: while the caller passes the same list of the same
  // (name, array) objects and no sparse rows (the Optimizer's buffers, made once), the request
  // of the step before is used again, with this step's sample count. The cache holds the
  // arrays, so their memory stays where the request points.
  struct StepRequest {
    py::list dense;
    std::vector<PyObject*> members;  // each tuple's name and array, in order
    Gradients grads;
    std::vector<py::object> keep;
  };

  // Each (name, array) tuple's two members, in order, into *out; false if an item is not such
  // a tuple.
  static bool Members(const py::list& dense, std::vector<PyObject*>* out) {
    out->clear();
    for (const auto& item : dense) {
      PyObject* t = item.ptr();
      if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) return false;
      out->push_back(PyTuple_GET_ITEM(t, 0));
      out->push_back(PyTuple_GET_ITEM(t, 1));
    }
    return true;
  }

  bool SameRequest(const py::list& dense) {
    return step_request_ && step_request_->dense.is(dense) && Members(dense, &members_) &&
           members_ == step_request_->members;
  }

  const Gradients& StepGradients(const py::list& dense, const py::list& sparse, int64_t samples,
                                 std::vector<py::object>* keep) {
    if (!sparse.empty() || !SameRequest(dense)) {
      // A step still on its way may read the arrays of the request replaced.
      if (step_request_ && !pieces_.empty()) {
        for (auto& o : step_request_->keep) piece_keep_.push_back(std::move(o));
      }
      step_request_.reset();
    }
    if (!sparse.empty()) {
      scratch_ = ToGradients(dense, sparse, samples, keep);
      return scratch_;
    }
    if (!step_request_) {
      auto r = std::make_unique<StepRequest>();
      r->grads = ToGradients(dense, sparse, samples, &r->keep);
      r->dense = dense;
      (void)Members(dense, &r->members);  // items not tuples: SameRequest is false, converted each time
      step_request_ = std::move(r);
    }
    step_request_->grads.samples = samples;
    return step_request_->grads;
  }

  // wait=false: returns true at once, the push and pull on their way as the step's one piece
  // (wait_piece(0) / settle() wait for it, values_ready for a part of it); the arrays stay
  // referenced until then. The step runs on a thread of its own (api::BackgroundStep), where it
  // may go in place in the dense memory and have its values written as the pserver makes them.
  bool PushPull(const py::list& dense, const py::list& sparse, int64_t samples, bool wait) {
    if (samples < 0) throw py::value_error("samples is negative");
    JoinBackground();  // a step still on its way reads the request StepGradients may replace
    if (!wait) {
      const Gradients& g = StepGradients(dense, sparse, samples, &piece_keep_);
      py::gil_scoped_release release;
      if (!background_) background_ = std::make_unique<api::BackgroundStep>();
      Client* client = &session_->client();
      background_->Start([client, &g] { return client->PushPullAndWait(g); });
      background_pending_ = true;
      return true;
    }
    std::vector<py::object> keep;  // the arrays stay referenced until the push is done
    const Gradients& g = StepGradients(dense, sparse, samples, &keep);
    py::gil_scoped_release release;
    Handle h = session_->client().PushPullAndWait(g);
    Status s = h.Wait();
    if (s.code() == StatusCode::kAborted) {
      Check(session_->client().Pull().Wait());
      return false;
    }
    Check(s);
    return !h.skipped();  // a gradient with NaN or infinity was dropped
  }

  // One piece of the step's push (Client::PushPiece, pulling its parameters back); the arrays
  // stay referenced until Settle().
  void PushPiece(const py::list& dense, const py::list& sparse, int64_t samples, bool last) {
    JoinBackground();
    Gradients g = ToGradients(dense, sparse, samples, &piece_keep_);
    py::gil_scoped_release release;
    pieces_.push_back(session_->client().PushPiece(g, last, /*pull=*/true));
  }

  // Waits for piece i (in push order) pushed since the last Settle: true if its parameters
  // now hold the next version; false on an error or a dropped gradient (settle() says which).
  bool WaitPiece(size_t i) {
    JoinBackground();
    if (i >= pieces_.size()) {
      throw py::index_error("piece " + std::to_string(i) + " of " + std::to_string(pieces_.size()) +
                            " pushed this step");
    }
    py::gil_scoped_release release;
    const Handle& h = pieces_[i];
    return h.Wait().ok() && !h.skipped();
  }

  // Waits for every piece pushed since the last Settle: as push_pull returns.
  bool Settle() {
    JoinBackground();
    Status first;
    bool skipped = false;
    {
      py::gil_scoped_release release;
      for (const Handle& h : pieces_) {
        Status s = h.Wait();
        if (first.ok() && !s.ok()) first = s;
        skipped = skipped || h.skipped();
      }
      pieces_.clear();
    }
    piece_keep_.clear();
    if (first.code() == StatusCode::kAborted) {
      py::gil_scoped_release release;
      Check(session_->client().Pull().Wait());
      return false;
    }
    Check(first);
    return !skipped;
  }

  void SparsePull(const std::string& table, py::object keys, py::object out) {
    KeyArray k = KeyView(keys, "keys of '" + table + "'");
    FloatArray o = FloatView(out, "rows of '" + table + "'", true);
    int dim = Value(session_->client().SparseDim(table));
    if (o.size() != k.size() * dim) {
      throw py::value_error("rows of '" + table + "': expected " + std::to_string(k.size()) + " x " +
                            std::to_string(dim) + " floats, got " + std::to_string(o.size()));
    }
    py::gil_scoped_release release;
    Check(session_->client()
              .SparsePull(table, std::span<const uint64_t>(k.data(), static_cast<size_t>(k.size())),
                          o.mutable_data())
              .Wait());
  }

  // ("record", bytes) | ("wait", None) | ("done", None)
  py::tuple NextRecord() {
    api::Session::Next n;
    {
      py::gil_scoped_release release;
      n = Value(session_->NextRecord(&record_));
    }
    switch (n) {
      case api::Session::Next::kRecord:
        return py::make_tuple("record", py::bytes(record_));
      case api::Session::Next::kWait:
        return py::make_tuple("wait", py::none());
      case api::Session::Next::kDone:
        break;
    }
    return py::make_tuple("done", py::none());
  }

  // Up to n records in one call: (kind, [records]). Stops at a wait or the end (kind "wait" or
  // "done", with the records before it), after n records, or right after the record with which
  // the job's pass moved on (kind "record": the last record is the one that called for the
  // caller's check, as after each next_record()).
  py::tuple NextRecords(int n) {
    std::vector<std::string> got;
    api::Session::Next kind = api::Session::Next::kRecord;
    {
      py::gil_scoped_release release;
      const int pass = session_->job_pass();
      while (static_cast<int>(got.size()) < n) {
        kind = Value(session_->NextRecord(&record_));
        if (kind != api::Session::Next::kRecord) break;
        got.push_back(std::move(record_));
        if (session_->job_pass() != pass) break;
      }
    }
    py::list out;
    for (const auto& r : got) out.append(py::bytes(r));
    const char* name = kind == api::Session::Next::kRecord ? "record"
                       : kind == api::Session::Next::kWait ? "wait"
                                                           : "done";
    return py::make_tuple(name, out);
  }

  void Trained() {
    py::gil_scoped_release release;
    Check(session_->Trained());
  }
  void Idle() {
    py::gil_scoped_release release;
    Check(session_->Idle());
  }
  std::string JobDataset() {
    py::gil_scoped_release release;
    return Value(session_->JobDataset());
  }
  void Report(int64_t samples, double cost_sum) {
    py::gil_scoped_release release;
    session_->Report(samples, cost_sum);
  }
  void ReportMetrics(const std::map<std::string, double>& metrics, int pass) {
    std::vector<std::pair<std::string, double>> m(metrics.begin(), metrics.end());
    py::gil_scoped_release release;
    session_->ReportMetrics(m, pass);
  }
  bool IsEvaluator() {
    py::gil_scoped_release release;
    return session_->IsEvaluator();
  }
  void Close() {
    py::gil_scoped_release release;
    Check(session_->Close());
  }

  api::Session& session() { return *session_; }

  // Whether the values of the dense parameters `names` (declared one after another) hold the
  // version of the step on its way (push_pull with wait=false): true as soon as the pserver has
  // written them in place, the step still going on; false when the step has ended (settle()
  // says how) or nothing could tell before it did.
  bool ValuesReady(const std::vector<std::string>& names) {
    if (!background_pending_ || names.empty()) return false;
    const float* begin = nullptr;
    const float* end = nullptr;
    for (const std::string& name : names) {
      auto it = std::find_if(dense_.begin(), dense_.end(), [&](const auto& d) { return d.first == name; });
      if (it == dense_.end()) throw py::key_error("no dense parameter '" + name + "' was added");
      const float* b = it->second.data();
      const float* e = b + it->second.size();
      begin = begin == nullptr ? b : std::min(begin, b);
      end = end == nullptr ? e : std::max(end, e);
    }
    py::gil_scoped_release release;
    return background_->ValuesReady(begin, end);
  }

  // Steps whose values a forward began on while they were being written (values_ready true).
  uint64_t StepsAhead() const { return background_ ? background_->steps_ahead() : 0; }

  // A step still on its way reads the arrays in piece_keep_ and writes the parameters: it ends
  // (or fails at the client's deadline) before they go.
  ~PySession() {
    JoinBackground();
    if (pieces_.empty()) return;
    py::gil_scoped_release release;
    for (const Handle& h : pieces_) (void)h.Wait();
  }

 private:
  // The background step, once it has ended, as the step's one piece.
  void JoinBackground() {
    if (!background_pending_) return;
    py::gil_scoped_release release;
    pieces_.push_back(background_->Wait());
    background_pending_ = false;
  }

  std::unique_ptr<api::Session> session_;
  std::unique_ptr<api::BackgroundStep> background_;  // push_pull(wait=false)'s thread, once used
  bool background_pending_ = false;                  // its step is not in pieces_ yet
  std::vector<Handle> pieces_;          // pushed since the last Settle()
  std::vector<py::object> piece_keep_;  // their arrays
  std::unique_ptr<StepRequest> step_request_;  // the last push_pull's, for the next
  Gradients scratch_;                          // a push_pull's with sparse rows
  std::vector<PyObject*> members_;             // SameRequest's, kept to spare an allocation
  std::vector<std::pair<std::string, FloatArray>> dense_;
  std::string record_;
};

// Decodes tessera.data.Example records of an image data set: (pixels uint8 [n, size], labels
// int64 [n], shape of one image).
py::tuple DecodeImages(const std::vector<py::bytes>& records) {
  data::Example ex;
  std::vector<int64_t> labels(records.size());
  std::vector<int> shape;
  size_t width = 0;
  std::vector<uint8_t> pixels;
  for (size_t i = 0; i < records.size(); ++i) {
    std::string_view r = records[i];
    if (!ex.ParseFromArray(r.data(), static_cast<int>(r.size()))) {
      throw py::value_error("record " + std::to_string(i) + " is not a tessera.data.Example");
    }
    if (i == 0) {
      width = ex.data().size();
      shape.assign(ex.shape().begin(), ex.shape().end());
      pixels.resize(records.size() * width);
    } else if (ex.data().size() != width) {
      throw py::value_error("record " + std::to_string(i) + " has " + std::to_string(ex.data().size()) +
                            " bytes of data, record 0 has " + std::to_string(width));
    }
    std::memcpy(pixels.data() + i * width, ex.data().data(), width);
    labels[i] = ex.label_id();
  }
  py::array_t<uint8_t> px({static_cast<py::ssize_t>(records.size()), static_cast<py::ssize_t>(width)});
  if (!pixels.empty()) std::memcpy(px.mutable_data(), pixels.data(), pixels.size());
  py::array_t<int64_t> lab(static_cast<py::ssize_t>(labels.size()));
  if (!labels.empty()) std::memcpy(lab.mutable_data(), labels.data(), labels.size() * sizeof(int64_t));
  return py::make_tuple(px, lab, py::tuple(py::cast(shape)));
}

// Record i's label as a number: label_id (idx), or the label as written (list, csv, libsvm), which
// must then be a finite number.
float NumericLabel(const data::Example& ex, size_t i) {
  if (ex.label().empty()) return static_cast<float>(ex.label_id());
  char* end = nullptr;
  const double label = std::strtod(ex.label().c_str(), &end);
  if (end == ex.label().c_str() || *end != '\0' || !std::isfinite(label))
    throw py::value_error("record " + std::to_string(i) + ": label '" + ex.label() + "' is not a number");
  return static_cast<float>(label);
}

// Decodes tessera.data.Example records of a libsvm (or csv) data set into sparse rows, CSR-style:
// (ids uint64 [nnz], values float32 [nnz], offsets int64 [n + 1], labels float32 [n]); record i's
// features are ids[offsets[i]:offsets[i+1]]. A label that is not a number is refused, naming its
// record.
py::tuple DecodeExamples(const std::vector<py::bytes>& records) {
  data::Example ex;
  std::vector<uint64_t> ids;
  std::vector<float> values, labels(records.size());
  std::vector<int64_t> offsets(records.size() + 1, 0);
  for (size_t i = 0; i < records.size(); ++i) {
    std::string_view r = records[i];
    if (!ex.ParseFromArray(r.data(), static_cast<int>(r.size())))
      throw py::value_error("record " + std::to_string(i) + " is not a tessera.data.Example");
    if (ex.feature_ids_size() != ex.feature_values_size())
      throw py::value_error("record " + std::to_string(i) + " has " + std::to_string(ex.feature_ids_size()) +
                            " feature ids but " + std::to_string(ex.feature_values_size()) + " values");
    if (!ex.data().empty() && ex.feature_ids_size() == 0)
      throw py::value_error("record " + std::to_string(i) +
                            " is an image or file record, not a libsvm one (use decode_images)");
    labels[i] = NumericLabel(ex, i);
    ids.insert(ids.end(), ex.feature_ids().begin(), ex.feature_ids().end());
    values.insert(values.end(), ex.feature_values().begin(), ex.feature_values().end());
    offsets[i + 1] = static_cast<int64_t>(ids.size());
  }
  auto array = [](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
  };
  return py::make_tuple(array(ids), array(values), array(offsets), array(labels));
}

// Decodes tessera.data.Example records of a csv data set into (features float32 [n, columns],
// labels): columns is the first record's; a record with another count, or not a csv record, is
// refused by its index. Labels are float32 [n] (each must be a number), or with `text_labels` a
// list of the labels as written.
py::tuple DecodeCsv(const std::vector<py::bytes>& records, bool text_labels) {
  data::Example ex;
  std::vector<float> values, labels;
  std::vector<std::string> texts;
  size_t width = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    std::string_view r = records[i];
    if (!ex.ParseFromArray(r.data(), static_cast<int>(r.size())))
      throw py::value_error("record " + std::to_string(i) + " is not a tessera.data.Example");
    if (!ex.data().empty() || ex.feature_ids_size() > 0)
      throw py::value_error(
          "record " + std::to_string(i) +
          " is not a csv record (an image, file or libsvm one: use decode_images or decode_examples)");
    if (i == 0) width = static_cast<size_t>(ex.values_size());
    if (static_cast<size_t>(ex.values_size()) != width)
      throw py::value_error("record " + std::to_string(i) + " has " + std::to_string(ex.values_size()) +
                            " columns, record 0 has " + std::to_string(width));
    values.insert(values.end(), ex.values().begin(), ex.values().end());
    if (text_labels) {
      texts.push_back(ex.label());
    } else {
      labels.push_back(NumericLabel(ex, i));
    }
  }
  py::array_t<float> features({static_cast<py::ssize_t>(records.size()), static_cast<py::ssize_t>(width)});
  if (!values.empty()) std::memcpy(features.mutable_data(), values.data(), values.size() * sizeof(float));
  if (text_labels) return py::make_tuple(features, py::cast(texts));
  py::array_t<float> lab(static_cast<py::ssize_t>(labels.size()));
  if (!labels.empty()) std::memcpy(lab.mutable_data(), labels.data(), labels.size() * sizeof(float));
  return py::make_tuple(features, lab);
}

// A .tsm model file as {name: float32 array} for dense tensors and {name: (uint64 keys,
// float32 [rows, dim])} for sparse tables.
py::dict ReadModel(const std::string& path) {
  models::ModelFile m;
  {
    py::gil_scoped_release release;
    m = Value(models::ReadModelFile(path));
  }
  py::dict out;
  for (const auto& t : m.tensors) {
    if (!t.sparse) {
      py::array_t<float> a(static_cast<py::ssize_t>(t.values.size()));
      std::memcpy(a.mutable_data(), t.values.data(), t.values.size() * sizeof(float));
      out[py::str(t.name)] = a;
    } else {
      py::array_t<uint64_t> k(static_cast<py::ssize_t>(t.keys.size()));
      std::memcpy(k.mutable_data(), t.keys.data(), t.keys.size() * sizeof(uint64_t));
      py::array_t<float> v({static_cast<py::ssize_t>(t.keys.size()), static_cast<py::ssize_t>(t.dim)});
      std::memcpy(v.mutable_data(), t.values.data(), t.values.size() * sizeof(float));
      out[py::str(t.name)] = py::make_tuple(k, v);
    }
  }
  return out;
}

// Reads every parameter of the session's job from its pservers (all shards merged) into `path`.
void ExportModelFile(PySession& s, const std::string& path, double timeout_s) {
  py::gil_scoped_release release;
  Check(api::ExportModelFile(s.session().options(), path,
                             std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))));
}

class PyLocalDataset {
 public:
  PyLocalDataset(const std::string& store, const std::string& name) {
    py::gil_scoped_release release;
    ds_ = Value(api::LocalDataset::Open(store, name));
  }
  // Up to n records (fewer at the end; empty when done).
  std::vector<py::bytes> NextBatch(int n) {
    std::vector<std::string> recs;
    {
      py::gil_scoped_release release;
      std::string r;
      while (static_cast<int>(recs.size()) < n && Value(ds_->Next(&r))) recs.push_back(r);
    }
    return {recs.begin(), recs.end()};
  }
  void Rewind() { ds_->Rewind(); }
  int64_t records() const { return ds_->records(); }

 private:
  std::unique_ptr<api::LocalDataset> ds_;
};

}  // namespace
}  // namespace tessera::python

PYBIND11_MODULE(_tessera, m) {
  using namespace tessera::python;
  m.doc() = "Native part of the tessera module (use `import tessera`).";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  py::class_<PySession>(m, "Session")
      .def(py::init([](std::optional<std::string> etcd, std::optional<std::string> job,
                       std::optional<std::string> trainer_id, std::optional<std::string> store,
                       int64_t lease_ttl, double timeout, std::optional<std::string> transport,
                       std::optional<std::string> etcd_user, std::optional<std::string> etcd_password,
                       std::optional<std::string> etcd_ca, std::optional<std::string> etcd_cert,
                       std::optional<std::string> etcd_key, std::optional<std::string> secret_file,
                       std::optional<std::string> etcd_credentials, std::optional<std::string> tls_ca,
                       std::optional<std::string> tls_cert, std::optional<std::string> tls_key) {
             PySession::Connection c{etcd,      job,      etcd_user,   etcd_password,    etcd_ca,
                                     etcd_cert, etcd_key, secret_file, etcd_credentials, tls_ca,
                                     tls_cert,  tls_key};
             return std::make_unique<PySession>(c, trainer_id, store, lease_ttl, timeout, transport);
           }),
           py::arg("etcd") = py::none(), py::arg("job") = py::none(), py::arg("trainer_id") = py::none(),
           py::arg("store") = py::none(), py::arg("lease_ttl") = 0, py::arg("timeout") = 300.0,
           py::arg("transport") = py::none(), py::arg("etcd_user") = py::none(),
           py::arg("etcd_password") = py::none(), py::arg("etcd_ca") = py::none(),
           py::arg("etcd_cert") = py::none(), py::arg("etcd_key") = py::none(),
           py::arg("secret_file") = py::none(), py::arg("etcd_credentials") = py::none(),
           py::arg("tls_ca") = py::none(), py::arg("tls_cert") = py::none(), py::arg("tls_key") = py::none())
      .def(
          "dense_memory",
          [](py::object self, size_t floats) { return self.cast<PySession&>().DenseMemory(floats, self); },
          py::arg("floats"))
      .def("add_dense", &PySession::AddDense, py::arg("name"), py::arg("values"),
           py::arg("optimizer") = py::none())
      .def("add_sparse", &PySession::AddSparse, py::arg("name"), py::arg("dim"), py::arg("init") = "zeros",
           py::arg("optimizer") = py::none(), py::arg("limits") = "")
      .def("initialize", &PySession::Initialize)
      .def("pull", &PySession::Pull)
      .def("push_pull", &PySession::PushPull, py::arg("dense"), py::arg("sparse"), py::arg("samples"),
           py::arg("wait") = true)
      .def("push_piece", &PySession::PushPiece, py::arg("dense"), py::arg("sparse"), py::arg("samples"),
           py::arg("last"))
      .def("wait_piece", &PySession::WaitPiece, py::arg("i"))
      .def("settle", &PySession::Settle)
      .def("values_ready", &PySession::ValuesReady, py::arg("names"))
      .def("steps_ahead", &PySession::StepsAhead)
      .def("sparse_pull", &PySession::SparsePull, py::arg("table"), py::arg("keys"), py::arg("out"))
      .def("next_record", &PySession::NextRecord)
      .def("next_records", &PySession::NextRecords, py::arg("n"))
      .def("trained", &PySession::Trained)
      .def("idle", &PySession::Idle)
      .def("job_dataset", &PySession::JobDataset)
      .def("report", &PySession::Report, py::arg("samples"), py::arg("cost_sum"))
      .def("report_metrics", &PySession::ReportMetrics, py::arg("metrics"), py::arg("pass_"))
      .def("is_evaluator", &PySession::IsEvaluator)
      .def("close", &PySession::Close)
      .def_property_readonly("trainer_id", [](PySession& s) { return s.session().client().trainer_id(); })
      .def_property_readonly("step", [](PySession& s) { return s.session().client().step(); })
      .def_property_readonly("mode", [](PySession& s) { return s.session().client().mode().ToString(); })
      .def_property_readonly("pass_", [](PySession& s) { return s.session().pass(); })
      .def_property_readonly("job_pass", [](PySession& s) { return s.session().job_pass(); })
      .def_property_readonly("passes", [](PySession& s) { return s.session().passes(); })
      .def_property_readonly("job", [](PySession& s) { return s.session().options().connection.job; })
      .def_property_readonly("store", [](PySession& s) { return s.session().options().store; })
      .def_property_readonly("etcd",
                             [](PySession& s) { return s.session().options().connection.EtcdText(); });

  py::class_<PyLocalDataset>(m, "LocalDataset")
      .def(py::init<std::string, std::string>(), py::arg("store"), py::arg("name"))
      .def("next_batch", &PyLocalDataset::NextBatch, py::arg("n"))
      .def("rewind", &PyLocalDataset::Rewind)
      .def_property_readonly("records", &PyLocalDataset::records);

  // What went in the trainer's dense memory in place in this process: (requests, replies, renewals).
  m.def("in_place", [] {
    const tessera::InPlaceCounts c = tessera::InPlaceCountsNow();
    return py::make_tuple(c.requests, c.replies, c.renewals);
  });
  m.def("decode_images", &DecodeImages, py::arg("records"));
  m.def("decode_examples", &DecodeExamples, py::arg("records"));
  m.def("decode_csv", &DecodeCsv, py::arg("records"), py::arg("text_labels") = false);
  m.def("read_model", &ReadModel, py::arg("path"));
  m.def("export_model", &ExportModelFile, py::arg("session"), py::arg("path"), py::arg("timeout") = 300.0);
  m.def(
      "init_logging",
      [](const std::string& job, const std::string& node, const std::string& level) {
        Check(tessera::api::InitLogging(job, node, level));
      },
      py::arg("job"), py::arg("node"), py::arg("level") = "info");
}
