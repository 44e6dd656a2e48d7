// The C API (bindings/c/kolo.h) over kolo::Communicator and kolo::engine::Engine: one world
// communicator and one engine per process, kolo::Error turned into status codes and a
// thread-local message.
#include "bindings/c/kolo.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "comm/base/interrupt.h"
#include "comm/communicator.h"
#include "fusion/engine.h"

struct kolo_handle {
  kolo::engine::Handle handle;
  std::string error;
};

namespace {

// g_comm and g_engine change only under g_mutex; calls take a reference under it, so a
// concurrent kolo_shutdown cannot free the engine under a running call.
std::mutex g_mutex;
std::shared_ptr<kolo::Communicator> g_comm;
std::shared_ptr<kolo::engine::Engine> g_engine;
thread_local std::string g_last_error;

// The door: every C argument is checked here before it becomes a C++ enum or a size.
[[noreturn]] void invalid(const std::string& message) {
  throw kolo::Error(kolo::ErrorCode::kInvalidArgument, message);
}

const char* checked_name(const char* name) {
  if (name == nullptr) invalid("the tensor name is null");
  return name;
}

kolo_status to_status(kolo::ErrorCode code) {
  switch (code) {
    case kolo::ErrorCode::kInvalidArgument: return KOLO_ERR_INVALID_ARGUMENT;
    case kolo::ErrorCode::kTimeout: return KOLO_ERR_TIMEOUT;
    case kolo::ErrorCode::kPeerLost: return KOLO_ERR_PEER_LOST;
    case kolo::ErrorCode::kMismatch: return KOLO_ERR_MISMATCH;
    case kolo::ErrorCode::kIo: return KOLO_ERR_IO;
    case kolo::ErrorCode::kAuth: return KOLO_ERR_AUTH;
    case kolo::ErrorCode::kInternal: break;
  }
  return KOLO_ERR_INTERNAL;
}

// Runs `fn`, mapping exceptions to a status and remembering the message.
template <typename Fn>
kolo_status guarded(Fn fn) {
  try {
    fn();
    return KOLO_OK;
  } catch (const kolo::Error& e) {
    g_last_error = e.what();
    return to_status(e.code());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return KOLO_ERR_INTERNAL;
  }
}

// kolo_shutdown on another thread ends a direct call that waits (for a peer that never comes
// it held the communicator, and the next kolo_init, until its deadline): each direct call runs
// with an interrupt hook (comm/base/interrupt.h) that asks whether a shutdown came since the
// call began, so its wait ends within ~0.1 s.
std::atomic<uint64_t> g_shutdowns{0};
thread_local uint64_t t_shutdowns_at_call = 0;
bool shut_down_since_call() {
  return g_shutdowns.load() != t_shutdowns_at_call;
}

std::shared_ptr<kolo::engine::Engine> engine() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_engine)
    invalid("kolo is not initialized (kolo_init() was not called, or kolo_shutdown() was)");
  // With the engine, under the lock kolo_shutdown counts under: a shutdown and init between the
  // two would leave a call on the new engine looking interrupted.
  t_shutdowns_at_call = g_shutdowns.load();
  return g_engine;
}

// A direct collective on the world communicator, which serves one call at a time: calls from
// several threads take turns (each rank must still make them in the same order).
std::mutex g_direct_mutex;
template <typename Fn>
kolo_status direct(Fn fn) {
  return guarded([&] {
    // The lock first, then the engine: a call queued behind another holds no engine (a
    // shutdown would wait for it, and an init after that would meet the old store), and the
    // engine is let go before the lock, which kolo_shutdown waits for.
    std::lock_guard<std::mutex> lock(g_direct_mutex);
    auto e = engine();
    e->check_process();
    kolo::ScopedInterruptHook hook(&shut_down_since_call);
    fn(e->communicator());
  });
}

kolo::ReduceOp op_of(int op) {
  if (op < 0 || op >= kolo::kNumReduceOps)
    invalid("reduce op " + std::to_string(op) + " is not a kolo_op (KOLO_SUM .. KOLO_BXOR)");
  return static_cast<kolo::ReduceOp>(op);
}

kolo::engine::OpOptions convert(const kolo_options* o) {
  kolo_options c = o ? *o : kolo_default_options();
  kolo::engine::OpOptions out;
  out.op = op_of(static_cast<int>(c.op));
  if (static_cast<int>(c.compression) < 0 || static_cast<int>(c.compression) > 2)
    invalid("compression " + std::to_string(static_cast<int>(c.compression)) +
            " is not a kolo_compression");
  out.prescale = c.prescale;
  out.postscale = c.postscale;
  out.compression = static_cast<kolo::engine::Compression>(c.compression);
  out.root = c.root;
  out.process_set = c.process_set;
  return out;
}

// kolo_dtype's values are DType's, cast across: the two enums must stay in step.
static_assert(KOLO_UINT8 == static_cast<int>(kolo::DType::kUInt8) &&
              KOLO_INT8 == static_cast<int>(kolo::DType::kInt8) &&
              KOLO_INT16 == static_cast<int>(kolo::kLastDType));

kolo::DType dtype_of(kolo_dtype d) {
  const int value = static_cast<int>(d);
  if (value < 0 || value >= kolo::kNumDTypes)
    invalid("dtype " + std::to_string(value) + " is not a kolo_dtype (KOLO_FLOAT32 .. KOLO_INT16)");
  return static_cast<kolo::DType>(d);
}

// A refused argument outside a guarded call, which need no try block: the status and the
// message kolo_last_error() gives.
kolo_status refuse(const std::string& message) {
  g_last_error = "kolo: " + message;
  return KOLO_ERR_INVALID_ARGUMENT;
}

// Runs `make` (which submits an op) and hands its Handle to C through `out`, which is checked
// first: an op submitted without a handle to wait on would run with nobody told.
template <typename Fn>
kolo_status submit(kolo_handle** out, Fn make) {
  if (!out) return refuse("the handle pointer is null");
  kolo::engine::Handle h;
  kolo_status s = guarded([&] { h = make(); });
  if (s == KOLO_OK) *out = new kolo_handle{std::move(h), ""};
  return s;
}

kolo::engine::TensorView view(const void* data, kolo_dtype dtype, int ndim, const int64_t* shape) {
  if (ndim < 0 || ndim > 32) invalid("ndim " + std::to_string(ndim) + " is not in [0, 32]");
  if (shape == nullptr && ndim > 0)
    invalid("the shape pointer is null (ndim " + std::to_string(ndim) + ")");
  std::vector<int64_t> dims(shape, shape + ndim);
  for (int64_t d : dims)
    if (d < 0) invalid("shape dimension " + std::to_string(d) + " is negative");
  return {const_cast<void*>(data), dtype_of(dtype), std::move(dims)};
}

// A 1-D count: negative counts are refused (they used to become huge sizes).
kolo::engine::TensorView view1(const void* data, kolo_dtype dtype, int64_t count) {
  if (count < 0) invalid("count " + std::to_string(count) + " is negative");
  return view(data, dtype, 1, &count);
}

int topology(int (kolo::Communicator::*get)() const) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_comm ? ((*g_comm).*get)() : -1;
}

}  // namespace

extern "C" {

kolo_options kolo_default_options(void) {
  return {KOLO_SUM, 1.0, 1.0, KOLO_COMPRESSION_NONE, 0, 0};
}

kolo_status kolo_init(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_engine) return KOLO_OK;
  return guarded([] {
    // Both or neither: when the engine refuses to start (settings that differ), the communicator
    // and rank 0's store thread end here instead of running on into exit (LeakSanitizer).
    // The engine's settings are read before the rendezvous: a bad one fails each rank with its
    // own message, not as a store that rank 0's failure closed under the others.
    kolo::engine::EngineOptions options = kolo::engine::EngineOptions::from_env();
    auto comm = kolo::Communicator::init();
    g_engine = std::make_shared<kolo::engine::Engine>(comm, std::move(options));
    g_comm = std::move(comm);
  });
}

kolo_status kolo_shutdown(void) {
  kolo_status status;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_shutdowns.fetch_add(1);  // a direct call waiting on another thread gives up
    status = guarded([] {
      g_engine.reset();
      g_comm.reset();
    });
  }
  // Until such a call has let the engine and communicator go (not under g_mutex, which a
  // direct call takes inside this lock), so that a kolo_init that follows does not meet the old
  // rendezvous store.
  std::lock_guard<std::mutex> direct_done(g_direct_mutex);
  return status;
}

int kolo_rank(void) {
  return topology(&kolo::Communicator::rank);
}
int kolo_size(void) {
  return topology(&kolo::Communicator::size);
}
int kolo_local_rank(void) {
  return topology(&kolo::Communicator::local_rank);
}
int kolo_local_size(void) {
  return topology(&kolo::Communicator::local_size);
}
int kolo_cross_rank(void) {
  return topology(&kolo::Communicator::cross_rank);
}
int kolo_cross_size(void) {
  return topology(&kolo::Communicator::cross_size);
}
const char* kolo_last_error(void) {
  return g_last_error.c_str();
}

kolo_status kolo_allreduce_async(const char* name, const void* input, void* output, int64_t count,
                                 kolo_dtype dtype, const kolo_options* options,
                                 kolo_handle** handle) {
  return submit(handle, [&] {
    return engine()->allreduce(checked_name(name), view1(input, dtype, count),
                               view1(output, dtype, count), convert(options));
  });
}

kolo_status kolo_allgather_async(const char* name, const void* input, int ndim,
                                 const int64_t* shape, kolo_dtype dtype,
                                 const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] {
    return engine()->allgather(checked_name(name), view(input, dtype, ndim, shape),
                               convert(options));
  });
}

kolo_status kolo_broadcast_async(const char* name, void* data, int64_t count, kolo_dtype dtype,
                                 const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] {
    auto o = convert(options);
    return engine()->broadcast(checked_name(name), view1(data, dtype, count), o.root, o);
  });
}

kolo_status kolo_alltoall_async(const char* name, const void* input, int ndim, const int64_t* shape,
                                const int64_t* splits, kolo_dtype dtype,
                                const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] {
    auto o = convert(options);
    auto e = engine();
    if (splits) o.splits.assign(splits, splits + e->communicator().size());
    return e->alltoall(checked_name(name), view(input, dtype, ndim, shape), o);
  });
}

kolo_status kolo_reducescatter_async(const char* name, const void* input, int ndim,
                                     const int64_t* shape, kolo_dtype dtype,
                                     const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] {
    return engine()->reduce_scatter(checked_name(name), view(input, dtype, ndim, shape),
                                    convert(options));
  });
}

kolo_status kolo_barrier_async(const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] { return engine()->barrier(convert(options)); });
}

kolo_status kolo_join_async(const kolo_options* options, kolo_handle** handle) {
  return submit(handle, [&] { return engine()->join(convert(options)); });
}

kolo_status kolo_wait(kolo_handle* handle, double timeout_seconds) {
  if (!handle) return refuse("kolo_wait: the handle is null");
  if (std::isnan(timeout_seconds)) return refuse("kolo_wait: timeout_seconds is NaN");
  // Negative: a poll; past a year (infinity included): a year.
  const double seconds = std::clamp(timeout_seconds, 0.0, 365.0 * 24 * 3600);
  auto ms = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  if (!handle->handle.wait(ms)) return KOLO_PENDING;
  return kolo_poll(handle);
}

kolo_status kolo_poll(kolo_handle* handle) {
  if (!handle) return refuse("kolo_poll: the handle is null");
  if (!handle->handle.done()) return KOLO_PENDING;
  auto status = handle->handle.status();
  if (status.ok) return KOLO_OK;
  handle->error = status.message;
  g_last_error = status.message;
  return to_status(status.code);
}

const char* kolo_handle_error(kolo_handle* handle) {
  return handle ? handle->error.c_str() : "null handle";
}

kolo_status kolo_handle_output(kolo_handle* handle, const void** data, size_t* bytes) {
  if (!handle || !data || !bytes)
    return refuse(std::string("kolo_handle_output: the ") +
                  (!handle ? "handle"
                   : !data ? "data pointer"
                           : "bytes pointer") +
                  " is null");
  // The output exists only once the op has finished, and only if it succeeded.
  const kolo_status done = kolo_poll(handle);
  if (done != KOLO_OK) return done;
  const auto& out = handle->handle.output();
  *data = out.data();
  *bytes = out.size();
  return KOLO_OK;
}

int64_t kolo_handle_value(kolo_handle* handle) {
  return handle && handle->handle.done() ? handle->handle.output_value() : -1;
}

void kolo_handle_free(kolo_handle* handle) {
  delete handle;
}

kolo_status kolo_add_process_set(const int* ranks, int count, int* process_set) {
  return guarded([&] {
    if (process_set == nullptr) invalid("the process_set pointer is null");
    if (count < 0) invalid("count " + std::to_string(count) + " (of ranks) is negative");
    if (ranks == nullptr && count > 0)
      invalid("the ranks pointer is null (count " + std::to_string(count) + ")");
    // The split runs on the world communicator, as the direct collectives do (the lock first,
    // as there).
    std::lock_guard<std::mutex> lock(g_direct_mutex);
    auto e = engine();
    *process_set = e->add_process_set(std::vector<int>(ranks, ranks + count));
  });
}

kolo_status kolo_remove_process_set(int process_set) {
  return guarded([&] {
    std::lock_guard<std::mutex> lock(g_direct_mutex);  // collective on the world communicator
    engine()->remove_process_set(process_set);
  });
}

kolo_status kolo_timeline_start(const char* path) {
  return guarded([&] {
    if (path == nullptr) invalid("the timeline path is null");
    engine()->start_timeline(path);
  });
}

kolo_status kolo_timeline_stop(void) {
  return guarded([] { engine()->stop_timeline(); });
}

kolo_status kolo_comm_allreduce(const void* send, void* recv, size_t count, kolo_dtype dtype,
                                kolo_op op) {
  return direct([&](kolo::Communicator& c) {
    c.allreduce(send, recv, count, dtype_of(dtype), op_of(static_cast<int>(op)));
  });
}

kolo_status kolo_comm_allgather(const void* send, void* recv, size_t count, kolo_dtype dtype) {
  return direct([&](kolo::Communicator& c) { c.allgather(send, recv, count, dtype_of(dtype)); });
}

kolo_status kolo_comm_broadcast(void* data, size_t count, kolo_dtype dtype, int root) {
  return direct([&](kolo::Communicator& c) { c.broadcast(data, count, dtype_of(dtype), root); });
}

kolo_status kolo_comm_barrier(void) {
  return direct([](kolo::Communicator& c) { c.barrier(); });
}

}  // extern "C"
