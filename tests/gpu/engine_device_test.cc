// kolo_gpu_engine_tests: the engine on device tensors through kolo_engine_cuda, on one GPU
// (world 1: NCCL does not put two ranks on one device). Inputs are written by a producer
// stream just before submission, so a result is right only if the engine waited for the
// producer's event: a fused group averaged with a prescale and fp16 on the wire, a large
// allreduce into another buffer (unfused), a broadcast, bf16 tensors, allgather, alltoall and
// reduce_scatter into device memory, and many small tensors fused into one buffer. Prints
// "kolo_gpu_engine_tests: N checks, M failed".
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "comm/base/convert.h"
#include "comm/bootstrap/store.h"
#include "comm/communicator.h"
#include "fusion/cuda_device.h"
#include "fusion/engine.h"
#include "tests/gpu/tally.h"

namespace {

using kolo::DType;
using kolo::engine::Engine;
using kolo::engine::Handle;
using kolo::engine::OpOptions;
using kolo::engine::TensorView;
using kolo::gpu_test::expect;

// A device tensor of `count` floats of `dtype`, written from host values on `producer`.
struct DeviceTensor {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  DeviceTensor(size_t n, DType d) : count(n), dtype(d) {
    cudaMalloc(&data, n * kolo::dtype_size(d));
  }
  DeviceTensor(DeviceTensor&& o) noexcept
      : data(std::exchange(o.data, nullptr)), count(o.count), dtype(o.dtype) {}
  DeviceTensor(const DeviceTensor&) = delete;
  ~DeviceTensor() { cudaFree(data); }
  void write(const std::vector<float>& values, cudaStream_t producer) {
    staged.resize(count * kolo::dtype_size(dtype));
    kolo::convert(staged.data(), dtype, values.data(), DType::kFloat32, count, 1.0);
    // A slow producer: a large memset first, so the copy lands well after submission.
    cudaMemsetAsync(data, 0, count * kolo::dtype_size(dtype), producer);
    cudaMemcpyAsync(data, staged.data(), staged.size(), cudaMemcpyHostToDevice, producer);
  }
  std::vector<float> read() const {
    std::vector<char> raw(count * kolo::dtype_size(dtype));
    cudaMemcpy(raw.data(), data, raw.size(), cudaMemcpyDeviceToHost);
    std::vector<float> out(count);
    kolo::convert(out.data(), DType::kFloat32, raw.data(), dtype, count, 1.0);
    return out;
  }
  TensorView view(cudaStream_t producer) const {
    return {data, dtype, {static_cast<int64_t>(count)}, 0, producer};
  }
  std::vector<char> staged;  // the host copy's source (pageable: staged by the call)
};

bool close_to(const std::vector<float>& got, float want, float tolerance) {
  for (float v : got)
    if (!(std::fabs(v - want) <= tolerance)) return false;
  return true;
}

void run(Engine& engine, cudaStream_t producer) {
  // A group averaged with a prescale, fp16 on the wire: world 1, so x * 2 / 1.
  {
    std::vector<DeviceTensor> group;
    group.emplace_back(1000, DType::kFloat32);
    group.emplace_back(1 << 16, DType::kFloat32);
    group.emplace_back(3, DType::kFloat32);
    std::vector<TensorView> views;
    for (size_t i = 0; i < group.size(); ++i) {
      group[i].write(std::vector<float>(group[i].count, 0.75f + float(i)), producer);
      views.push_back(group[i].view(producer));
    }
    OpOptions o;
    o.op = kolo::ReduceOp::kAverage;
    o.prescale = 2.0;
    o.compression = kolo::engine::Compression::kFp16;
    auto handles = engine.grouped_allreduce({"g.0", "g.1", "g.2"}, views, o);
    handles[0].check();
    for (size_t i = 0; i < group.size(); ++i)
      expect(close_to(group[i].read(), 2 * (0.75f + float(i)), 1e-3f),
             "fused fp16 group: member " + std::to_string(i));
  }
  // Large, unscaled, into another buffer: reduced straight from input to output.
  {
    DeviceTensor in(8 << 20, DType::kFloat32), out(8 << 20, DType::kFloat32);
    in.write(std::vector<float>(in.count, 1.5f), producer);
    engine.allreduce("big", in.view(producer), out.view(producer)).check();
    expect(close_to(out.read(), 1.5f, 0.0f), "unfused 32 MiB allreduce into another buffer");
  }
  // bf16 tensors, summed with a postscale.
  {
    DeviceTensor t(4097, DType::kBFloat16);
    t.write(std::vector<float>(t.count, 3.0f), producer);
    OpOptions o;
    o.postscale = 0.5;
    engine.allreduce("bf16", t.view(producer), t.view(producer), o).check();
    expect(close_to(t.read(), 1.5f, 0.0f), "bf16 allreduce with postscale 0.5");
  }
  // Broadcast in place.
  {
    DeviceTensor t(12345, DType::kFloat32);
    t.write(std::vector<float>(t.count, -2.0f), producer);
    engine.broadcast("bcast", t.view(producer), 0).check();
    expect(close_to(t.read(), -2.0f, 0.0f), "broadcast");
  }
  // Results the engine sizes stay on the device (world 1: allgather and alltoall copy,
  // reduce_scatter scales).
  {
    DeviceTensor t(3 * 1000, DType::kFloat32);
    t.write(std::vector<float>(t.count, 5.0f), producer);
    TensorView v = t.view(producer);
    v.shape = {3, 1000};
    auto g = engine.allgather("gather", v);
    g.check();
    std::vector<float> back(t.count);
    cudaMemcpy(back.data(), g.device_output(), back.size() * sizeof(float), cudaMemcpyDeviceToHost);
    expect(g.output().empty() && g.output_shape() == std::vector<int64_t>{3, 1000} &&
               close_to(back, 5.0f, 0.0f),
           "allgather into device memory");
    auto a = engine.alltoall("alltoall", v);
    a.check();
    cudaMemcpy(back.data(), a.device_output(), back.size() * sizeof(float), cudaMemcpyDeviceToHost);
    expect(close_to(back, 5.0f, 0.0f), "alltoall into device memory");
    OpOptions o;
    o.prescale = 2.0;
    o.postscale = 0.25;
    auto r = engine.reduce_scatter("reduce_scatter", v, o);
    r.check();
    cudaMemcpy(back.data(), r.device_output(), back.size() * sizeof(float), cudaMemcpyDeviceToHost);
    expect(close_to(back, 2.5f, 0.0f), "reduce_scatter with scale factors into device memory");
  }
  // 200 small tensors submitted at once: fused, every one right.
  {
    std::vector<DeviceTensor> many;
    for (int i = 0; i < 200; ++i) many.emplace_back(257, DType::kFloat32);
    std::vector<Handle> handles;
    for (int i = 0; i < 200; ++i) {
      many[static_cast<size_t>(i)].write(std::vector<float>(257, float(i)), producer);
      TensorView v = many[static_cast<size_t>(i)].view(producer);
      handles.push_back(engine.allreduce("small." + std::to_string(i), v, v));
    }
    bool good = true;
    for (int i = 0; i < 200; ++i) {
      handles[static_cast<size_t>(i)].check();
      good &= close_to(many[static_cast<size_t>(i)].read(), float(i), 0.0f);
    }
    expect(good, "200 small tensors");
    expect(engine.stats().fused_collectives >= 1, "small tensors were fused");
  }
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  try {
    cudaSetDevice(0);
    cudaStream_t producer = nullptr;
    cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
    auto store = std::make_shared<kolo::bootstrap::MemoryStore>();
    auto comm = kolo::Communicator::create(store, 0, 1);
    kolo::engine::EngineOptions options;
    options.device = kolo::engine::cuda_device_backend(60s);
    {
      Engine engine(comm, options);
      run(engine, producer);
      // A host tensor still goes the host way beside the device ones.
      std::vector<float> host(10, 4.0f);
      TensorView v{host.data(), DType::kFloat32, {10}};
      engine.allreduce("host", v, v).check();
      expect(host[9] == 4.0f, "host tensor beside device tensors");
    }
    cudaStreamDestroy(producer);
  } catch (const std::exception& e) {
    expect(false, std::string("engine on device tensors: ") + e.what());
  }
  return kolo::gpu_test::summary("kolo_gpu_engine_tests");
}
