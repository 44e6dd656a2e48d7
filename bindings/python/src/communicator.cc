// kolo.Communicator: the synchronous collectives over Python buffers (numpy arrays, bytearray,
// memoryview; C-contiguous). Sizes are checked here, since the C++ calls trust their counts.
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "bindings/python/src/core.h"
#include "comm/base/env.h"
#include "comm/base/interrupt.h"
#include "comm/base/transport_kind.h"

namespace kolo::python {
namespace {

// `info` is the buffer's export (Py_buffer): while it lives, Python refuses to resize or free
// the memory (a bytearray's extend() raises BufferError), so a Buffer must outlive the
// collective that uses its memory. It is released with the GIL held, when the call returns.
struct Buffer {
  py::buffer_info info;
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

// Arguments are py::object, not py::buffer, so that None or a list gets a TypeError naming the
// argument instead of pybind11's list of signatures.
Buffer buffer_of(py::handle object, bool writable, const char* op, const char* what) {
  if (!PyObject_CheckBuffer(object.ptr()))
    throw py::type_error(std::string(op) + ": " + what +
                         " must support the buffer protocol (a numpy array, bytearray, "
                         "memoryview, ...), got " +
                         py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>());
  Buffer b;
  try {
    b.info = py::reinterpret_borrow<py::buffer>(object).request(writable);
  } catch (const py::error_already_set& e) {  // e.g. a read-only array as recv
    invalid(std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    invalid(std::string(what) + ": " + e.what());
  }
  const py::buffer_info& info = b.info;
  b.data = info.ptr;
  b.count = static_cast<size_t>(info.size);
  b.dtype = dtype_of_format(info.format, static_cast<size_t>(info.itemsize));
  // C-contiguous: each stride is the product of the later dimensions.
  py::ssize_t expected = info.itemsize;
  for (size_t i = info.ndim; i-- > 0;) {
    if (info.shape[i] != 1 && info.strides[i] != expected)
      invalid(std::string(what) + " is not C-contiguous");
    expected *= info.shape[i];
  }
  return b;
}

ReduceOp op_of(py::handle op, const char* collective) {
  if (!py::isinstance<ReduceOp>(op))
    throw py::type_error(std::string(collective) + ": op must be a kolo.ReduceOp, got " +
                         py::str(py::type::handle_of(op).attr("__name__")).cast<std::string>() +
                         " " + py::repr(op).cast<std::string>());
  return op.cast<ReduceOp>();
}

void require(bool cond, const std::string& message) {
  if (!cond) invalid(message);
}

void same_dtype(const Buffer& a, const Buffer& b, const char* op) {
  require(a.dtype == b.dtype, std::string(op) + ": send is " + dtype_name(a.dtype) +
                                  " but recv is " + dtype_name(b.dtype));
}

// Python runs signal handlers on its main thread only; set when the module is bound.
unsigned long g_main_thread = 0;

// The interrupt hook of a collective called from Python's main thread: runs the signal handlers
// that are due. One that raised (SIGINT's KeyboardInterrupt) leaves its exception set, and the
// transport's wait gives up; locked() raises that exception once the GIL is back.
bool python_signal_raised() {
  PyGILState_STATE state = PyGILState_Ensure();
  const bool raised = PyErr_CheckSignals() != 0;
  PyGILState_Release(state);
  return raised;
}

// Runs `fn` on the communicator with the GIL dropped, one Python thread at a time. Ctrl-C ends
// the wait within ~0.1 s (kInterruptCheckInterval) instead of at the timeout; the communicator
// is failed then, as after any error, and its peers get PeerLostError naming this rank.
// A signal handler that the hook runs may call kolo again, while this thread waits inside a
// collective (holding its communicator's lock: a second collective on it deadlocked): refused.
thread_local bool t_in_collective = false;

template <typename Fn>
auto locked(PyCommunicator& c, Fn fn) {
  const bool main_thread = PyThread_get_thread_ident() == g_main_thread;
  if (t_in_collective)
    invalid(
        "a Communicator call from a signal handler that ran while this thread waited in "
        "another kolo collective: call it after that one returns");
  try {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(*c.mutex);
    t_in_collective = true;
    struct Leave {
      ~Leave() { t_in_collective = false; }
    } leave;
    ScopedInterruptHook hook(main_thread ? &python_signal_raised : nullptr);
    return fn(*c.comm);
  } catch (const Error&) {
    if (PyErr_Occurred()) throw py::error_already_set();  // the handler's, not the wait's
    throw;
  }
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

void allreduce(PyCommunicator& c, const py::object& send, const py::object& recv,
               const py::object& op_object) {
  const ReduceOp op = op_of(op_object, "allreduce");
  Buffer s = buffer_of(send, false, "allreduce", "send"),
         r = buffer_of(recv, true, "allreduce", "recv");
  same_dtype(s, r, "allreduce");
  require(s.count == r.count, "allreduce: send has " + std::to_string(s.count) +
                                  " elements, recv " + std::to_string(r.count));
  locked(c, [&](Communicator& comm) { comm.allreduce(s.data, r.data, s.count, s.dtype, op); });
}

void reduce_scatter(PyCommunicator& c, const py::object& send, const py::object& recv,
                    const py::object& op_object) {
  const ReduceOp op = op_of(op_object, "reduce_scatter");
  Buffer s = buffer_of(send, false, "reduce_scatter", "send"),
         r = buffer_of(recv, true, "reduce_scatter", "recv");
  same_dtype(s, r, "reduce_scatter");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(s.count == r.count * n,
          "reduce_scatter: send must hold size() * len(recv) = " + std::to_string(r.count * n) +
              " elements, not " + std::to_string(s.count));
  locked(c, [&](Communicator& comm) { comm.reduce_scatter(s.data, r.data, r.count, s.dtype, op); });
}

void allgather(PyCommunicator& c, const py::object& send, const py::object& recv) {
  Buffer s = buffer_of(send, false, "allgather", "send"),
         r = buffer_of(recv, true, "allgather", "recv");
  same_dtype(s, r, "allgather");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(r.count == s.count * n,
          "allgather: recv must hold size() * len(send) = " + std::to_string(s.count * n) +
              " elements, not " + std::to_string(r.count));
  locked(c, [&](Communicator& comm) { comm.allgather(s.data, r.data, s.count, s.dtype); });
}

void alltoall(PyCommunicator& c, const py::object& send, const py::object& recv) {
  Buffer s = buffer_of(send, false, "alltoall", "send"),
         r = buffer_of(recv, true, "alltoall", "recv");
  same_dtype(s, r, "alltoall");
  const size_t n = static_cast<size_t>(c.comm->size());
  require(s.count == r.count && s.count % n == 0,
          "alltoall: send and recv must hold the same multiple of size() elements (" +
              std::to_string(s.count) + " and " + std::to_string(r.count) + ")");
  locked(c, [&](Communicator& comm) { comm.alltoall(s.data, r.data, s.count / n, s.dtype); });
}

// Python ints arrive as objects so that any value, 2**63 too, gets a message naming it
// (int_arg), not pybind11's list of signatures.
void broadcast(PyCommunicator& c, const py::object& data, const py::object& root_object) {
  Buffer b = buffer_of(data, true, "broadcast", "data");
  const int64_t root = int_arg(root_object, 0, c.comm->size() - 1, "broadcast: root",
                               "is not in [0, " + std::to_string(c.comm->size()) + ")");
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
  g_main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  py::class_<PyCommunicator> cls(
      m, "Communicator", "Synchronous collectives that every member calls in the same order.");
  refuse_new(cls, "use kolo.Communicator.init(), or split(), local() or cross() of one");
  cls.def_static("init", &init, py::arg("transport") = py::none(),
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
          [](PyCommunicator& c, const py::object& color_object, const py::object& key_object) {
            constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
            const int64_t color =
                int_arg(color_object, -1, kMax, "split: color", "is not -1 or in [0, 2^31)");
            const int64_t key =
                int_arg(key_object, -kMax - 1, kMax, "split: key", "does not fit a 32-bit int");
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
