// Runs the responses of one cycle on a process set's communicator, identically on every rank:
// fuses consecutive compatible allreduces (a grouped allreduce always as one unit) into the
// fusion buffer, runs the other ops one by one, fills outputs and completes handles.
#pragma once

#include <vector>

#include "fusion/pack.h"
#include "fusion/process_set.h"
#include "fusion/stats.h"

namespace kolo::timeline {
class Timeline;
}

namespace kolo::engine {

class Executor {
 public:
  Executor(const EngineOptions& options, timeline::Timeline* timeline, StatCounters* stats)
      : options_(options), timeline_(timeline), stats_(stats) {}
  void run(ProcessSet& set, const std::vector<const Response*>& responses);

 private:
  // Tensors of at least this many bytes skip the fusion buffer (see executor.cc).
  static constexpr size_t kUnfusedBytes = 128 * 1024;
  bool unfused(const Response& response) const;
  void run_unfused(ProcessSet& set, const Response& response);
  void allreduce_fused(ProcessSet& set, const std::vector<const Response*>& group);
  void pack_all(ProcessSet& set, const std::vector<const Response*>& group,
                const std::vector<PendingMap::iterator>& members, char* buf);
  void unpack_all(ProcessSet& set, const std::vector<const Response*>& group,
                  const std::vector<PendingMap::iterator>& members, const char* buf,
                  double postscale);
  // The device path (executor_device.cc): the set's device context, opened on first use on
  // `device` (-1, a rank that joined and holds no tensor of the op: the device of its earlier
  // tensors in the set, else the backend's current device).
  DeviceSet& device_set(ProcessSet& set, int device);
  void pack_device(DeviceSet& dev, ProcessSet& set, const std::vector<const Response*>& group,
                   const std::vector<PendingMap::iterator>& members, char* buf);
  void unpack_device(DeviceSet& dev, ProcessSet& set, const std::vector<const Response*>& group,
                     const std::vector<PendingMap::iterator>& members, const char* buf,
                     double postscale);
  // A device tensor's broadcast, allgather, alltoall or reduce_scatter; results the engine
  // sizes go to device memory the handle holds (Handle::device_output).
  void single_device(ProcessSet& set, Pending& p, const Response& r);
  void run_single(ProcessSet& set, const Response& response);
  void finish(ProcessSet& set, const Response& response, const Status& status);
  // Completes one pending op's handle and forgets the op.
  void complete(ProcessSet& set, PendingMap::iterator op, const Status& status);

  const EngineOptions& options_;
  timeline::Timeline* timeline_;
  StatCounters* stats_;
  fusion::FusionBuffer buffer_;
};

DType wire_dtype(DType dtype, Compression compression);
// Bytes that member i of r takes in the fusion buffer (aligned, so vector code stays aligned),
// and all of r's members.
size_t wire_bytes(const Response& r, size_t i);
size_t wire_bytes(const Response& r);

// Calls fn(response, index) for every tensor of every response in `group`, in buffer order.
template <typename Fn>
void for_each_tensor(const std::vector<const Response*>& group, Fn fn) {
  for (const Response* r : group)
    for (size_t i = 0; i < r->names.size(); ++i) fn(*r, i);
}

}  // namespace kolo::engine
