// A process set as the engine's loop holds it: its own communicator, response cache and (on the
// set's rank 0) coordinator, and the ops submitted on this rank that have not finished.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "fusion/coordinator.h"
#include "fusion/device.h"
#include "fusion/handle_state.h"
#include "fusion/request.h"
#include "fusion/response_cache.h"

namespace kolo::engine {

// Where a pending op's tensor lives. The shape is the request's: a view without one is
// copied and freed without touching the heap (a step submits and completes every gradient).
struct Memory {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  size_t elements = 0;
  int device = -1;
  void* stream = nullptr;  // device tensors: a cudaStream_t
  Memory() = default;
  explicit Memory(const TensorView& t)
      : data(t.data), dtype(t.dtype), elements(t.count()), device(t.device), stream(t.stream) {}
  size_t count() const { return elements; }
  size_t bytes() const { return elements * dtype_size(dtype); }
};

// A submitted op as this rank holds it.
struct Pending {
  Request request;
  Memory input, output;
  std::shared_ptr<Handle::State> state;
  uint64_t seq = 0;             // submission order within the set
  std::shared_ptr<void> ready;  // a device input: its producer's mark (DeviceBackend::ready)
  // When a cycle first found it in the response cache but could not run it (another rank had
  // not submitted it); zero until then.
  std::chrono::steady_clock::time_point cached_since{};
};

// By name. Hashed: a step looks up, inserts and erases every op by name (nothing iterates
// it in an order that matters: negotiation sorts by seq).
using PendingMap = std::unordered_map<std::string, Pending>;

struct ProcessSet {
  int id = 0;
  std::shared_ptr<Communicator> comm;  // the engine's own: never used by the application
  ResponseCache cache;
  std::unique_ptr<Coordinator> coordinator;  // on the set's rank 0
  PendingMap pending;
  uint64_t submitted = 0;  // ops taken from the queue so far
  bool joined = false;
  std::shared_ptr<Handle::State> join_state;
  // Joins completed on the set (every rank had joined): barrier names count from the last one.
  std::atomic<uint64_t> joins_completed{0};
  std::unique_ptr<DeviceSet> device;  // opened by the set's first device op
  // The device of this rank's device tensors in the set (-1: none yet): set at submission, read
  // by the loop to open `device` where this rank holds no tensor of the op (it joined).
  std::atomic<int> device_id{-1};
  // A cached op that has waited this long for other ranks goes through negotiation again, where
  // the stall inspector sees it: a rank that skips a tensor it sent in every earlier step is the
  // classic stall, and cache hits never reach the coordinator.
  std::chrono::steady_clock::duration renegotiate_after{};
  // On the coordinator with a timeline: the ranks whose request for a name the timeline has
  // marked ready (once each, not at every negotiation while the name waits).
  std::map<std::string, std::vector<bool>> marked_ready;

  // world_ranks: the set's job ranks, in order (empty for the set of all ranks).
  ProcessSet(int id, std::shared_ptr<Communicator> comm, const EngineOptions& options,
             std::vector<int> world_ranks = {});
  // Adds a submitted op to `pending`, in a node that an earlier op released when there is one
  // (op keeps its request, and the capacity of its strings and vectors, but not its state).
  void hold(Pending& op);
  // Removes a finished op; its node is kept for the next hold (a step of n tensors then
  // allocates no node after the first).
  void release(PendingMap::iterator op);

 private:
  std::vector<PendingMap::node_type> spare_;
};

}  // namespace kolo::engine
