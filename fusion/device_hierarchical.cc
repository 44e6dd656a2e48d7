// HierarchicalDeviceSet (device_hierarchical.h).
#include "fusion/device_hierarchical.h"

#include <vector>

#include "comm/communicator.h"

namespace kolo::engine {
namespace {

class HierarchicalDeviceSet final : public DeviceSet {
 public:
  HierarchicalDeviceSet(DeviceBackend& backend, Communicator& comm, int device)
      : size_(comm.size()),
        host_comm_(comm.split(comm.cross_rank(), comm.local_rank())),
        cross_comm_(comm.split(comm.local_rank() == 0 ? 0 : kUndefinedColor, comm.cross_rank())),
        host_(backend.open(*host_comm_, device)),
        all_(backend.open(comm, host_->device())) {}

  int device() const override { return host_->device(); }
  void wait_ready(const std::shared_ptr<void>& ready) override { host_->wait_ready(ready); }
  char* reserve(size_t bytes) override { return host_->reserve(bytes); }
  void zero(void* dst, size_t bytes) override { host_->zero(dst, bytes); }
  void convert(const fusion::cuda::Span* spans, size_t n, DType from, DType to,
               double scale) override {
    host_->convert(spans, n, from, to, scale);
  }
  std::shared_ptr<void> allocate(size_t bytes) override { return host_->allocate(bytes); }
  void copy_to_host(void* host, const void* src, size_t bytes) override {
    host_->copy_to_host(host, src, bytes);
  }
  void copy_from_host(void* dst, const void* host, size_t bytes) override {
    host_->copy_from_host(dst, host, bytes);
  }
  void synchronize() override { host_->synchronize(); }

  void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    // An average is a sum at both levels, then one scale by 1 / size.
    const ReduceOp level = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
    const size_t bytes = count * dtype_size(dtype);
    host_->reduce(send, recv, count, dtype, level, 0);
    if (cross_comm_) {  // this host's first rank
      staging_.resize(bytes);
      host_->copy_to_host(staging_.data(), recv, bytes);
      cross_comm_->allreduce(staging_.data(), staging_.data(), count, dtype, level);
      host_->copy_from_host(recv, staging_.data(), bytes);
    }
    host_->broadcast(recv, count, dtype, 0);
    if (op == ReduceOp::kAverage) {
      const fusion::cuda::Span mean{recv, recv, count};
      host_->convert(&mean, 1, dtype, dtype, 1.0 / size_);
    }
  }

  void broadcast(void* data, size_t count, DType dtype, int root) override {
    on_all([&](DeviceSet& d) { d.broadcast(data, count, dtype, root); });
  }
  void allgatherv(const void* send, size_t count, void* recv, const std::vector<size_t>& counts,
                  DType dtype) override {
    on_all([&](DeviceSet& d) { d.allgatherv(send, count, recv, counts, dtype); });
  }
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType dtype) override {
    on_all([&](DeviceSet& d) { d.alltoallv(send, send_counts, recv, recv_counts, dtype); });
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override {
    on_all([&](DeviceSet& d) { d.reduce_scatter(send, recv, recv_count, dtype, op); });
  }
  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
              int root) override {
    on_all([&](DeviceSet& d) { d.reduce(send, recv, count, dtype, op, root); });
  }

 private:
  // An op of the whole set: after the host context's queued work, done before the next.
  template <typename Fn>
  void on_all(Fn fn) {
    host_->synchronize();
    fn(*all_);
    all_->synchronize();
  }

  int size_;
  std::shared_ptr<Communicator> host_comm_, cross_comm_;  // cross_comm_: host first ranks only
  std::unique_ptr<DeviceSet> host_, all_;
  std::vector<char> staging_;
};

}  // namespace

std::unique_ptr<DeviceSet> open_hierarchical(DeviceBackend& backend, Communicator& comm,
                                             int device) {
  return std::make_unique<HierarchicalDeviceSet>(backend, comm, device);
}

}  // namespace kolo::engine
