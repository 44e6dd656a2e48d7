/* kolo C API: the engine's asynchronous named collectives and the direct (synchronous)
 * Communicator collectives, for frameworks written in C or binding through a C FFI.
 *
 * Every call returns a kolo_status; KOLO_OK is 0. When a call fails, kolo_last_error() gives
 * the message on the calling thread (also when kolo_wait, kolo_poll or kolo_handle_output return
 * an op's failure, which kolo_handle_error keeps with the handle). Every argument is checked at the
 * door (counts, shapes, splits, dtypes, ops, roots, process sets, NULL pointers, byte-size
 * overflow): a bad one returns KOLO_ERR_INVALID_ARGUMENT naming it, and the engine keeps working.
 * Handles must be released with kolo_handle_free(). Start the processes with kolorun, mpirun,
 * torchrun-style or Slurm variables (see docs/configuration.md), call kolo_init() on every rank,
 * and kolo_shutdown() at the end. */
#ifndef KOLO_C_API_H
#define KOLO_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The enums a caller passes in hold any int in C++ too (a fixed underlying type), as in C: a
 * C caller may pass any value, and the door refuses one that is not an enumerator. Without it
 * the C++ side would hold an out-of-range enum, which is undefined behaviour. */
#ifdef __cplusplus
#define KOLO_ENUM_BASE : int
#else
#define KOLO_ENUM_BASE
#endif

typedef enum {
  KOLO_OK = 0,
  KOLO_ERR_INVALID_ARGUMENT = 1,
  KOLO_ERR_TIMEOUT = 2,
  KOLO_ERR_PEER_LOST = 3,
  KOLO_ERR_MISMATCH = 4,
  KOLO_ERR_IO = 5,
  KOLO_ERR_AUTH = 6,
  KOLO_ERR_INTERNAL = 7,
  KOLO_PENDING = 8 /* kolo_poll / kolo_wait: not finished yet */
} kolo_status;

typedef enum KOLO_ENUM_BASE {
  KOLO_FLOAT32,
  KOLO_FLOAT64,
  KOLO_FLOAT16,
  KOLO_BFLOAT16,
  KOLO_INT32,
  KOLO_INT64,
  KOLO_UINT8,
  KOLO_INT8, /* added after KOLO_UINT8: the values above keep their numbers */
  KOLO_INT16
} kolo_dtype;

/* KOLO_BAND, KOLO_BOR, KOLO_BXOR (and, or, xor of the bits) take the integer dtypes only. */
typedef enum KOLO_ENUM_BASE {
  KOLO_SUM,
  KOLO_AVERAGE,
  KOLO_MIN,
  KOLO_MAX,
  KOLO_PRODUCT,
  KOLO_BAND, /* added after KOLO_PRODUCT: the values above keep their numbers */
  KOLO_BOR,
  KOLO_BXOR
} kolo_op;

typedef enum KOLO_ENUM_BASE {
  KOLO_COMPRESSION_NONE,
  KOLO_COMPRESSION_FP16,
  KOLO_COMPRESSION_BF16
} kolo_compression;

typedef struct kolo_handle kolo_handle;

/* Options of an asynchronous op. kolo_default_options() gives sum, scales 1, no compression,
 * root 0, process set 0 (all ranks). */
typedef struct {
  kolo_op op;
  double prescale;
  double postscale;
  kolo_compression compression;
  int root;
  int process_set;
} kolo_options;

kolo_options kolo_default_options(void);

/* Lifecycle and topology. Before kolo_init and after kolo_shutdown, calls return
 * KOLO_ERR_INVALID_ARGUMENT ("kolo is not initialized ..."); an op still pending when this
 * rank calls kolo_shutdown fails with KOLO_ERR_PEER_LOST ("this rank's engine was shut down"). */
kolo_status kolo_init(void);
kolo_status kolo_shutdown(void);
int kolo_rank(void);
int kolo_size(void);
int kolo_local_rank(void);
int kolo_local_size(void);
int kolo_cross_rank(void);
int kolo_cross_size(void);
const char* kolo_last_error(void);

/* Asynchronous named ops. `name` must not be pending already on this rank. An allreduce's
 * output is its input (in place) or shares no byte with it; other overlaps are refused. */
kolo_status kolo_allreduce_async(const char* name, const void* input, void* output, int64_t count,
                                 kolo_dtype dtype, const kolo_options* options,
                                 kolo_handle** handle);
/* shape[0] (rows) may differ between ranks; the result is read with kolo_handle_output. */
kolo_status kolo_allgather_async(const char* name, const void* input, int ndim,
                                 const int64_t* shape, kolo_dtype dtype,
                                 const kolo_options* options, kolo_handle** handle);
kolo_status kolo_broadcast_async(const char* name, void* data, int64_t count, kolo_dtype dtype,
                                 const kolo_options* options, kolo_handle** handle);
/* Rows of `input` (shape[0]) go to the ranks in order: splits[p] rows to rank p (size()
 * entries; NULL splits the rows evenly). The received rows are read with kolo_handle_output. */
kolo_status kolo_alltoall_async(const char* name, const void* input, int ndim, const int64_t* shape,
                                const int64_t* splits, kolo_dtype dtype,
                                const kolo_options* options, kolo_handle** handle);
/* Reduces `input` over all ranks; this rank receives its share of the rows (shape[0] split as
 * evenly as possible), read with kolo_handle_output. */
kolo_status kolo_reducescatter_async(const char* name, const void* input, int ndim,
                                     const int64_t* shape, kolo_dtype dtype,
                                     const kolo_options* options, kolo_handle** handle);
kolo_status kolo_barrier_async(const kolo_options* options, kolo_handle** handle);
/* This rank has no more data; the handle's value (kolo_handle_value) is the last rank to join. */
kolo_status kolo_join_async(const kolo_options* options, kolo_handle** handle);

/* Handles. kolo_wait returns KOLO_PENDING when `timeout_seconds` passed first (a negative
 * timeout polls; one past a year, infinity included, waits a year; NaN is refused). */
kolo_status kolo_wait(kolo_handle* handle, double timeout_seconds);
kolo_status kolo_poll(kolo_handle* handle);
const char* kolo_handle_error(kolo_handle* handle);
/* The result of a finished, successful op (allgather, alltoall, reducescatter): KOLO_PENDING
 * while it runs, the op's error status if it failed. */
kolo_status kolo_handle_output(kolo_handle* handle, const void** data, size_t* bytes);
/* A finished op's value (join: the last rank to join); -1 while it runs or for a null handle. */
int64_t kolo_handle_value(kolo_handle* handle);
void kolo_handle_free(kolo_handle* handle);

/* Process sets: collective over all ranks, called in the same order everywhere with the same
 * ranks (in any order, each once). Ranks that pass different lists all get KOLO_ERR_MISMATCH
 * naming two of them; a rank outside the job or given twice, KOLO_ERR_INVALID_ARGUMENT. */
kolo_status kolo_add_process_set(const int* ranks, int count, int* process_set);
/* Removes a process set (not 0), collective like kolo_add_process_set: every rank removes the
 * same sets in the same order (else KOLO_ERR_MISMATCH on every rank). Later ops on it return
 * KOLO_ERR_INVALID_ARGUMENT; an op of the set still pending fails with it too, and the set's
 * communicator (about 1 MiB per set on shared memory) is freed. */
kolo_status kolo_remove_process_set(int process_set);

/* Timeline (Chrome trace JSON, also KOLO_TIMELINE). Every rank passes the same path: rank 0
 * writes `path`, rank r `path.rank<r>` (or `%r` in the path is replaced by the rank). */
kolo_status kolo_timeline_start(const char* path);
kolo_status kolo_timeline_stop(void);

/* Direct, synchronous collectives on the world communicator (every rank, same order). Calls from
 * several threads take turns (so each rank must order them the same way itself). None of the
 * calls above or below may be made from a forked child of the process that called kolo_init()
 * (KOLO_ERR_INVALID_ARGUMENT): it shares the parent's communicator. A direct call with 0
 * elements still meets the other ranks, so one passing 0 where another passes n fails on both.
 * A direct call that fails on a mismatch, a timeout or a lost rank fails the world communicator
 * for good (docs/errors.md): later direct calls and kolo_add_process_set return
 * KOLO_ERR_PEER_LOST quoting the first error, while the engine's ops go on. */
kolo_status kolo_comm_allreduce(const void* send, void* recv, size_t count, kolo_dtype dtype,
                                kolo_op op);
/* recv holds size * count elements, rank r's at r * count; in place, send is this rank's own
 * slot (send == recv + rank * count elements). Other overlaps of send and recv are refused. */
kolo_status kolo_comm_allgather(const void* send, void* recv, size_t count, kolo_dtype dtype);
kolo_status kolo_comm_broadcast(void* data, size_t count, kolo_dtype dtype, int root);
kolo_status kolo_comm_barrier(void);

#ifdef __cplusplus
}
#endif

#endif /* KOLO_C_API_H */
