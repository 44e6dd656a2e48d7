/* The C API's lifecycle under kolorun -np 2 (found by a sweep; each failed before its fix):
 *   - kolo_init after kolo_shutdown, 8 times: a rank that re-initialised before rank 0 had closed
 *     its earlier store joined that store and failed (30 of 30 runs by the second cycle);
 *   - two threads making direct collectives at once take turns (they raced on the world
 *     communicator: "ranks called different collectives" in 2 of 3 runs);
 *   - a forked child's op is refused naming the fork (it ran the parent's collectives and broke
 *     the job), its shutdown and exit return (they joined the parent's engine thread and hung in
 *     1 of 3 to 2 of 2 runs), and the parents go on.
 * Every allreduce's result is checked. Exits 1 when any check fails.
 * With the argument "rank-1-fails": rank 1 exits with status 3 right after kolo_init while rank 0
 * waits in an allreduce (mpirun_failure_test.sh: under mpirun the job must end at once; the
 * failed rank sat in MPI_Finalize at exit, holding the job for KOLO_TIMEOUT_SECONDS). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bindings/c/kolo.h"

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) failures++;
  printf("lifecycle: %s %s%s%s\n", ok ? "PASS" : "FAIL", what, ok ? "" : ": ",
         ok ? "" : kolo_last_error());
}

/* An engine allreduce of n floats named `name`: rank r gives r + 1 + i % 5. */
static int engine_sum_correct(const char* name, int n) {
  float* x = malloc(sizeof(float) * (size_t)n);
  const int size = kolo_size();
  for (int i = 0; i < n; ++i) x[i] = (float)(kolo_rank() + 1 + i % 5);
  kolo_handle* h = NULL;
  int ok = kolo_allreduce_async(name, x, x, n, KOLO_FLOAT32, NULL, &h) == KOLO_OK &&
           kolo_wait(h, 30.0) == KOLO_OK;
  kolo_handle_free(h);
  for (int i = 0; ok && i < n; ++i) ok = x[i] == (float)(size * (size + 1) / 2 + size * (i % 5));
  free(x);
  return ok;
}

static void* direct_calls(void* arg) {
  const long id = (long)arg;
  long bad = 0;
  float x[300];
  for (int k = 0; k < 300; ++k) {
    for (int i = 0; i < 300; ++i) x[i] = (float)(id + 1);
    if (kolo_comm_allreduce(x, x, 300, KOLO_FLOAT32, KOLO_SUM) != KOLO_OK) return (void*)1;
    for (int i = 0; i < 300; ++i) bad += x[i] != (float)(kolo_size() * (id + 1));
  }
  return (void*)bad;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "rank-1-fails") == 0) {
    if (kolo_init() != KOLO_OK) return 1;
    if (kolo_rank() == 1) {
      fprintf(stderr, "lifecycle: rank 1 fails on purpose\n");
      exit(3);
    }
    return engine_sum_correct("never.completes", 16) ? 0 : 1;
  }
  int cycles_ok = 1;
  for (int c = 0; c < 8 && cycles_ok; ++c) {
    char name[32];
    snprintf(name, sizeof name, "cycle.%d", c);
    cycles_ok = kolo_init() == KOLO_OK && engine_sum_correct(name, 4096) &&
                kolo_shutdown() == KOLO_OK;
  }
  check(cycles_ok, "8 cycles of kolo_init, an allreduce and kolo_shutdown");

  if (kolo_init() != KOLO_OK) {
    fprintf(stderr, "lifecycle: kolo_init: %s\n", kolo_last_error());
    return 1;
  }
  /* Both threads add the same values on every rank, so any pairing of their calls across the
   * ranks gives the same sums: what is checked is that the calls do not interleave. */
  pthread_t threads[2];
  void* bad[2];
  for (long t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, direct_calls, (void*)0);
  for (int t = 0; t < 2; ++t) pthread_join(threads[t], &bad[t]);
  check(bad[0] == NULL && bad[1] == NULL, "two threads' direct allreduces take turns");

  if (kolo_rank() == 0) {
    const pid_t child = fork();
    if (child == 0) {
      float x[4] = {1, 2, 3, 4};
      kolo_handle* h = NULL;
      const kolo_status s = kolo_allreduce_async("child", x, x, 4, KOLO_FLOAT32, NULL, &h);
      const int direct = kolo_comm_barrier();
      const int refused = s == KOLO_ERR_INVALID_ARGUMENT && direct == KOLO_ERR_INVALID_ARGUMENT &&
                          strstr(kolo_last_error(), "a fork of it") != NULL &&
                          kolo_timeline_start("/dev/null") == KOLO_ERR_INVALID_ARGUMENT;
      /* Shutting down and a plain exit (static destructors) leave the parent's engine alone:
       * they joined its thread, which the child does not have, and waited for ever. */
      const int shut = kolo_shutdown() == KOLO_OK;
      exit(refused && shut ? 0 : 1);
    }
    int status = 0, waited = 0;
    while (waitpid(child, &status, WNOHANG) == 0 && waited++ < 300) usleep(100 * 1000);
    if (waited > 300) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a forked child's allreduce, barrier and timeline are refused naming the fork, and its "
          "shutdown and exit return within 30 s");
  }
  check(engine_sum_correct("after.fork", 1000), "the parents' allreduce after the fork");
  kolo_shutdown();
  return failures == 0 ? 0 : 1;
}
