/* Tessera's C API: a trainer written in C (or any language with a C FFI) trains through
 * Tessera's parameter servers and reads the records its master hands out.
 *
 * Every function returns TESSERA_OK (0) or a negative error code; after an error,
 * tessera_last_error() returns a message saying what failed and where (thread-local, valid until
 * the next call on the same thread). Pointers passed in stay owned by the caller; dense parameter
 * buffers must stay valid, and untouched while a call runs, until tessera_client_free().
 *
 * A typical sync-mode trainer:
 *
 *   tessera_client* c;
 *   if (tessera_client_create(NULL, NULL, NULL, &c) != TESSERA_OK) fail(tessera_last_error());
 *   tessera_begin_init(c);
 *   tessera_init_param(c, "w", w, n, NULL);             // w: the trainer's float[n]
 *   tessera_finish_init(c);                             // all pservers hold w; w = current
 *   while ((r = tessera_next_record(c, &rec, &len)) > 0) {
 *     if (r == TESSERA_RECORD) { add rec to the batch; if the batch is not full, continue; }
 *     if (the batch is empty) { tessera_idle(c); continue; }
 *     ... compute the gradient sum g over the batch ...
 *     const char* names[] = {"w"}; const float* grads[] = {g}; size_t sizes[] = {n};
 *     tessera_send_grads(c, names, grads, sizes, 1, batch_samples);  // then w = next version
 *     tessera_records_trained(c);
 *   }
 *   tessera_client_free(c);
 *
 * Thread-safety: one thread at a time per client. */
#ifndef TESSERA_TESSERA_C_H_
#define TESSERA_TESSERA_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes (the same meanings as tessera::StatusCode, negated). */
enum {
  TESSERA_OK = 0,
  TESSERA_ERR_CANCELLED = -1,
  TESSERA_ERR_UNKNOWN = -2,
  TESSERA_ERR_INVALID_ARGUMENT = -3,
  TESSERA_ERR_DEADLINE_EXCEEDED = -4,
  TESSERA_ERR_NOT_FOUND = -5,
  TESSERA_ERR_ALREADY_EXISTS = -6,
  TESSERA_ERR_PERMISSION_DENIED = -7,
  TESSERA_ERR_RESOURCE_EXHAUSTED = -8,
  TESSERA_ERR_FAILED_PRECONDITION = -9,
  TESSERA_ERR_ABORTED = -10,
  TESSERA_ERR_OUT_OF_RANGE = -11,
  TESSERA_ERR_UNIMPLEMENTED = -12,
  TESSERA_ERR_INTERNAL = -13,
  TESSERA_ERR_UNAVAILABLE = -14,
  TESSERA_ERR_DATA_LOSS = -15,
  TESSERA_ERR_UNAUTHENTICATED = -16
};

typedef struct tessera_client tessera_client;

/* The message of the last error on this thread ("" if none). */
const char* tessera_last_error(void);

/* Connects to the job and registers this trainer. NULL arguments come from the environment
 * (TESSERA_ETCD "host:port[,host:port]", TESSERA_JOB, TESSERA_TRAINER_ID; a NULL or empty
 * trainer id without TESSERA_TRAINER_ID takes the lowest free number). etcd's credentials and TLS
 * files and the job's secret file come from the environment too (TESSERA_ETCD_USER,
 * TESSERA_ETCD_PASSWORD, TESSERA_ETCD_CA, TESSERA_ETCD_CERT, TESSERA_ETCD_KEY,
 * TESSERA_JOB_SECRET_FILE: tessera/connection.h). The data plane to the
 * pservers is TESSERA_TRANSPORT: auto (the default: shared memory with a pserver on this host,
 * TCP otherwise), shm, tcp or grpc. */
int tessera_client_create(const char* etcd_endpoints, const char* job, const char* trainer_id,
                          tessera_client** out);
/* Closes (acknowledging what was trained, deregistering) and frees. NULL is a no-op. */
void tessera_client_free(tessera_client* c);

/* The trainer id this client registered as (owned by the client). */
const char* tessera_trainer_id(tessera_client* c);
/* The step the next gradients belong to. */
int64_t tessera_step(tessera_client* c);

/* Parameter initialization: declare every parameter between begin and finish. The first trainer
 * to finish initializes the pservers from its buffers; every trainer's buffers then hold the
 * current values. `optimizer` NULL: the job's (else e.g. "adam:lr=0.001"). */
int tessera_begin_init(tessera_client* c);
/* Memory for the dense parameters' values and gradients: `floats` zeroed floats owned by the
 * client (gone with tessera_client_free); once, before tessera_finish_init. With a pserver on this
 * host over shared memory, a tessera_send_grads whose gradients lie back to back in it, and whose
 * parameters do too (in the order they were declared), is read and answered there in place.
 * Anywhere else it is ordinary memory. NULL on error. */
float* tessera_dense_memory(tessera_client* c, size_t floats);
int tessera_init_param(tessera_client* c, const char* name, float* values, size_t size,
                       const char* optimizer);
/* A sparse table of rows of `dim` floats, created on first touch by `initializer` ("zeros",
 * "uniform:-0.1,0.1", "normal:0,0.01"; NULL: zeros). */
int tessera_init_sparse(tessera_client* c, const char* name, int dim, const char* initializer,
                        const char* optimizer);
/* The same with memory limits for the table (NULL or "": none), e.g.
 * "admit=2,evict_after=100000,budget=64MiB" or "admit_prob=0.2" (see docs/sparse.md). */
int tessera_init_sparse_limits(tessera_client* c, const char* name, int dim, const char* initializer,
                               const char* optimizer, const char* limits);
int tessera_finish_init(tessera_client* c);

/* Sends this step's gradient sums (over `samples` samples) for `count` dense parameters (each
 * gradient as long as its parameter; parameters not named send nothing) and receives the next
 * version into the parameters' buffers. */
int tessera_send_grads(tessera_client* c, const char* const* names, const float* const* grads,
                       const size_t* sizes, size_t count, int64_t samples);
/* Receives the current version of every dense parameter into its buffer. */
int tessera_get_params(tessera_client* c);

/* Sparse: rows of `table` for keys[0..n) into out[n * dim]. */
int tessera_sparse_pull(tessera_client* c, const char* table, const uint64_t* keys, size_t n, float* out);
/* Sparse: gradient sums grads[n * dim] for rows keys[0..n) (duplicates add), as part of this
 * step: they go out with the next tessera_send_grads (which must follow). */
int tessera_sparse_push(tessera_client* c, const char* table, const uint64_t* keys, size_t n,
                        const float* grads);

/* The next record of the tasks this trainer is handed: TESSERA_RECORD (1) with *data, *size set
 * (valid until the next call); TESSERA_WAIT (2) when there is nothing for this trainer right now
 * (the rest of the pass is with others): train the records you hold, or if you hold none call
 * tessera_idle(), then ask again; TESSERA_DONE (0) when every pass is done; or an error. */
enum { TESSERA_DONE = 0, TESSERA_RECORD = 1, TESSERA_WAIT = 2 };
int tessera_next_record(tessera_client* c, const char** data, size_t* size);
/* Holding no records and given none: acknowledges what was trained and takes part in the
 * current step with an empty gradient (sync and ssp jobs), so others are not held up. It pauses
 * 10 ms first unless other trainers train in a sync job (their steps then pace it). */
int tessera_idle(tessera_client* c);
/* Every record returned so far has been trained on (acknowledges finished tasks). */
int tessera_records_trained(tessera_client* c);
/* Progress for the job's console: `samples` trained with summed cost `cost_sum`. */
int tessera_report(tessera_client* c, int64_t samples, double cost_sum);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_C_H_ */
