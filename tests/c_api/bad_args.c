/* Bad arguments at the C API's door (found by the hardening issue), under kolorun -np 2: each
 * call returns KOLO_ERR_INVALID_ARGUMENT with a message naming the problem (before: a huge
 * memmove, a heap overflow, a SIGSEGV, KOLO_ERR_INTERNAL, or an engine thread gone for good),
 * kolo_handle_output refuses an op that has not finished, and afterwards the engine still
 * reduces correctly (also after a refused overlap of input and output, which stopped it).
 * Exits 1 when any check fails. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bindings/c/kolo.h"

static int failures = 0;

static void expect_invalid(kolo_status s, const char* what, const char* fragment) {
  const int ok = s == KOLO_ERR_INVALID_ARGUMENT && strstr(kolo_last_error(), fragment) != NULL;
  if (!ok) failures++;
  printf("bad_args: %s %s: status %d, \"%s\"\n", ok ? "PASS" : "FAIL", what, (int)s,
         kolo_last_error());
}

int main(void) {
  if (kolo_init() != KOLO_OK) {
    fprintf(stderr, "bad_args: kolo_init: %s\n", kolo_last_error());
    return 1;
  }
  const int rank = kolo_rank();
  float data[8] = {0};
  kolo_handle* h = NULL;
  kolo_options o = kolo_default_options();

  expect_invalid(kolo_allreduce_async("neg", data, data, -5, KOLO_FLOAT32, NULL, &h),
                 "negative count", "negative");
  o.prescale = 2.0;
  expect_invalid(kolo_allreduce_async("huge", data, data, (int64_t)1 << 62, KOLO_FLOAT32, &o, &h),
                 "count 2^62 with a prescale", "too many elements");
  o = kolo_default_options();
  expect_invalid(kolo_allreduce_async("dt", data, data, 8, (kolo_dtype)42, NULL, &h),
                 "dtype 42", "not a kolo_dtype");
  expect_invalid(kolo_allreduce_async("dt2", data, data, 8, (kolo_dtype)-1, NULL, &h),
                 "dtype -1", "not a kolo_dtype");
  o.op = (kolo_op)99;
  expect_invalid(kolo_allreduce_async("op", data, data, 8, KOLO_FLOAT32, &o, &h), "op 99",
                 "not a kolo_op");
  expect_invalid(kolo_comm_allreduce(data, data, 8, KOLO_FLOAT32, (kolo_op)99),
                 "direct allreduce with op 99", "not a kolo_op");
  o.op = KOLO_BXOR;
  expect_invalid(kolo_allreduce_async("xor", data, data, 8, KOLO_FLOAT32, &o, &h), "bxor of floats",
                 "bits of integers");
  expect_invalid(kolo_comm_allreduce(data, data, 8, KOLO_FLOAT32, KOLO_BAND),
                 "direct band of floats", "bits of integers");
  o = kolo_default_options();
  o.root = 7;
  expect_invalid(kolo_broadcast_async("root", data, 8, KOLO_FLOAT32, &o, &h), "root 7",
                 "root 7");
  o = kolo_default_options();
  o.prescale = NAN;
  expect_invalid(kolo_allreduce_async("nan", data, data, 8, KOLO_FLOAT32, &o, &h), "NaN prescale",
                 "finite");
  expect_invalid(kolo_allreduce_async(NULL, data, data, 8, KOLO_FLOAT32, NULL, &h), "null name",
                 "name is null");
  expect_invalid(kolo_allgather_async("shape", data, 2, NULL, KOLO_FLOAT32, NULL, &h),
                 "null shape", "shape pointer is null");
  const int64_t rows[2] = {2, 1};
  const int64_t splits[2] = {-1, 3};
  expect_invalid(kolo_alltoall_async("splits", data, 2, rows, splits, KOLO_FLOAT32, NULL, &h),
                 "negative splits", "split -1");
  int set = 0;
  expect_invalid(kolo_add_process_set(NULL, 2, &set), "null ranks", "ranks pointer is null");
  expect_invalid(kolo_add_process_set(NULL, -3, &set), "count -3", "count -3 (of ranks) is negative");
  const int both[2] = {0, 1};
  expect_invalid(kolo_add_process_set(both, 2, NULL), "null process_set", "process_set pointer");
  /* Collective: every rank passes the same bad list and gets the same refusal. */
  const int twice[2] = {0, 0}, outside[2] = {0, 9};
  expect_invalid(kolo_add_process_set(twice, 2, &set), "rank given twice", "given twice");
  expect_invalid(kolo_add_process_set(outside, 2, &set), "rank 9", "9 is not a rank of this job");
  expect_invalid(kolo_add_process_set(both, 0, &set), "no ranks", "at least one rank");
  const int own[1] = {rank};
  const kolo_status differ = kolo_add_process_set(own, 1, &set);
  if (differ != KOLO_ERR_MISMATCH || !strstr(kolo_last_error(), "rank 0 uses [0], rank 1 uses [1]"))
    failures++;
  printf("bad_args: %s each rank its own set: status %d, \"%s\"\n",
         differ == KOLO_ERR_MISMATCH ? "PASS" : "FAIL", (int)differ, kolo_last_error());
  expect_invalid(kolo_remove_process_set(0), "remove set 0", "global process set (0) cannot");
  expect_invalid(kolo_remove_process_set(99), "remove set 99", "process set 99 does not exist");
  /* A set removed on every rank: its ops are refused, and it cannot be removed twice. */
  int pair = -1;
  const int added = kolo_add_process_set(both, 2, &pair) == KOLO_OK;
  const int removed = added && kolo_remove_process_set(pair) == KOLO_OK;
  if (!removed) failures++;
  printf("bad_args: %s add and remove set %d\n", removed ? "PASS" : "FAIL", pair);
  kolo_options in_pair = kolo_default_options();
  in_pair.process_set = pair;
  expect_invalid(kolo_allreduce_async("in_removed", data, data, 2, KOLO_FLOAT32, &in_pair, &h),
                 "op on a removed set", "was removed (remove_process_set)");
  expect_invalid(kolo_remove_process_set(pair), "remove it twice", "was removed already");
  /* The handle calls name what is null, so kolo_last_error() is never an earlier call's. */
  expect_invalid(kolo_wait(NULL, 1), "wait on a null handle", "kolo_wait: the handle is null");
  expect_invalid(kolo_poll(NULL), "poll on a null handle", "kolo_poll: the handle is null");
  const void* nowhere = NULL;
  expect_invalid(kolo_handle_output(NULL, &nowhere, NULL), "output of a null handle",
                 "kolo_handle_output: the handle is null");

  /* A null handle pointer is refused before anything is submitted: the op did not run (the
   * buffer is unchanged) and its name is free for the retry. */
  float once[2] = {1, 2};
  expect_invalid(kolo_allreduce_async("nohandle", once, once, 2, KOLO_FLOAT32, NULL, NULL),
                 "null handle pointer", "handle pointer is null");
  kolo_comm_barrier();
  kolo_handle* retry = NULL;
  const int retry_ok = once[1] == 2.0f &&
                       kolo_allreduce_async("nohandle", once, once, 2, KOLO_FLOAT32, NULL, &retry) ==
                           KOLO_OK &&
                       kolo_wait(retry, 60) == KOLO_OK && once[1] == 2.0f * (float)kolo_size();
  kolo_handle_free(retry);
  if (!retry_ok) failures++;
  printf("bad_args: %s the op refused for its null handle pointer did not run\n",
         retry_ok ? "PASS" : "FAIL");

  /* An op that fails sets kolo_last_error() to its message as the wait returns it. */
  kolo_handle* differs = NULL;
  kolo_allreduce_async("differs", data, data, rank == 0 ? 4 : 3, KOLO_FLOAT32, NULL, &differs);
  const kolo_status failed = kolo_wait(differs, 60);
  const int named = failed == KOLO_ERR_MISMATCH && strstr(kolo_last_error(), "differs") != NULL &&
                    strcmp(kolo_last_error(), kolo_handle_error(differs)) == 0;
  kolo_handle_free(differs);
  if (!named) failures++;
  printf("bad_args: %s a failed op's wait sets kolo_last_error: status %d, \"%s\"\n",
         named ? "PASS" : "FAIL", (int)failed, kolo_last_error());

  /* An op rank 1 submits only after a barrier: on rank 0 it is pending meanwhile. */
  float late[4] = {1, 2, 3, 4};
  kolo_handle* pending = NULL;
  if (rank == 0) {
    kolo_allreduce_async("late", late, late, 4, KOLO_FLOAT32, NULL, &pending);
    const void* out = NULL;
    size_t bytes = 0;
    const kolo_status s = kolo_handle_output(pending, &out, &bytes);
    if (s != KOLO_PENDING) failures++;
    printf("bad_args: %s output of an unfinished op: status %d\n",
           s == KOLO_PENDING ? "PASS" : "FAIL", (int)s);
  }
  kolo_comm_barrier();
  if (rank != 0) kolo_allreduce_async("late", late, late, 4, KOLO_FLOAT32, NULL, &pending);
  if (kolo_wait(pending, 60) != KOLO_OK || late[3] != 4.0f * (float)kolo_size()) failures++;
  expect_invalid(kolo_wait(pending, NAN), "NaN timeout", "timeout_seconds is NaN");
  const int limits_ok = kolo_wait(pending, INFINITY) == KOLO_OK && kolo_wait(pending, -1) == KOLO_OK;
  if (!limits_ok) failures++;
  printf("bad_args: %s infinite and negative timeouts on a finished op\n", limits_ok ? "PASS" : "FAIL");
  kolo_handle_free(pending);

  /* The bitwise ops on integers, through the engine and directly. */
  int32_t flags[2] = {1 << rank, ~(1 << rank)};
  kolo_options bor = kolo_default_options();
  bor.op = KOLO_BOR;
  kolo_handle* bits = NULL;
  const int32_t all = (1 << kolo_size()) - 1;
  int bits_ok = kolo_allreduce_async("flags", flags, flags, 2, KOLO_INT32, &bor, &bits) ==
                    KOLO_OK &&
                kolo_wait(bits, 60) == KOLO_OK && flags[0] == all && flags[1] == -1;
  kolo_handle_free(bits);
  int64_t mask[1] = {~(int64_t)(1 << rank)};
  bits_ok = bits_ok && kolo_comm_allreduce(mask, mask, 1, KOLO_INT64, KOLO_BAND) == KOLO_OK &&
            mask[0] == ~(int64_t)all;
  if (!bits_ok) failures++;
  printf("bad_args: %s band and bor of integers\n", bits_ok ? "PASS" : "FAIL");

  /* A direct call with 0 elements on one rank and 4 on the other fails on both in that call
   * (the empty one returned at once, the other waited out its timeout). The world communicator
   * is failed after it (docs/errors.md), so this comes after the other direct calls. */
  const kolo_status empty = kolo_comm_allreduce(data, data, rank == 0 ? 0 : 4, KOLO_FLOAT32,
                                                KOLO_SUM);
  const int empty_ok = empty == KOLO_ERR_MISMATCH && strstr(kolo_last_error(), "allreduce of 16 B") != NULL;
  if (!empty_ok) failures++;
  printf("bad_args: %s a direct allreduce of 0 elements against 4: status %d, \"%s\"\n",
         empty_ok ? "PASS" : "FAIL", (int)empty, kolo_last_error());

  /* Output overlapping the input other than in place: refused at the door, small (fused) or
   * large. It was accepted, then failed in the engine and stopped it on this rank (every later
   * op: "engine stopped"), while the other rank waited out its deadline. */
  enum { kOverlapCount = 100000 };
  static float overlap[kOverlapCount + 1];
  expect_invalid(kolo_allreduce_async("ovl", overlap, overlap + 1, kOverlapCount, KOLO_FLOAT32,
                                      NULL, &h),
                 "partly overlapping buffers",
                 "allreduce of 'ovl': the send and receive buffers overlap");
  expect_invalid(kolo_allreduce_async("ovl", overlap + 1, overlap, 8, KOLO_FLOAT32, NULL, &h),
                 "partly overlapping buffers, small", "overlap, but not in place");

  /* The engine still works. */
  float x[3] = {1.0f + (float)rank, 2, 3};
  kolo_handle* good = NULL;
  const int ok = kolo_allreduce_async("good", x, x, 3, KOLO_FLOAT32, NULL, &good) == KOLO_OK &&
                 kolo_wait(good, 60) == KOLO_OK && x[0] == 3.0f && x[2] == 6.0f;
  kolo_handle_free(good);
  if (!ok) failures++;
  printf("bad_args: %s the engine reduces correctly afterwards\n", ok ? "PASS" : "FAIL");
  kolo_shutdown();
  printf("bad_args: rank %d, %d failure(s)\n", rank, failures);
  return failures == 0 ? 0 : 1;
}
