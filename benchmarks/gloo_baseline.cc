// The Gloo baseline: a gloo::rendezvous::Context over Gloo's tcp transport, rendezvoused through
// kolo's own store, running gloo::allreduce (ring), ReduceScatterHalvingDoubling, allgather,
// broadcast and alltoall. Built only when KOLO_HAVE_GLOO; used by allreduce_bw --compare gloo.
#include "benchmarks/baselines.h"

#if KOLO_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>

#include "comm/base/env.h"
#include "comm/bootstrap/store.h"
#include "comm/communicator.h"

namespace kolo::bench {
namespace {

// Gloo's rendezvous and collectives wait as long as kolo's do (KOLO_TIMEOUT_SECONDS): a rank
// that skipped the baseline left the others in Gloo's connect for 5 minutes.
std::chrono::milliseconds gloo_timeout() {
  static const std::chrono::milliseconds timeout = env::timeout();
  return timeout;
}

// Gloo's rendezvous store interface over kolo's store, under the prefix "gloo_baseline/".
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<bootstrap::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefixed(key), std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_->get(prefixed(key), gloo_timeout());
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, gloo_timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const std::string& key : keys) full.push_back(prefixed(key));
    store_->wait(full, timeout);
  }

 private:
  static std::string prefixed(const std::string& key) { return "gloo_baseline/" + key; }
  std::shared_ptr<bootstrap::Store> store_;
};

std::shared_ptr<gloo::Context> connect_gloo(Communicator& comm) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  if (comm.local_size() != comm.size()) {  // several hosts: listen where the others can reach
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    attr.hostname = host;
  }
  std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(comm.rank(), comm.size());
  context->setTimeout(gloo_timeout());
  GlooStore store(comm.store());
  context->connectFullMesh(store, device);
  return context;
}

// Calls f(T{}) with Gloo's type for `dtype`; bfloat16 is screened out by unsupported().
template <typename F>
void visit_gloo_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kFloat16: return f(gloo::float16{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kInt8: return f(int8_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kUInt8:
    case DType::kBFloat16: return f(uint8_t{});
  }
}

template <typename T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::kProduct: return static_cast<Fn>(&gloo::product<T>);
    case ReduceOp::kMin: return static_cast<Fn>(&gloo::min<T>);
    case ReduceOp::kMax: return static_cast<Fn>(&gloo::max<T>);
    default: return static_cast<Fn>(&gloo::sum<T>);
  }
}

template <typename T>
const gloo::ReductionFunction<T>* reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct: return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin: return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax: return gloo::ReductionFunction<T>::max;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

class GlooBaseline : public Runner {
 public:
  explicit GlooBaseline(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}
  const char* name() const override { return "gloo"; }

  std::string unsupported(const BenchCase& c) const override {
    if (c.in_place) return "not measured in place";
    if (!reduces(c.coll)) return "";
    if (c.dtype == DType::kBFloat16) return "Gloo has no bfloat16 type";
    if (c.op == ReduceOp::kAverage || is_bitwise(c.op))
      return std::string("Gloo has no ") + op_name(c.op) + " op";
    if (c.coll == Collective::kReduceScatter && c.count > INT_MAX) return "count exceeds int";
    return "";
  }

  // Gloo's reduce_scatter is an algorithm object bound to its buffer: built once per size.
  void prepare(const BenchCase& c, Buffers& b) override {
    reduce_scatter_.reset();
    if (c.coll != Collective::kReduceScatter) return;
    visit_gloo_type(c.dtype, [&](auto tag) {
      using T = decltype(tag);
      reduce_scatter_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
          context_, std::vector<T*>{static_cast<T*>(b.send())}, static_cast<int>(c.count),
          std::vector<int>(static_cast<size_t>(c.nranks), static_cast<int>(c.block)),
          reduction<T>(c.op));
    });
  }

  void run(const BenchCase& c, Buffers& b) override {
    auto* send = static_cast<uint8_t*>(b.send());
    auto* recv = static_cast<uint8_t*>(b.recv());
    const size_t block = c.block * dtype_size(c.dtype);
    switch (c.coll) {
      case Collective::kAllreduce: return allreduce(c, b);
      case Collective::kReduceScatter: return reduce_scatter_->run();
      case Collective::kAllgather: {
        gloo::AllgatherOptions opts(context_);
        opts.setInput(send, block);
        opts.setOutput(recv, c.bytes);
        return gloo::allgather(opts);
      }
      case Collective::kBroadcast: {
        gloo::BroadcastOptions opts(context_);
        opts.setOutput(recv, c.bytes);
        opts.setRoot(0);
        return gloo::broadcast(opts);
      }
      case Collective::kAlltoall: {
        gloo::AlltoallOptions opts(context_);
        opts.setInput(send, c.bytes);
        opts.setOutput(recv, c.bytes);
        return gloo::alltoall(opts);
      }
      case Collective::kBarrier: {
        gloo::BarrierOptions opts(context_);
        return gloo::barrier(opts);
      }
    }
  }

  void barrier() override {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  }

  // ReduceScatterHalvingDoubling reduces in place and leaves this rank's block at the front.
  void finish_for_check(const BenchCase& c, Buffers& b) override {
    if (c.coll == Collective::kReduceScatter)
      std::memcpy(b.recv(), b.send(), c.block * dtype_size(c.dtype));
  }

 private:
  void allreduce(const BenchCase& c, Buffers& b) {
    visit_gloo_type(c.dtype, [&](auto tag) {
      using T = decltype(tag);
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setInput(static_cast<T*>(b.send()), c.count);
      opts.setOutput(static_cast<T*>(b.recv()), c.count);
      opts.setReduceFunction(reduce_function<T>(c.op));
      gloo::allreduce(opts);
    });
  }

  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::Algorithm> reduce_scatter_;
};

}  // namespace

std::unique_ptr<Runner> make_gloo_baseline(Communicator& comm) {
  return std::make_unique<GlooBaseline>(connect_gloo(comm));
}

}  // namespace kolo::bench
#endif  // KOLO_HAVE_GLOO
