// Learning rank and size from whatever launched this process. Precedence, first match wins:
//   1. KOLO_RANK / KOLO_SIZE (kolorun or explicit);
//   2. torchrun: RANK / WORLD_SIZE / LOCAL_RANK;
//   3. Slurm: SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID;
//   4. Open MPI's mpirun: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK; PMI_RANK / PMI_SIZE;
//   5. none: a single process (rank 0 of 1).
// The rendezvous store is at KOLO_ADDR / KOLO_PORT, else (1-3 only) MASTER_ADDR / MASTER_PORT;
// a store address without a port uses kDefaultStorePort. When there is none (mpirun, srun),
// rank 0's is shared over MPI. KOLO_SIZE or WORLD_SIZE above 1 without its rank variable is
// refused (each process would otherwise run alone), and so is a job of one (1-3) among the
// several processes of an MPI launch (variables left from another launcher).
#pragma once

#include <string>

namespace kolo::bootstrap {

struct LaunchInfo {
  std::string launcher;  // "kolo", "torchrun", "slurm", "mpi", "single"
  int rank = 0;
  int size = 1;
  int local_rank = -1;   // as the launcher says; -1 when it does not
  std::string addr;      // the rendezvous store; empty when unknown
  std::string addr_var;  // the variable `addr` came from ("KOLO_ADDR", "MASTER_ADDR")
  int port = 0;          // 0 when unknown
};

LaunchInfo detect_launch();

inline constexpr int kDefaultStorePort = 29500;

}  // namespace kolo::bootstrap
