// The C API (see include/tessera/tessera_c.h): a shell around api::Session that turns Status into
// return codes and a thread-local error message, and never lets an exception cross into C.
#include "tessera/tessera_c.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "tessera/session.h"

namespace {

using tessera::Status;
using tessera::StatusCode;

thread_local std::string g_last_error;

int Fail(const Status& s) {
  g_last_error = s.ToString();
  return -static_cast<int>(s.code());
}

int Return(const Status& s) {
  if (s.ok()) return TESSERA_OK;
  return Fail(s);
}

// Runs `fn` (returning Status), turning exceptions into TESSERA_ERR_INTERNAL.
template <typename Fn>
int Guard(Fn fn) {
  try {
    return Return(fn());
  } catch (const std::exception& e) {
    return Fail(Status::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return Fail(Status::Internal("unexpected exception"));
  }
}

std::string Str(const char* s) { return s ? s : ""; }

}  // namespace

struct tessera_client {
  std::unique_ptr<tessera::api::Session> session;
  bool declaring = false;
  std::string record;
  struct PendingSparse {
    std::string table;
    std::vector<uint64_t> keys;
    std::vector<float> grads;
  };
  std::vector<PendingSparse> sparse;
};

#define TESSERA_CHECK_CLIENT(c) \
  if (!(c)) return Fail(Status::InvalidArgument(std::string(__func__) + ": the client is NULL"))

extern "C" {

const char* tessera_last_error(void) { return g_last_error.c_str(); }

int tessera_client_create(const char* etcd_endpoints, const char* job, const char* trainer_id,
                          tessera_client** out) {
  if (!out) return Fail(Status::InvalidArgument("tessera_client_create: `out` is NULL"));
  *out = nullptr;
  return Guard([&]() -> Status {
    tessera::api::SessionOptions o;
    o.connection.SetEtcd(Str(etcd_endpoints));
    o.connection.job = Str(job);
    o.trainer_id = Str(trainer_id);
    TESSERA_ASSIGN_OR_RETURN(auto s, tessera::api::Session::Open(std::move(o)));
    auto c = std::make_unique<tessera_client>();
    c->session = std::move(s);
    *out = c.release();
    return Status::OK();
  });
}

void tessera_client_free(tessera_client* c) {
  if (!c) return;
  try {
    Status s = c->session->Close();
    if (!s.ok()) spdlog::warn("closing the Tessera client: {}", s.ToString());
  } catch (...) {
  }
  delete c;
}

const char* tessera_trainer_id(tessera_client* c) {
  return c ? c->session->client().trainer_id().c_str() : "";
}

int64_t tessera_step(tessera_client* c) { return c ? c->session->client().step() : -1; }

int tessera_begin_init(tessera_client* c) {
  TESSERA_CHECK_CLIENT(c);
  c->declaring = true;
  return TESSERA_OK;
}

int tessera_init_param(tessera_client* c, const char* name, float* values, size_t size,
                       const char* optimizer) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (!c->declaring) return Status::FailedPrecondition("tessera_init_param: call tessera_begin_init first");
    if (!name || !*name) return Status::InvalidArgument("tessera_init_param: the name is empty");
    if (!values || size == 0) {
      return Status::InvalidArgument("tessera_init_param: parameter '" + std::string(name) +
                                     "' has no values");
    }
    if (optimizer) {
      TESSERA_ASSIGN_OR_RETURN(auto opt, tessera::OptimizerConfig::Parse(optimizer));
      return c->session->client().AddDense(name, values, size, &opt);
    }
    return c->session->client().AddDense(name, values, size);
  });
}

int tessera_init_sparse(tessera_client* c, const char* name, int dim, const char* initializer,
                        const char* optimizer) {
  return tessera_init_sparse_limits(c, name, dim, initializer, optimizer, nullptr);
}

int tessera_init_sparse_limits(tessera_client* c, const char* name, int dim, const char* initializer,
                               const char* optimizer, const char* limits) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (!c->declaring)
      return Status::FailedPrecondition("tessera_init_sparse: call tessera_begin_init first");
    if (!name || !*name) return Status::InvalidArgument("tessera_init_sparse: the name is empty");
    TESSERA_ASSIGN_OR_RETURN(auto init,
                             tessera::InitializerConfig::Parse(initializer ? initializer : "zeros"));
    TESSERA_ASSIGN_OR_RETURN(auto lim, tessera::TableLimits::Parse(limits ? limits : ""));
    std::optional<tessera::OptimizerConfig> opt;
    if (optimizer) {
      TESSERA_ASSIGN_OR_RETURN(opt, tessera::OptimizerConfig::Parse(optimizer));
    }
    return c->session->client().AddSparse(name, dim, init, opt ? &*opt : nullptr, &lim);
  });
}

int tessera_finish_init(tessera_client* c) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (!c->declaring)
      return Status::FailedPrecondition("tessera_finish_init: call tessera_begin_init first");
    c->declaring = false;
    return c->session->Initialize();
  });
}

int tessera_send_grads(tessera_client* c, const char* const* names, const float* const* grads,
                       const size_t* sizes, size_t count, int64_t samples) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (count > 0 && (!names || !grads || !sizes)) {
      return Status::InvalidArgument("tessera_send_grads: names, grads and sizes must not be NULL");
    }
    if (samples < 0) return Status::InvalidArgument("tessera_send_grads: samples is negative");
    tessera::Gradients g;
    for (size_t i = 0; i < count; ++i) {
      if (!names[i] || !grads[i]) {
        return Status::InvalidArgument("tessera_send_grads: entry " + std::to_string(i) + " is NULL");
      }
      g.Dense(names[i], std::span<const float>(grads[i], sizes[i]));
    }
    for (const auto& s : c->sparse) g.Sparse(s.table, s.keys, s.grads);
    g.samples = samples;
    Status s = c->session->client().PushPullAndWait(g).Wait();
    c->sparse.clear();
    if (s.code() == StatusCode::kAborted) {
      // The step closed without this trainer (the group changed): the gradient was dropped.
      spdlog::warn("step closed without trainer {}'s gradient: {}", c->session->client().trainer_id(),
                   s.message());
      return c->session->client().Pull().Wait();
    }
    return s;
  });
}

float* tessera_dense_memory(tessera_client* c, size_t floats) {
  if (!c) {
    Fail(Status::InvalidArgument("tessera_dense_memory: the client is NULL"));
    return nullptr;
  }
  float* out = nullptr;
  const int r = Guard([&]() -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::span<float> m, c->session->client().DenseMemory(floats));
    out = m.data();
    return Status::OK();
  });
  return r == TESSERA_OK ? out : nullptr;
}

int tessera_get_params(tessera_client* c) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&] { return c->session->client().Pull().Wait(); });
}

int tessera_sparse_pull(tessera_client* c, const char* table, const uint64_t* keys, size_t n, float* out) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (!table || (n > 0 && (!keys || !out))) {
      return Status::InvalidArgument("tessera_sparse_pull: table, keys and out must not be NULL");
    }
    return c->session->client().SparsePull(table, std::span<const uint64_t>(keys, n), out).Wait();
  });
}

int tessera_sparse_push(tessera_client* c, const char* table, const uint64_t* keys, size_t n,
                        const float* grads) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    if (!table || (n > 0 && (!keys || !grads))) {
      return Status::InvalidArgument("tessera_sparse_push: table, keys and grads must not be NULL");
    }
    // The row width is checked by the request builder when the step is sent; here we only need
    // it to copy the gradients, so read it from the declared table.
    TESSERA_ASSIGN_OR_RETURN(int dim, c->session->client().SparseDim(table));
    c->sparse.push_back({table, std::vector<uint64_t>(keys, keys + n),
                         std::vector<float>(grads, grads + n * static_cast<size_t>(dim))});
    return Status::OK();
  });
}

int tessera_next_record(tessera_client* c, const char** data, size_t* size) {
  TESSERA_CHECK_CLIENT(c);
  if (!data || !size)
    return Fail(Status::InvalidArgument("tessera_next_record: data and size must not be NULL"));
  *data = nullptr;
  *size = 0;
  using Next = tessera::api::Session::Next;
  Next next = Next::kDone;
  int rc = Guard([&]() -> Status {
    TESSERA_ASSIGN_OR_RETURN(next, c->session->NextRecord(&c->record));
    return Status::OK();
  });
  if (rc != TESSERA_OK) return rc;
  if (next == Next::kDone) return TESSERA_DONE;
  if (next == Next::kWait) return TESSERA_WAIT;
  *data = c->record.data();
  *size = c->record.size();
  return TESSERA_RECORD;
}

int tessera_idle(tessera_client* c) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&] { return c->session->Idle(); });
}

int tessera_records_trained(tessera_client* c) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&] { return c->session->Trained(); });
}

int tessera_report(tessera_client* c, int64_t samples, double cost_sum) {
  TESSERA_CHECK_CLIENT(c);
  return Guard([&]() -> Status {
    c->session->Report(samples, cost_sum);
    return Status::OK();
  });
}

}  // extern "C"
