// The executor's device path: a set's device context (DeviceSet), and the device versions of
// pack and unpack and of the single ops (broadcast, allgather, alltoall, reduce_scatter). Every
// call queues on the context's stream; the executor synchronizes once before completing the
// handles, so a completed handle's output is ready.
#include <algorithm>
#include <numeric>
#include <vector>

#include "comm/base/error.h"
#include "comm/reduce/reduce.h"
#include "fusion/device_hierarchical.h"
#include "fusion/executor.h"
#include "fusion/op_plans.h"
#include "timeline/timeline.h"

namespace kolo::engine {
namespace {

// What a rank that has joined contributes to a device reduction: zeros for a sum, else the op's
// identity made on the host and copied over (a rare path: only after a join).
void join_identity(DeviceSet& dev, char* dst, size_t bytes, DType wire, ReduceOp op) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage) return dev.zero(dst, bytes);
  std::vector<char> host(bytes);
  reduce::fill_identity(host.data(), bytes / dtype_size(wire), wire, op);
  dev.copy_from_host(dst, host.data(), bytes);
}

}  // namespace

DeviceSet& Executor::device_set(ProcessSet& set, int device) {
  if (!set.device) {
    if (device < 0) device = set.device_id.load();  // this rank joined: its earlier tensors'
    const bool across_hosts = options_.device_hierarchical && set.comm->cross_size() > 1;
    set.device = across_hosts ? open_hierarchical(*options_.device, *set.comm, device)
                              : options_.device->open(*set.comm, device);
  }
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
      join_identity(dev, buf + at, wire_bytes(r, i), wire_dtype(p.dtype, p.compression), p.op);
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
  size_t at = 0, k = 0, submitted = 0;
  for_each_tensor(group, [&](const Response& r, size_t i) {
    auto it = members[k++];
    if (it != set.pending.end()) {
      spans.push_back({buf + at, it->second.output.data, static_cast<uint64_t>(r.counts[i])});
      submitted += it->second.input.bytes();
    }
    at += wire_bytes(r, i);
  });
  stats_->bytes_submitted += submitted;
  dev.convert(spans.data(), spans.size(), wire_dtype(p.dtype, p.compression), p.dtype, postscale);
  dev.synchronize();
  for (auto it : members)
    if (it != set.pending.end()) timeline_->end(it->first, "ALLREDUCE");
}

namespace {

size_t total(const std::vector<size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

// Result memory for `elements` of `dtype` (at least one byte: a handle's result is never null).
std::shared_ptr<void> result(DeviceSet& dev, size_t elements, DType dtype) {
  return dev.allocate(std::max<size_t>(elements * dtype_size(dtype), 1));
}

void broadcast(DeviceSet& dev, Pending& p) {
  dev.broadcast(p.input.data, p.input.count(), p.request.dtype, p.request.root);
  if (p.output.data && p.output.data != p.input.data) {
    const fusion::cuda::Span copy{p.input.data, p.output.data, p.input.count()};
    dev.convert(&copy, 1, p.request.dtype, p.request.dtype, 1.0);
  }
}

void allgather(DeviceSet& dev, Pending& p, const Response& r) {
  const Exchange e = allgather_plan(p.request, r);
  auto out = result(dev, total(e.recv), p.request.dtype);
  dev.allgatherv(p.input.data, p.input.count(), out.get(), e.recv, p.request.dtype);
  p.state->device_output = std::move(out);
  p.state->output_shape = with_rows(p.request.shape, e.rows);
}

void alltoall(DeviceSet& dev, Pending& p, const Response& r, size_t rank, size_t size) {
  const Exchange e = alltoall_plan(p.request, r, rank, size);
  auto out = result(dev, total(e.recv), p.request.dtype);
  dev.alltoallv(p.input.data, e.send, out.get(), e.recv, p.request.dtype);
  p.state->device_output = std::move(out);
  p.state->output_shape = with_rows(p.request.shape, e.rows);
}

// As the host's: uneven rows (or a prescale) go through a padded device copy.
void reduce_scatter(DeviceSet& dev, Pending& p, size_t rank, size_t size) {
  const Request& q = p.request;
  const RowSplit split = row_split(q, size);
  const size_t esize = dtype_size(q.dtype), row = split.row, block = split.block;
  const void* in = p.input.data;
  std::shared_ptr<void> padded;
  if (split.extra != 0 || q.prescale != 1.0) {
    padded = result(dev, split.n * block * row, q.dtype);
    char* base = static_cast<char*>(padded.get());
    dev.zero(base, split.n * block * row * esize);
    std::vector<fusion::cuda::Span> spans;
    for (size_t r = 0; r < split.n; ++r)
      spans.push_back({static_cast<const char*>(in) + split.first(r) * row * esize,
                       base + r * block * row * esize, split.count(r) * row});
    dev.convert(spans.data(), spans.size(), q.dtype, q.dtype, q.prescale);
    in = base;
  }
  auto out = result(dev, block * row, q.dtype);
  dev.reduce_scatter(in, out.get(), block * row, q.dtype, q.op);
  const size_t mine = split.count(rank);
  if (q.postscale != 1.0) {
    const fusion::cuda::Span scale{out.get(), out.get(), mine * row};
    dev.convert(&scale, 1, q.dtype, q.dtype, q.postscale);
  }
  p.state->device_output = std::move(out);
  p.state->output_shape = with_rows(q.shape, static_cast<int64_t>(mine));
  dev.synchronize();  // the padded copy is freed on return
}

}  // namespace

void Executor::single_device(ProcessSet& set, Pending& p, const Response& r) {
  DeviceSet& dev = device_set(set, p.input.device);
  const size_t rank = static_cast<size_t>(set.comm->rank()),
               size = static_cast<size_t>(set.comm->size());
  dev.wait_ready(p.ready);
  switch (r.type) {
    case OpType::kBroadcast: broadcast(dev, p); break;
    case OpType::kAllgather: allgather(dev, p, r); break;
    case OpType::kAlltoall: alltoall(dev, p, r, rank, size); break;
    case OpType::kReduceScatter: reduce_scatter(dev, p, rank, size); break;
    default:
      KOLO_THROW(ErrorCode::kInternal, op_type_name(r.type), " of '", r.names[0],
                 "' reached the device path");
  }
  dev.synchronize();
}

}  // namespace kolo::engine
