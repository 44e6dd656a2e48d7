// Launcher detection from environment variables.
#include "comm/bootstrap/launch_env.h"

#include <utility>

#include "comm/base/env.h"
#include "comm/base/error.h"

namespace kolo::bootstrap {
namespace {

constexpr int64_t kMaxRanks = 1 << 20;

// Fills rank/size/local rank from the three named variables; false when `rank_var` is unset.
bool read_triplet(LaunchInfo& info, const char* launcher, const char* rank_var,
                  const char* size_var, const char* local_var) {
  auto rank = env::get_int_opt(rank_var, 0, kMaxRanks - 1);
  if (!rank) return false;
  auto size = env::get_int_opt(size_var, 1, kMaxRanks);
  KOLO_CHECK_ARG(size.has_value(), rank_var, " is set but ", size_var,
                 " is not: both are needed to know the job size");
  KOLO_CHECK_ARG(*rank < *size, rank_var, "=", *rank, " is not below ", size_var, "=", *size);
  info.launcher = launcher;
  info.rank = static_cast<int>(*rank);
  info.size = static_cast<int>(*size);
  info.local_rank = static_cast<int>(env::get_int(local_var, -1, -1, kMaxRanks - 1));
  KOLO_CHECK_ARG(info.local_rank < info.size, local_var, "=", info.local_rank, " is not below ",
                 size_var, "=", info.size);
  return true;
}

// A job size without this process's rank would run every process as a job of one, each
// training alone and exiting 0 (a RANK=$UNSET typo). Slurm's SLURM_NTASKS is left out: a
// program started in a batch script outside srun sees it without SLURM_PROCID, alone by design.
void refuse_size_without_rank() {
  for (auto [rank_var, size_var] : {std::pair{"KOLO_RANK", "KOLO_SIZE"}, {"RANK", "WORLD_SIZE"}}) {
    auto size = env::get_int_opt(size_var, 1, kMaxRanks);
    KOLO_CHECK_ARG(!size || *size == 1, size_var, "=", size.value_or(1), " is set but ", rank_var,
                   " is not (or is empty): every process would run as a job of one. Set ", rank_var,
                   " for each process, or unset ", size_var);
  }
}

void read_address(LaunchInfo& info, const char* addr_var, const char* port_var) {
  info.addr = env::get_or(addr_var, "");
  info.addr_var = addr_var;
  info.port = static_cast<int>(env::get_int_opt(port_var, 1, 65535).value_or(0));
  if (info.port == 0 && !info.addr.empty()) info.port = kDefaultStorePort;
}

// A job of one under mpirun or srun --mpi is a leftover from another launcher (SLURM_NTASKS=1
// of a batch script that runs mpirun, a shell's RANK=0 WORLD_SIZE=1): each process would train
// alone and exit 0.
void refuse_single_in_mpi_world(const LaunchInfo& info, const char* size_var) {
  if (info.size != 1) return;
  for (const char* mpi_size_var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    auto mpi_size = env::get_int_opt(mpi_size_var, 1, kMaxRanks);
    KOLO_CHECK_ARG(
        !mpi_size || *mpi_size == 1, size_var, "=1 makes this process a job of one, but ",
        mpi_size_var, "=", mpi_size.value_or(1), " says MPI started ", mpi_size.value_or(1),
        " processes: each would run alone. Start the job with one launcher: unset "
        "the variables left from the other (",
        size_var, "'s, or ", mpi_size_var, "'s when the processes are separate jobs on purpose)");
  }
}

}  // namespace

LaunchInfo detect_launch() {
  LaunchInfo info;
  const char* size_var = nullptr;  // the launcher's job size variable; none for MPI's
  if (read_triplet(info, "kolo", "KOLO_RANK", "KOLO_SIZE", "KOLO_LOCAL_RANK"))
    size_var = "KOLO_SIZE";
  else if (read_triplet(info, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"))
    size_var = "WORLD_SIZE";
  else if (read_triplet(info, "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"))
    size_var = "SLURM_NTASKS";
  else if (!read_triplet(info, "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK") &&
           !read_triplet(info, "mpi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")) {
    refuse_size_without_rank();
    info.launcher = "single";
  }
  if (size_var != nullptr) refuse_single_in_mpi_world(info, size_var);
  // The store: KOLO_ADDR with KOLO_PORT (or the default port), else, for every launch but
  // MPI's, MASTER_ADDR with MASTER_PORT (a batch script exports them for srun too). A KOLO_PORT
  // alone sets the port: under MPI, where rank 0 shares its store's address, the one it takes.
  if (env::get("KOLO_ADDR"))
    read_address(info, "KOLO_ADDR", "KOLO_PORT");
  else if (size_var != nullptr)
    read_address(info, "MASTER_ADDR", "MASTER_PORT");
  if (auto port = env::get_int_opt("KOLO_PORT", 1, 65535)) info.port = static_cast<int>(*port);
  return info;
}

}  // namespace kolo::bootstrap
