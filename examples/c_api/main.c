/* c_api_demo: kolo's C API from plain C. Each rank allreduces a few named gradients
 * asynchronously through the engine, allgathers rows of different lengths, and checks the
 * results. Run: build/tools/kolorun -np 3 build/examples/c_api_demo */
#include <stdio.h>
#include <stdlib.h>

#include "bindings/c/kolo.h"

#define CHECK(call)                                                                  \
  do {                                                                               \
    kolo_status s_ = (call);                                                         \
    if (s_ != KOLO_OK) {                                                             \
      fprintf(stderr, "c_api_demo: %s failed (%d): %s\n", #call, (int)s_, kolo_last_error()); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  CHECK(kolo_init());
  int rank = kolo_rank(), size = kolo_size();
  enum { kTensors = 4, kCount = 1000 };
  float grads[kTensors][kCount];
  kolo_handle* handles[kTensors];
  kolo_options avg = kolo_default_options();
  avg.op = KOLO_AVERAGE;
  for (int t = 0; t < kTensors; ++t) {
    char name[32];
    snprintf(name, sizeof name, "grad.%d", t);
    for (int i = 0; i < kCount; ++i) grads[t][i] = (float)(rank * (t + 1));
    CHECK(kolo_allreduce_async(name, grads[t], grads[t], kCount, KOLO_FLOAT32, &avg, &handles[t]));
  }
  int wrong = 0;
  for (int t = 0; t < kTensors; ++t) {
    kolo_status s = kolo_wait(handles[t], 60.0);
    if (s != KOLO_OK) {
      fprintf(stderr, "c_api_demo: grad.%d: %s\n", t, kolo_handle_error(handles[t]));
      return 1;
    }
    float want = (float)(t + 1) * (float)(size - 1) / 2.0f;
    wrong += grads[t][kCount - 1] != want;
    kolo_handle_free(handles[t]);
  }
  /* allgather: rank r contributes r + 1 rows of 2 int32 values */
  int32_t rows[16];
  for (int i = 0; i < 2 * (rank + 1); ++i) rows[i] = rank;
  int64_t shape[2] = {rank + 1, 2};
  kolo_handle* gathered;
  CHECK(kolo_allgather_async("rows", rows, 2, shape, KOLO_INT32, NULL, &gathered));
  CHECK(kolo_wait(gathered, 60.0));
  const void* data;
  size_t bytes;
  CHECK(kolo_handle_output(gathered, &data, &bytes));
  wrong += bytes != (size_t)(size * (size + 1)) * sizeof(int32_t);
  wrong += ((const int32_t*)data)[bytes / sizeof(int32_t) - 1] != size - 1;
  kolo_handle_free(gathered);
  /* reducescatter: every rank contributes size rows of 1.0; each receives its row summed */
  float ones[64];
  for (int i = 0; i < size; ++i) ones[i] = 1.0f;
  int64_t rs_shape[1] = {size};
  kolo_handle* scattered;
  CHECK(kolo_reducescatter_async("scatter", ones, 1, rs_shape, KOLO_FLOAT32, NULL, &scattered));
  CHECK(kolo_wait(scattered, 60.0));
  CHECK(kolo_handle_output(scattered, &data, &bytes));
  wrong += bytes != sizeof(float) || ((const float*)data)[0] != (float)size;
  kolo_handle_free(scattered);
  /* alltoall: one row of this rank's number to every rank */
  int32_t mine[64];
  const int32_t* got;
  for (int i = 0; i < size; ++i) mine[i] = rank;
  int64_t a_shape[1] = {size};
  kolo_handle* exchanged;
  CHECK(kolo_alltoall_async("exchange", mine, 1, a_shape, NULL, KOLO_INT32, NULL, &exchanged));
  CHECK(kolo_wait(exchanged, 60.0));
  CHECK(kolo_handle_output(exchanged, &data, &bytes));
  got = (const int32_t*)data;
  for (int i = 0; i < size; ++i) wrong += got[i] != i;
  kolo_handle_free(exchanged);
  CHECK(kolo_comm_barrier());
  if (rank == 0) printf("c_api_demo: %d ranks, results %s\n", size, wrong ? "WRONG" : "correct");
  CHECK(kolo_shutdown());
  return wrong ? 1 : 0;
}
