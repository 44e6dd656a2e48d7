// The MPI baseline (MPI_Allreduce and friends on MPI_COMM_WORLD) and the --compare dispatch.
// Collectives that only move data (allgather, broadcast, alltoall) go as MPI_BYTE, so every
// dtype runs; reductions need an MPI type and op (no fp16/bf16, no avg): those rows say n/a.
#include "benchmarks/baselines.h"

#include "benchmarks/bench_options.h"
#include "comm/communicator.h"

#if KOLO_HAVE_MPI
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <optional>

#include "comm/base/error.h"
#include "comm/bootstrap/launch_env.h"
#include "comm/bootstrap/mpi_world.h"
#endif

namespace kolo::bench {

#if KOLO_HAVE_MPI
namespace {

std::optional<MPI_Datatype> mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kInt16: return MPI_INT16_T;
    case DType::kFloat16:
    case DType::kBFloat16: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<MPI_Op> mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kBand: return MPI_BAND;
    case ReduceOp::kBor: return MPI_BOR;
    case ReduceOp::kBxor: return MPI_BXOR;
    case ReduceOp::kAverage: return std::nullopt;
  }
  return std::nullopt;
}

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS)
    KOLO_THROW(ErrorCode::kIo, call, " failed: ", bootstrap::mpi_world::error_string(rc));
}

class MpiBaseline : public Runner {
 public:
  const char* name() const override { return "mpi"; }

  std::string unsupported(const BenchCase& c) const override {
    if (reduces(c.coll)) {
      if (!mpi_type(c.dtype)) return std::string("MPI has no ") + dtype_name(c.dtype) + " type";
      if (!mpi_op(c.op)) return std::string("MPI has no ") + op_name(c.op) + " op";
      if (c.count > INT_MAX) return "count exceeds MPI's int";
    } else if (c.bytes > INT_MAX) {
      return "byte count exceeds MPI's int";
    }
    return "";
  }

  void run(const BenchCase& c, Buffers& b) override {
    auto lock = bootstrap::mpi_world::call_lock();
    if (reduces(c.coll)) {
      MPI_Datatype type = *mpi_type(c.dtype);
      MPI_Op op = *mpi_op(c.op);
      if (c.coll == Collective::kAllreduce)
        return check_mpi(MPI_Allreduce(c.in_place ? MPI_IN_PLACE : b.send(), b.recv(),
                                       static_cast<int>(c.count), type, op, MPI_COMM_WORLD),
                         "MPI_Allreduce");
      return check_mpi(MPI_Reduce_scatter_block(b.send(), b.recv(), static_cast<int>(c.block), type,
                                                op, MPI_COMM_WORLD),
                       "MPI_Reduce_scatter_block");
    }
    const int block = static_cast<int>(c.block * dtype_size(c.dtype));
    switch (c.coll) {
      case Collective::kAllgather:
        return check_mpi(MPI_Allgather(c.in_place ? MPI_IN_PLACE : b.send(), block, MPI_BYTE,
                                       b.recv(), block, MPI_BYTE, MPI_COMM_WORLD),
                         "MPI_Allgather");
      case Collective::kBroadcast:
        return check_mpi(
            MPI_Bcast(b.recv(), static_cast<int>(c.bytes), MPI_BYTE, 0, MPI_COMM_WORLD),
            "MPI_Bcast");
      default:
        return check_mpi(
            MPI_Alltoall(b.send(), block, MPI_BYTE, b.recv(), block, MPI_BYTE, MPI_COMM_WORLD),
            "MPI_Alltoall");
    }
  }

  void barrier() override {
    auto lock = bootstrap::mpi_world::call_lock();
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  }
};

bool started_by_mpirun(const bootstrap::LaunchInfo& launch) {
  return launch.launcher == "mpi" || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

}  // namespace

std::unique_ptr<Runner> make_mpi_baseline(Communicator& comm) {
  const bootstrap::LaunchInfo launch = bootstrap::detect_launch();
  if (!started_by_mpirun(launch))
    throw UsageError(
        2, "--compare mpi needs mpirun (this job was started by '" + launch.launcher + "')");
  bootstrap::mpi_world::ensure_initialized();
  const int world_size = bootstrap::mpi_world::world_size();
  // Agreed over kolo so that every rank fails alike when only some ranks are numbered apart.
  int32_t mismatch = world_size != comm.size() || bootstrap::mpi_world::world_rank() != comm.rank();
  comm.allreduce(&mismatch, &mismatch, 1, DType::kInt32, ReduceOp::kMax);
  if (mismatch)
    throw UsageError(2,
                     "--compare mpi needs mpirun with one MPI process per kolo rank: MPI "
                     "has " +
                         std::to_string(world_size) + " processes, kolo " +
                         std::to_string(comm.size()) + " ranks, numbered alike");
  return std::make_unique<MpiBaseline>();
}
#endif  // KOLO_HAVE_MPI

std::unique_ptr<Runner> make_baseline(const std::string& name, Communicator& comm) {
#if KOLO_HAVE_MPI
  if (name == "mpi") return make_mpi_baseline(comm);
#endif
#if KOLO_HAVE_GLOO
  if (name == "gloo") return make_gloo_baseline(comm);
#endif
  (void)comm;
  throw UsageError(2,
                   "--compare " + name + ": this allreduce_bw was built without " +
                       (name == "mpi" ? "MPI (KOLO_HAVE_MPI off)" : "Gloo (KOLO_HAVE_GLOO off)"));
}

}  // namespace kolo::bench
