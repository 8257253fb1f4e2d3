/* A trainer written in C against Tessera's C API: linear regression on CSV lines
 * "x1,...,xD,y" (a text data set), minimizing squared error. Run it under `tessera local`:
 *
 *   tessera upload --store S --dataset lines --format text --input data.csv
 *   tessera local --store S --dataset lines --trainer-cmd build/examples/linreg_c \
 *       --pservers 2 --trainers 2 --optimizer sgd:lr=0.1 --passes 5
 *
 * It takes its coordinates from the environment `tessera local` sets (TESSERA_ETCD, TESSERA_JOB,
 * TESSERA_TRAINER_ID), the batch size from TESSERA_BATCH_SIZE and the number of features from
 * TESSERA_LINREG_DIM (default 4). The parameter "w" holds the D
 * weights followed by the bias. At the end it prints them and its mean squared error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera_c.h"

enum { kMaxDim = 64 };

static int fail(const char* what) {
  fprintf(stderr, "linreg_c: %s: %s\n", what, tessera_last_error());
  return 1;
}

/* Parses "x1,...,xD,y" into x[0..D) and *y; returns D, or -1 for a malformed line. */
static int parse(const char* rec, size_t len, float* x, float* y) {
  char line[4096];
  if (len == 0 || len >= sizeof line) return -1;
  memcpy(line, rec, len);
  line[len] = 0;
  float v[kMaxDim + 1];
  int n = 0;
  char* p = line;
  while (*p && n <= kMaxDim) {
    char* end;
    v[n++] = strtof(p, &end);
    if (end == p) return -1;
    p = end;
    if (*p == ',') ++p;
  }
  if (n < 2) return -1;
  memcpy(x, v, sizeof(float) * (size_t)(n - 1));
  *y = v[n - 1];
  return n - 1;
}

int main(void) {
  const char* bs = getenv("TESSERA_BATCH_SIZE");
  int batch_size = bs ? atoi(bs) : 32;
  if (batch_size <= 0) batch_size = 32;

  tessera_client* c;
  if (tessera_client_create(NULL, NULL, NULL, &c) != TESSERA_OK) return fail("connecting");

  /* Every trainer must declare the same parameters, so the dimension is configuration, not
   * something each trainer discovers from its own records: TESSERA_LINREG_DIM (default 4). */
  const char* d = getenv("TESSERA_LINREG_DIM");
  int dim = d ? atoi(d) : 4;
  if (dim <= 0 || dim > kMaxDim) {
    fprintf(stderr, "linreg_c: TESSERA_LINREG_DIM must be 1..%d\n", kMaxDim);
    return 1;
  }
  float* xs = malloc(sizeof(float) * (size_t)batch_size * kMaxDim);
  float* ys = malloc(sizeof(float) * (size_t)batch_size);
  if (!xs || !ys) return 1;
  /* The weights and their gradient in the client's dense memory: over shared memory the pserver
   * reads the gradient and writes the next weights there, with no copy in this process. */
  float* w = tessera_dense_memory(c, 2 * ((size_t)dim + 1));
  if (!w) return fail("taking dense memory");
  float* g = w + dim + 1;
  if (tessera_begin_init(c) != TESSERA_OK || tessera_init_param(c, "w", w, (size_t)dim + 1, NULL) != TESSERA_OK ||
      tessera_finish_init(c) != TESSERA_OK) {
    return fail("initializing parameters");
  }

  int n = 0;
  long long steps = 0, samples = 0;
  double sse = 0;
  for (;;) {
    const char* rec;
    size_t len;
    int r = tessera_next_record(c, &rec, &len);
    if (r < 0) return fail("reading records");
    if (r == TESSERA_RECORD) {
      if (parse(rec, len, xs + (size_t)n * kMaxDim, &ys[n]) != dim) {
        fprintf(stderr, "linreg_c: skipping a record that is not %d numbers and a target: %.*s\n", dim,
                (int)(len > 80 ? 80 : len), rec);
        continue;
      }
      if (++n < batch_size) continue;
    }
    if (n == 0) {
      if (r == TESSERA_DONE) break;
      if (tessera_idle(c) != TESSERA_OK) return fail("taking part in a step");
      continue;
    }
    /* Gradient sums of 0.5 * (w.x + b - y)^2 over the batch. */
    memset(g, 0, sizeof(float) * ((size_t)dim + 1));
    double batch_sse = 0;
    for (int i = 0; i < n; ++i) {
      const float* x = xs + (size_t)i * kMaxDim;
      float pred = w[dim];
      for (int j = 0; j < dim; ++j) pred += w[j] * x[j];
      float err = pred - ys[i];
      batch_sse += (double)err * err;
      for (int j = 0; j < dim; ++j) g[j] += err * x[j];
      g[dim] += err;
    }
    const char* names[] = {"w"};
    const float* grads[] = {g};
    size_t sizes[] = {(size_t)dim + 1};
    if (tessera_send_grads(c, names, grads, sizes, 1, n) != TESSERA_OK) return fail("sending gradients");
    if (tessera_records_trained(c) != TESSERA_OK) return fail("acknowledging records");
    tessera_report(c, n, 0.5 * batch_sse);
    sse = batch_sse / n;
    samples += n;
    ++steps;
    n = 0;
    if (r == TESSERA_DONE) break;
  }
  printf("linreg_c: trainer %s: %lld steps, %lld samples, last batch mse %.5f, w =", tessera_trainer_id(c), steps,
         samples, sse);
  for (int j = 0; j <= dim; ++j) printf(" %.4f", w[j]);
  printf("\n");
  tessera_client_free(c);
  free(xs);
  free(ys);
  return 0;
}
