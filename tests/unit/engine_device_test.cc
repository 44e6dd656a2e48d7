// The engine's device path (fusion/device.h) driven by a host stand-in for the device: the same
// negotiation, fusion and error handling that kolo_engine_cuda gets, checked against closed-form
// results and against the order of the calls the engine makes (producers waited for before
// packing, one synchronize before completion). The refusals of device tensors the engine
// cannot run.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/common/host_device.h"
#include "tests/unit/engine_testing.h"
#include "tests/unit/expect_error.h"

namespace kolo::testing {
namespace {

EngineOptions device_options(std::shared_ptr<Calls> calls) {
  EngineOptions o = quick_options(2);
  o.device = std::make_shared<HostDevice>(std::move(calls));
  return o;
}

TensorView on_device(std::vector<float>& v, int device = 0, void* stream = nullptr) {
  return {v.data(), DType::kFloat32, {int64_t(v.size())}, device, stream};
}

// Three members of a group, averaged with a prescale, fp16 on the wire: one pack of three
// spans after every producer was waited for, one fp16 allreduce, one unpack, one synchronize.
TEST(EngineDevice, FusedAllreduceWaitsForProducersAndSynchronizesOnce) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    Engine eng(borrowed(comm), device_options(calls));
    const float r = float(comm.rank());
    std::vector<std::vector<float>> data{
        std::vector<float>(7, r + 1), std::vector<float>(300, 2 * r), std::vector<float>(1, 0.25f)};
    void* stream = reinterpret_cast<void*>(uintptr_t{42});
    std::vector<TensorView> views;
    for (auto& d : data) views.push_back(on_device(d, 0, stream));
    OpOptions o;
    o.op = ReduceOp::kAverage;
    o.prescale = 2.0;
    o.compression = engine::Compression::kFp16;
    auto handles = eng.grouped_allreduce({"d.a", "d.b", "d.c"}, views, o);
    handles[0].check();
    EXPECT_FLOAT_EQ(data[0][6], 3.0f);    // 2 * (1 + 2) / 2
    EXPECT_FLOAT_EQ(data[1][299], 2.0f);  // 2 * (0 + 2) / 2
    EXPECT_FLOAT_EQ(data[2][0], 0.5f);
    EXPECT_EQ(calls->count("wait device 0 stream 42"), 3u);
    EXPECT_LT(calls->first("wait"), calls->first("convert 3"));
    EXPECT_EQ(calls->count("convert 3"), 2u);  // pack and unpack, each one batch
    EXPECT_EQ(calls->count("allreduce float16"), 1u);
    EXPECT_EQ(calls->count("synchronize"), 1u);
    EXPECT_EQ(calls->opened, std::vector<int>{0});
    EXPECT_EQ(eng.stats().fused_tensors, 3u);
    return 0;
  });
}

// A large tensor with nothing to scale is reduced from input to output directly; a second op
// reuses the set's context.
TEST(EngineDevice, LargeAllreduceGoesStraightToTheCollective) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    Engine eng(borrowed(comm), device_options(calls));
    std::vector<float> in(64 * 1024, float(comm.rank() + 1)), out(in.size(), 0.0f);
    eng.allreduce("big", on_device(in), on_device(out)).check();
    EXPECT_FLOAT_EQ(out[12345], 6.0f);
    EXPECT_FLOAT_EQ(in[12345], float(comm.rank() + 1));
    EXPECT_EQ(calls->count("convert"), 0u);
    EXPECT_EQ(calls->count("allreduce float32"), 1u);
    std::vector<float> small(3, 1.0f);
    eng.allreduce("small", on_device(small), on_device(small)).check();
    EXPECT_FLOAT_EQ(small[2], 3.0f);
    EXPECT_EQ(calls->count("synchronize"), 2u);
    EXPECT_EQ(calls->opened.size(), 1u);
    return 0;
  });
}

TEST(EngineDevice, BroadcastFromARoot) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    Engine eng(borrowed(comm), device_options(calls));
    std::vector<float> in(5, float(comm.rank() * 10));
    auto h = eng.broadcast("b", on_device(in), 1);
    h.check();
    EXPECT_FLOAT_EQ(in[4], 10.0f);
    EXPECT_EQ(calls->count("broadcast"), 1u);
    EXPECT_EQ(calls->count("synchronize"), 1u);
    return 0;
  });
}

// The ops whose results the engine sizes: in device memory the handle holds, output() empty.
// Rank p holds p + 1 rows of 2 for the allgather, sends p + q + 1 rows to rank q in the
// alltoall, and reduce-scatters 7 rows (3, 2, 2 over three ranks) with scale factors.
TEST(EngineDevice, AllgatherAlltoallAndReduceScatterLeaveResultsOnTheDevice) {
  run_thread_ranks(3, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    Engine eng(borrowed(comm), device_options(calls));
    const int r = comm.rank(), n = comm.size();
    std::vector<float> rows(size_t(2 * (r + 1)), float(r));
    auto g = eng.allgather("g", {rows.data(), DType::kFloat32, {r + 1, 2}, 0});
    g.check();
    EXPECT_TRUE(g.output().empty());
    EXPECT_EQ(g.output_shape(), (std::vector<int64_t>{6, 2}));
    const float* got = static_cast<const float*>(g.device_output());
    const float want_g[] = {0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2};
    for (int i = 0; i < 12; ++i) EXPECT_EQ(got[i], want_g[i]) << "allgather " << i;

    OpOptions splits;
    int64_t sent = 0;
    for (int q = 0; q < n; ++q) splits.splits.push_back(r + q + 1), sent += r + q + 1;
    std::vector<int32_t> out(static_cast<size_t>(sent));
    for (size_t i = 0; i < out.size(); ++i) out[i] = 100 * r + int32_t(i);
    auto a = eng.alltoall("a", {out.data(), DType::kInt32, {sent}, 0}, splits);
    a.check();
    int64_t received = 0;
    for (int q = 0; q < n; ++q) received += q + r + 1;
    EXPECT_EQ(a.output_shape(), (std::vector<int64_t>{received}));
    const int32_t* in = static_cast<const int32_t*>(a.device_output());
    int64_t at = 0;
    for (int q = 0; q < n; ++q) {  // q's block for r starts after its blocks for ranks < r
      int64_t offset = 0;
      for (int before = 0; before < r; ++before) offset += q + before + 1;
      for (int64_t k = 0; k < q + r + 1; ++k, ++at)
        EXPECT_EQ(in[at], 100 * q + offset + k) << "alltoall from " << q;
    }

    std::vector<float> rs(14);  // float: the device kernels scale the float types only
    for (size_t i = 0; i < rs.size(); ++i) rs[i] = float(r + 1) * float(i / 2 + 1);
    OpOptions scaled;
    scaled.prescale = 2.0;
    scaled.postscale = 0.25;
    auto s = eng.reduce_scatter("rs", {rs.data(), DType::kFloat32, {7, 2}, 0}, scaled);
    s.check();
    const int mine = r == 0 ? 3 : 2, first = r == 0 ? 0 : 3 + 2 * (r - 1);
    EXPECT_EQ(s.output_shape(), (std::vector<int64_t>{mine, 2}));
    const float* red = static_cast<const float*>(s.device_output());
    for (int row = 0; row < mine; ++row)
      EXPECT_EQ(red[2 * row + 1], 3.0f * float(first + row + 1)) << "reduce_scatter " << row;
    EXPECT_EQ(calls->count("allgatherv"), 1u);
    EXPECT_EQ(calls->count("alltoallv"), 1u);
    EXPECT_EQ(calls->count("reduce_scatter"), 1u);
    return 0;
  });
}

// A rank that joined holds no tensor: it opens the set's context on the current device and
// contributes zeros written by the device.
TEST(EngineDevice, JoinedRankContributesDeviceZeros) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    Engine eng(borrowed(comm), device_options(calls));
    if (comm.rank() == 0) {
      eng.join().check();
      EXPECT_EQ(calls->opened, std::vector<int>{-1});
      EXPECT_EQ(calls->count("zero"), 1u);
    } else {
      std::this_thread::sleep_for(50ms);
      std::vector<float> v(4, 3.0f);
      OpOptions scaled;
      scaled.postscale = 0.5;  // takes the fused path
      eng.allreduce("after_join", on_device(v), on_device(v), scaled).check();
      EXPECT_FLOAT_EQ(v[3], 1.5f);  // rank 0 contributed zeros
      eng.join().check();
    }
    return 0;
  });
}

TEST(EngineDevice, RanksThatDisagreeOnMemoryGetAMismatch) {
  auto messages = run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    Engine eng(borrowed(comm), device_options(std::make_shared<Calls>()));
    std::vector<float> v(4, 1.0f);
    TensorView view = comm.rank() == 0 ? on_device(v) : TensorView{v.data(), DType::kFloat32, {4}};
    auto h = eng.allreduce("where", view, view);
    h.wait(30s);
    EXPECT_EQ(h.status().code, ErrorCode::kMismatch);
    return h.status().message;
  });
  for (const auto& m : messages) {
    EXPECT_NE(m.find("'where'"), std::string::npos) << m;
    EXPECT_NE(m.find("memory"), std::string::npos) << m;
  }
}

// A device error (a lost peer) fails every pending handle with its message and stops the
// engine: later ops fail at once instead of hanging.
TEST(EngineDevice, DeviceErrorFailsTheHandlesWithItsMessage) {
  run_thread_ranks(2, TransportKind::kShm, [](Communicator& comm) {
    auto calls = std::make_shared<Calls>();
    calls->fail_synchronize = true;
    Engine eng(borrowed(comm), device_options(calls));
    std::vector<float> v(4, 1.0f);
    auto h = eng.allreduce("doomed", on_device(v), on_device(v));
    EXPECT_TRUE(h.wait(30s));
    EXPECT_EQ(h.status().code, ErrorCode::kPeerLost);
    EXPECT_NE(h.status().message.find("lost its peer"), std::string::npos) << h.status().message;
    auto later = eng.allreduce("later", on_device(v), on_device(v));
    EXPECT_TRUE(later.wait(5s));
    EXPECT_FALSE(later.status().ok);
    return 0;
  });
}

TEST(EngineDevice, TensorsTheDevicePathCannotRunAreRefusedNamingThem) {
  run_thread_ranks(1, TransportKind::kShm, [](Communicator& comm) {
    EngineOptions plain;
    Engine host_only(borrowed(comm), plain);
    std::vector<float> v(4, 1.0f);
    std::string m = error_of([&] { host_only.allreduce("on_gpu", on_device(v), on_device(v)); },
                             ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("'on_gpu'"), std::string::npos) << m;
    EXPECT_NE(m.find("no device backend"), std::string::npos) << m;

    Engine eng(borrowed(comm), device_options(std::make_shared<Calls>()));
    m = error_of([&] { eng.allreduce("split", on_device(v, 0), on_device(v, 1)); },
                 ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("input on device 0, output on device 1"), std::string::npos) << m;
    std::vector<double> d(4, 1.0);
    TensorView f64{d.data(), DType::kFloat64, {4}, 0};
    OpOptions avg;
    avg.op = ReduceOp::kAverage;
    m = error_of([&] { eng.allreduce("mean64", f64, f64, avg); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("'mean64' (device)"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
    // One device per process set on a rank.
    eng.allreduce("first", on_device(v, 0), on_device(v, 0)).check();
    m = error_of([&] { eng.allreduce("elsewhere", on_device(v, 1), on_device(v, 1)); },
                 ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("'elsewhere' is on device 1 but process set 0 runs on device 0"),
              std::string::npos)
        << m;
    return 0;
  });
}

}  // namespace
}  // namespace kolo::testing
