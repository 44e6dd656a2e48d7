// kolo.Communicator: the synchronous collectives over Python buffers (numpy arrays, bytearray,
// memoryview; C-contiguous). Sizes are checked here, since the C++ calls trust their counts.
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "bindings/python/src/core.h"
#include "comm/base/env.h"
#include "comm/base/transport_kind.h"

namespace kolo::python {
namespace {

struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
};

// The DType of a buffer-protocol format ("f", "d", "e", "i", "l", "q", "B", "b", "h", with an
// optional byte-order prefix) and item size.
DType dtype_of_format(std::string format, size_t itemsize) {
  if (!format.empty() && std::string("@=<").find(format[0]) != std::string::npos)
    format.erase(0, 1);
  if (format == "f" && itemsize == 4) return DType::kFloat32;
  if (format == "d" && itemsize == 8) return DType::kFloat64;
  if (format == "e" && itemsize == 2) return DType::kFloat16;
  if ((format == "i" || format == "l" || format == "q") && itemsize == 4) return DType::kInt32;
  if ((format == "i" || format == "l" || format == "q") && itemsize == 8) return DType::kInt64;
  if (format == "B" && itemsize == 1) return DType::kUInt8;
  if (format == "b" && itemsize == 1) return DType::kInt8;
  if (format == "h" && itemsize == 2) return DType::kInt16;
  invalid("buffer format '" + format + "' (" + std::to_string(itemsize) +
          " bytes per item) is not a kolo dtype: float32, float64, float16, int32, int64, uint8, "
          "int8, int16");
}

Buffer buffer_of(const py::buffer& object, bool writable, const char* what) {
  py::buffer_info info;
  try {
    info = object.request(writable);
  } catch (const py::error_already_set& e) {  // e.g. a read-only array as recv
    invalid(std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    invalid(std::string(what) + ": " + e.what());
  }
  Buffer b{info.ptr, static_cast<size_t>(info.size),
           dtype_of_format(info.format, static_cast<size_t>(info.itemsize))};
  // C-contiguous: each stride is the product of the later dimensions.
  py::ssize_t expected = info.itemsize;
  for (size_t i = info.ndim; i-- > 0;) {
    if (info.shape[i] != 1 && info.strides[i] != expected)
      invalid(std::string(what) + " is not C-contiguous");
    expected *= info.shape[i];
  }
  return b;
}

void require(bool cond, const std::string& message) {
  if (!cond) invalid(message);
}

void same_dtype(const Buffer& a, const Buffer& b, const char* op) {
  require(a.dtype == b.dtype, std::string(op) + ": send is " + dtype_name(a.dtype) +
                                  " but recv is " + dtype_name(b.dtype));
}

// Runs `fn` on the communicator with the GIL dropped, one Python thread at a time.
template <typename Fn>
auto locked(PyCommunicator& c, Fn fn) {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(*c.mutex);
  return fn(*c.comm);
}

PyCommunicator init(std::optional<std::string> transport, std::optional<double> timeout_seconds) {
  CommunicatorOptions options;
  if (transport) options.transport = parse_transport(*transport, "transport");
  if (timeout_seconds) {
    // Checked here, before the conversion (10^10 s overflowed it): named as Python passed it.
    require(
        *timeout_seconds >= env::kMinTimeoutSeconds && *timeout_seconds <= env::kMaxTimeoutSeconds,
        detail::concat("timeout_seconds=", *timeout_seconds, " is outside [",
                       env::kMinTimeoutSeconds, ", ", env::kMaxTimeoutSeconds,
                       "] (the range of KOLO_TIMEOUT_SECONDS)"));
    options.timeout = std::chrono::milliseconds(std::llround(*timeout_seconds * 1000));
  }
  py::gil_scoped_release release;
  return PyCommunicator{Communicator::init(options)};
}

void allreduce(PyCommunicator& c, const py::buffer& send, const py::buffer& recv, ReduceOp op) {
  Buffer s = buffer_of(send, false, "send"), r = buffer_of(recv, true, "recv");
  same_dtype(s, r, "allreduce");
  require(s.count == r.count, "allreduce: send has " + std::to_string(s.count) +
                                  " elements, recv " + std::to_string(r.count));
  locked(c, [&](Communicator& comm) { comm.allreduce(s.data, r.data, s.count, s.dtype, op); });
}

void reduce_scatter(PyCommunicator& c, const py::buffer& send, const py::buffer& recv,
                    ReduceOp op) {
  Buffer s = buffer_of(send, false, "send"), r = buffer_of(recv, true, "recv");
  same_dtype(s, r, "reduce_scatter");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(s.count == r.count * n,
          "reduce_scatter: send must hold size() * len(recv) = " + std::to_string(r.count * n) +
              " elements, not " + std::to_string(s.count));
  locked(c, [&](Communicator& comm) { comm.reduce_scatter(s.data, r.data, r.count, s.dtype, op); });
}

void allgather(PyCommunicator& c, const py::buffer& send, const py::buffer& recv) {
  Buffer s = buffer_of(send, false, "send"), r = buffer_of(recv, true, "recv");
  same_dtype(s, r, "allgather");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(r.count == s.count * n,
          "allgather: recv must hold size() * len(send) = " + std::to_string(s.count * n) +
              " elements, not " + std::to_string(r.count));
  locked(c, [&](Communicator& comm) { comm.allgather(s.data, r.data, s.count, s.dtype); });
}

void alltoall(PyCommunicator& c, const py::buffer& send, const py::buffer& recv) {
  Buffer s = buffer_of(send, false, "send"), r = buffer_of(recv, true, "recv");
  same_dtype(s, r, "alltoall");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(s.count == r.count && s.count % n == 0,
          "alltoall: send and recv must hold the same multiple of size() elements (" +
              std::to_string(s.count) + " and " + std::to_string(r.count) + ")");
  locked(c, [&](Communicator& comm) { comm.alltoall(s.data, r.data, s.count / n, s.dtype); });
}

// Python ints arrive as int64 so that any value gets a message naming it, not pybind11's
// list of signatures.
void broadcast(PyCommunicator& c, const py::buffer& data, int64_t root) {
  Buffer b = buffer_of(data, true, "data");
  require(root >= 0 && root < c.comm->size(), "broadcast: root " + std::to_string(root) +
                                                  " is not in [0, " +
                                                  std::to_string(c.comm->size()) + ")");
  locked(c, [&](Communicator& comm) {
    comm.broadcast(b.data, b.count, b.dtype, static_cast<int>(root));
  });
}

std::optional<PyCommunicator> wrap(std::shared_ptr<Communicator> comm) {
  if (!comm) return std::nullopt;
  return PyCommunicator{std::move(comm)};
}

}  // namespace

void bind_communicator(py::module_& m) {
  py::class_<PyCommunicator>(m, "Communicator",
                             "Synchronous collectives that every member calls in the same order.")
      .def_static("init", &init, py::arg("transport") = py::none(),
                  py::arg("timeout_seconds") = py::none(),
                  "Joins the job started by kolorun, mpirun, torchrun or Slurm (collective).")
      .def_property_readonly("rank", [](const PyCommunicator& c) { return c.comm->rank(); })
      .def_property_readonly("size", [](const PyCommunicator& c) { return c.comm->size(); })
      .def_property_readonly("local_rank",
                             [](const PyCommunicator& c) { return c.comm->local_rank(); })
      .def_property_readonly("local_size",
                             [](const PyCommunicator& c) { return c.comm->local_size(); })
      .def_property_readonly("cross_rank",
                             [](const PyCommunicator& c) { return c.comm->cross_rank(); })
      .def_property_readonly("cross_size",
                             [](const PyCommunicator& c) { return c.comm->cross_size(); })
      .def_property_readonly(
          "transport",
          [](const PyCommunicator& c) { return std::string(transport_name(c.comm->transport())); })
      .def_property_readonly("world_ranks",
                             [](const PyCommunicator& c) { return c.comm->world_ranks(); })
      .def("allreduce", &allreduce, py::arg("send"), py::arg("recv"),
           py::arg("op") = ReduceOp::kSum, "recv = op over ranks of send (in place if the same).")
      .def("reduce_scatter", &reduce_scatter, py::arg("send"), py::arg("recv"),
           py::arg("op") = ReduceOp::kSum, "Rank r receives the reduction of block r of send.")
      .def("allgather", &allgather, py::arg("send"), py::arg("recv"),
           "recv holds size() blocks, rank r's at r * len(send).")
      .def("alltoall", &alltoall, py::arg("send"), py::arg("recv"),
           "Block p of send goes to rank p; block p of recv comes from it.")
      .def("broadcast", &broadcast, py::arg("data"), py::arg("root") = 0)
      .def("barrier",
           [](PyCommunicator& c) { locked(c, [](Communicator& comm) { comm.barrier(); }); })
      .def(
          "split",
          [](PyCommunicator& c, int64_t color, int64_t key) {
            constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
            require(color >= -1 && color <= kMax,
                    "split: color " + std::to_string(color) + " is not -1 or in [0, 2^31)");
            require(key >= -kMax - 1 && key <= kMax,
                    "split: key " + std::to_string(key) + " does not fit a 32-bit int");
            return wrap(locked(c, [&](Communicator& comm) {
              return comm.split(static_cast<int>(color), static_cast<int>(key));
            }));
          },
          py::arg("color"), py::arg("key"),
          "Collective: ranks with the same color form a new communicator; color -1 gives None.")
      .def("local",
           [](PyCommunicator& c) {
             return wrap(locked(c, [](Communicator& comm) { return comm.local(); }));
           })
      .def("cross", [](PyCommunicator& c) {
        return wrap(locked(c, [](Communicator& comm) { return comm.cross(); }));
      });
}

}  // namespace kolo::python
