// The executor's device path: a set's device context (DeviceSet), and the device versions of
// pack, unpack and broadcast. Every call queues on the context's stream; the executor
// synchronizes once before completing the handles, so a completed handle's output is ready.
#include <vector>

#include "fusion/executor.h"
#include "timeline/timeline.h"

namespace kolo::engine {

DeviceSet& Executor::device_set(ProcessSet& set, int device) {
  if (!set.device) set.device = options_.device->open(*set.comm, device);
  return *set.device;
}

void Executor::pack_device(DeviceSet& dev, ProcessSet& set,
                           const std::vector<const Response*>& group,
                           const std::vector<PendingMap::iterator>& members, char* buf) {
  const Request& p = group[0]->params;
  std::vector<fusion::cuda::Span> spans;
  size_t at = 0, k = 0;
  for_each_tensor(group, [&](const Response& r, size_t i) {
    auto it = members[k++];
    if (it == set.pending.end()) {
      dev.zero(buf + at, wire_bytes(r, i));  // this rank joined: it contributes zeros
    } else {
      timeline_->end(it->first, "QUEUE");
      dev.wait_ready(it->second.ready);
      spans.push_back({it->second.input.data, buf + at, static_cast<uint64_t>(r.counts[i])});
    }
    at += wire_bytes(r, i);
  });
  dev.convert(spans.data(), spans.size(), p.dtype, wire_dtype(p.dtype, p.compression), p.prescale);
}

void Executor::unpack_device(DeviceSet& dev, ProcessSet& set,
                             const std::vector<const Response*>& group,
                             const std::vector<PendingMap::iterator>& members, const char* buf,
                             double postscale) {
  const Request& p = group[0]->params;
  std::vector<fusion::cuda::Span> spans;
  size_t at = 0, k = 0;
  for_each_tensor(group, [&](const Response& r, size_t i) {
    auto it = members[k++];
    if (it != set.pending.end()) {
      spans.push_back({buf + at, it->second.output.data, static_cast<uint64_t>(r.counts[i])});
      stats_->bytes_submitted += it->second.input.bytes();
    }
    at += wire_bytes(r, i);
  });
  dev.convert(spans.data(), spans.size(), wire_dtype(p.dtype, p.compression), p.dtype, postscale);
  dev.synchronize();
  for (auto it : members)
    if (it != set.pending.end()) timeline_->end(it->first, "ALLREDUCE");
}

void Executor::broadcast_device(ProcessSet& set, Pending& p) {
  DeviceSet& dev = device_set(set, p.input.device);
  dev.wait_ready(p.ready);
  dev.broadcast(p.input.data, p.input.count(), p.request.dtype, p.request.root);
  if (p.output.data && p.output.data != p.input.data) {
    const fusion::cuda::Span copy{p.input.data, p.output.data, p.input.count()};
    dev.convert(&copy, 1, p.request.dtype, p.request.dtype, 1.0);
  }
  dev.synchronize();
}

}  // namespace kolo::engine
