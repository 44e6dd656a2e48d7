// kolo::Engine, the Horovod-style core: any thread submits named tensors in any order and gets a
// Handle; one background thread per process negotiates which names are ready on every rank
// (rank 0 coordinates; names seen before skip the round trip through the response cache),
// checks that ranks agree, fuses ready tensors into one buffer and runs the collectives on a
// Communicator. See docs/engine.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/base/dtype.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"

namespace kolo {

class Communicator;

namespace engine {

class DeviceBackend;  // fusion/device.h

// A tensor as the engine sees it: host memory (device < 0) or a CUDA device id. Device tensors
// need EngineOptions::device (else they are refused with kInvalidArgument) and take every op
// but barrier and join (which carry no tensor); `stream` is the stream that produces their
// contents.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty = scalar
  int device = -1;
  void* stream = nullptr;  // device tensors: a cudaStream_t (null: the legacy default stream)
  size_t count() const;
  size_t bytes() const { return count() * dtype_size(dtype); }
};

enum class OpType : uint8_t {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReduceScatter,
  kBarrier,
  kJoin
};
const char* op_type_name(OpType type);

// What the wire carries for an allreduce: the tensor's own dtype, or fp16 / bf16.
enum class Compression : uint8_t { kNone, kFp16, kBf16 };

struct OpOptions {
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;   // multiplies the input before the reduction
  double postscale = 1.0;  // multiplies the result
  Compression compression = Compression::kNone;
  int root = 0;                 // broadcast
  std::vector<int64_t> splits;  // alltoall: first-dimension rows sent to each rank
  int process_set = 0;          // 0 = every rank
};

struct Status {
  ErrorCode code = ErrorCode::kInternal;  // meaningful when !ok
  bool ok = false;
  std::string message;
  static Status success() { return {ErrorCode::kInternal, true, ""}; }
  static Status failure(ErrorCode code, std::string message) {
    return {code, false, std::move(message)};
  }
};

// Completion of one submitted op; cheap to copy, safe to use from any thread.
class Handle {
 public:
  Handle() = default;
  // Waits up to `timeout`; true when done (successfully or not).
  bool wait(std::chrono::milliseconds timeout) const;
  bool done() const;
  Status status() const;  // only meaningful once done()
  void check() const;     // waits, then throws kolo::Error if the op failed
  // allgather / alltoall / reducescatter results are sized by the engine; join returns the
  // last rank to join in output_value().
  const std::vector<char>& output() const;
  // Those results for a device tensor: device memory on its device (output() stays empty),
  // owned by the handle and its copies.
  void* device_output() const;
  std::vector<int64_t> output_shape() const;
  int64_t output_value() const;

  struct State;
  explicit Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

struct EngineOptions {
  size_t fusion_threshold = 64 << 20;  // KOLO_FUSION_THRESHOLD (bytes)
  double cycle_time_ms = 1.0;          // KOLO_CYCLE_TIME_MS: the loop thread's batching window
  // KOLO_ENGINE_PROGRESS: who drives the cycles of ops that no thread waits for yet.
  //   kThread: the loop thread, once the batching window has passed (overlap with compute);
  //   kWaiter: while the application is active (it submitted or waited within the last
  //     KOLO_WAITER_GRACE_MS), the loop thread leaves them to the thread that will wait for
  //     them; it still drives them when the application goes quiet, and after at most
  //     kMaxDeferMs of deferring in a row (peers waiting in a cycle are never held longer);
  //   kAuto: kWaiter when this host's ranks leave no core for the loop thread (at least as many
  //     ranks on the host as CPUs this process may use), else kThread.
  enum class Progress : uint8_t { kAuto, kThread, kWaiter };
  Progress progress = Progress::kAuto;
  double waiter_grace_ms = 20;  // KOLO_WAITER_GRACE_MS
  static constexpr double kMaxDeferMs = 250;
  size_t cache_capacity = 1024;       // KOLO_CACHE_CAPACITY (0 disables the cache)
  double stall_check_seconds = 60;    // KOLO_STALL_CHECK_SECONDS
  double stall_shutdown_seconds = 0;  // KOLO_STALL_SHUTDOWN_SECONDS (0 = never)
  std::string timeline_path;          // KOLO_TIMELINE
  // KOLO_DEVICE_HIERARCHICAL: device allreduces of a set spanning several hosts are reduced
  // inside each host (the device backend), between hosts by kolo's communicator on host memory,
  // and broadcast back inside each host (fusion/device_hierarchical.h).
  bool device_hierarchical = false;
  // Runs ops on device tensors (kolo_engine_cuda's cuda_device_backend()); null: refused.
  std::shared_ptr<DeviceBackend> device;
  static EngineOptions from_env();
};

// Whether `progress`, with kAuto resolved for a rank that shares its host with `local_size`
// ranks (itself included) running on `host_cpus` CPUs together, leaves the driving to the
// threads that wait (kWaiter): so it does when no CPU is spare, or the process has only one.
bool waiters_drive(EngineOptions::Progress progress, int local_size, int host_cpus);

struct EngineStats {
  uint64_t cycles = 0, negotiations = 0, cache_hits = 0, responses = 0;
  uint64_t fused_collectives = 0, fused_tensors = 0;  // collectives that carried > 1 tensor
  uint64_t bytes_submitted = 0, bytes_sent = 0;       // bytes_sent counts the wire dtype
};

class Engine {
 public:
  Engine(std::shared_ptr<Communicator> comm, EngineOptions options = EngineOptions::from_env());
  ~Engine();  // shuts down: pending ops fail with a clear error
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every op names its tensor; a name still pending on this rank is refused (kInvalidArgument).
  Handle allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                   const OpOptions& options = {});
  // In-place allreduces that ranks negotiate and reduce as one unit: no member runs before
  // every member is ready on every rank, and all complete together. Returns one handle per
  // tensor; every rank must pass the same names with the same dtype, op and options.
  std::vector<Handle> grouped_allreduce(const std::vector<std::string>& names,
                                        const std::vector<TensorView>& tensors,
                                        const OpOptions& options = {});
  Handle allgather(const std::string& name, const TensorView& input, const OpOptions& options = {});
  Handle broadcast(const std::string& name, const TensorView& tensor, int root,
                   const OpOptions& options = {});
  Handle alltoall(const std::string& name, const TensorView& input, const OpOptions& options = {});
  // Rows (the first dimension) split as evenly as possible, the first rows % size ranks
  // getting one more; output() holds this rank's reduced rows.
  Handle reduce_scatter(const std::string& name, const TensorView& input,
                        const OpOptions& options = {});
  Handle barrier(const OpOptions& options = {});
  // This rank has no more data: it takes part in other ranks' allreduces with the op's identity
  // (zeros for a sum; reduce::fill_identity) until every rank has joined. output_value() is the
  // last rank to join.
  Handle join(const OpOptions& options = {});

  // A process set over the given world ranks (any order, each once); collective: every rank
  // calls it in the same order with the same ranks, or every rank gets kMismatch naming the
  // lists. Returns its id for OpOptions::process_set.
  int add_process_set(const std::vector<int>& ranks);
  // Removes process set `id` (not 0, the set of all ranks); collective like add_process_set:
  // every rank removes the same sets in the same order, or every rank gets kMismatch. Ops on it
  // are refused from now on (kInvalidArgument); at a later cycle, the same on every rank, an op
  // of the set still pending fails with kInvalidArgument and the set's communicator is freed.
  void remove_process_set(int id);

  void start_timeline(const std::string& path);
  void stop_timeline();
  EngineStats stats() const;
  Communicator& communicator() const;
  // kInvalidArgument in a forked child of the process that made the engine: its ops (and direct
  // collectives on communicator()) would run the parent's collectives. Ops check it themselves.
  void check_process() const;

  class Impl;  // fusion/engine_impl.h

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace engine
}  // namespace kolo
