/* The C API's lifecycle under kolorun -np 2 (found by a sweep; each failed before its fix):
 *   - kolo_init after kolo_shutdown, 8 times: a rank that re-initialised before rank 0 had closed
 *     its earlier store joined that store and failed (30 of 30 runs by the second cycle);
 *   - two threads making direct collectives at once take turns (they raced on the world
 *     communicator: "ranks called different collectives" in 2 of 3 runs);
 *   - a forked child's op is refused naming the fork (it ran the parent's collectives and broke
 *     the job), its shutdown and exit return (they joined the parent's engine thread and hung in
 *     1 of 3 to 2 of 2 runs), and the parents go on;
 *   - kolo_timeline_start(path) on every rank: rank r writes path.rank<r> (all wrote path);
 *   - calls before kolo_init and after kolo_shutdown say kolo is not initialized, and an op
 *     pending at kolo_shutdown fails with KOLO_ERR_PEER_LOST naming the shutdown;
 *   - kolo_shutdown ends a direct call waiting on another thread within ~0.1 s (it waited out
 *     its deadline, and the next kolo_init failed on every rank).
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
#include <time.h>
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

/* Every rank starts the timeline with one path: rank 0 writes it, rank 1 `path.rank1`, each
 * a whole JSON array (they wrote one file over each other: rank 1's trace was lost, rank 0's
 * often cut into). Rank 0 checks both files once both ranks have stopped. */
static int timeline_per_rank(void) {
  int32_t pid = (int32_t)getpid();  /* rank 0's pid names the files */
  if (kolo_comm_broadcast(&pid, 1, KOLO_INT32, 0) != KOLO_OK) return 0;
  char path[64], other[80];
  snprintf(path, sizeof path, "/tmp/kolo_c_timeline_%d.json", (int)pid);
  snprintf(other, sizeof other, "%s.rank1", path);
  int ok = kolo_timeline_start(path) == KOLO_OK && engine_sum_correct("traced", 64) &&
           kolo_timeline_stop() == KOLO_OK;
  ok = kolo_comm_barrier() == KOLO_OK && ok;
  if (kolo_rank() == 0) {
    const char* files[2] = {path, other};
    for (int f = 0; f < 2; ++f) {
      FILE* in = fopen(files[f], "r");
      static char text[1 << 16];
      size_t n = in ? fread(text, 1, sizeof text - 1, in) : 0;
      if (in) fclose(in);
      text[n] = '\0';
      while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = '\0';
      /* A JSON array with the tensor in it. */
      ok = ok && n > 0 && text[0] == '[' && text[n - 1] == ']' && strstr(text, "traced") != NULL;
      if (!ok) printf("lifecycle: %s: %.200s\n", files[f], n > 0 ? text : "(missing)");
    }
  }
  ok = kolo_comm_barrier() == KOLO_OK && ok;
  if (kolo_rank() == 0) {
    remove(path);
    remove(other);
  }
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

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void* lone_direct_allreduce(void* status) {
  static float x[1000];
  *(kolo_status*)status = kolo_comm_allreduce(x, x, 1000, KOLO_FLOAT32, KOLO_SUM);
  return NULL;
}

/* kolo_shutdown ends a direct call that waits on another thread of rank 0 (rank 1 never joins
 * it), and kolo_init then works: the call waited out its deadline (30 s here), holding the old
 * communicator, and the next kolo_init failed on every rank. */
static int shutdown_ends_a_waiting_direct_call(void) {
  kolo_status blocked = KOLO_OK;
  pthread_t thread;
  const double start = seconds();
  if (kolo_rank() == 0) pthread_create(&thread, NULL, lone_direct_allreduce, &blocked);
  sleep(1);
  int ok = kolo_shutdown() == KOLO_OK;
  if (kolo_rank() == 0) {
    pthread_join(thread, NULL);
    ok = ok && blocked == KOLO_ERR_IO;
  }
  const double took = seconds() - start;
  printf("lifecycle: the waiting direct call: status %d after %.1f s\n", (int)blocked, took);
  return ok && took < 10 && kolo_init() == KOLO_OK &&
         engine_sum_correct("after.an.interrupted.call", 64);
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
  /* Before kolo_init and after kolo_shutdown, calls are refused saying which (it said
   * "kolo_init() has not been called" also after a shutdown). */
  float none[1] = {1};
  kolo_handle* refused = NULL;
  check(kolo_allreduce_async("early", none, none, 1, KOLO_FLOAT32, NULL, &refused) ==
                KOLO_ERR_INVALID_ARGUMENT &&
            strstr(kolo_last_error(), "kolo is not initialized (kolo_init() was not called, or "
                                      "kolo_shutdown() was)") != NULL,
        "an op before kolo_init is refused naming both causes");
  int cycles_ok = 1;
  for (int c = 0; c < 8 && cycles_ok; ++c) {
    char name[32];
    snprintf(name, sizeof name, "cycle.%d", c);
    cycles_ok = kolo_init() == KOLO_OK && engine_sum_correct(name, 4096) &&
                kolo_shutdown() == KOLO_OK;
  }
  check(cycles_ok, "8 cycles of kolo_init, an allreduce and kolo_shutdown");
  /* An op pending (rank 1 never submits it) when the ranks call kolo_shutdown fails with
   * KOLO_ERR_PEER_LOST naming the shutdown, as docs/errors.md says for an engine that shut down
   * under a pending op (this rank's or a peer's, whichever stopped first). */
  int pending_ok = kolo_init() == KOLO_OK;
  float lone[4] = {1, 2, 3, 4};
  kolo_handle* pending = NULL;
  if (pending_ok && kolo_rank() == 0)
    pending_ok = kolo_allreduce_async("pending.at.shutdown", lone, lone, 4, KOLO_FLOAT32, NULL,
                                      &pending) == KOLO_OK;
  pending_ok = kolo_comm_barrier() == KOLO_OK && pending_ok;
  pending_ok = kolo_shutdown() == KOLO_OK && pending_ok;
  if (pending) {
    const kolo_status s = kolo_wait(pending, 30.0);
    pending_ok = pending_ok && s == KOLO_ERR_PEER_LOST &&
                 strstr(kolo_handle_error(pending), "shut") != NULL;
    printf("lifecycle: the pending op: status %d, \"%s\"\n", (int)s, kolo_handle_error(pending));
    kolo_handle_free(pending);
  }
  check(pending_ok, "an op pending at kolo_shutdown fails with KOLO_ERR_PEER_LOST naming it");
  check(kolo_timeline_stop() == KOLO_ERR_INVALID_ARGUMENT &&
            strstr(kolo_last_error(), "kolo is not initialized") != NULL,
        "a call after kolo_shutdown is refused: kolo is not initialized");

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
  check(timeline_per_rank(), "kolo_timeline_start(path): rank 0 writes path, rank 1 path.rank1");
  check(shutdown_ends_a_waiting_direct_call(),
        "kolo_shutdown ends a direct call waiting on another thread, and kolo_init follows");
  kolo_shutdown();
  return failures == 0 ? 0 : 1;
}
