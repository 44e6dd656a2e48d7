// Learning rank and size from whatever launched this process. Precedence, first match wins:
//   1. KOLO_RANK / KOLO_SIZE (kolorun or explicit), with KOLO_ADDR / KOLO_PORT for the store;
//   2. torchrun: RANK / WORLD_SIZE / LOCAL_RANK, MASTER_ADDR / MASTER_PORT;
//   3. Slurm: SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID;
//   4. Open MPI's mpirun: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK; PMI_RANK / PMI_SIZE;
//   5. none: a single process (rank 0 of 1).
// When the launcher gives no store address (mpirun, srun), rank 0's is shared over MPI. A store
// address without a port uses kDefaultStorePort. KOLO_SIZE or WORLD_SIZE above 1 without its
// rank variable is refused (each process would otherwise run alone).
#pragma once

#include <string>

namespace kolo::bootstrap {

struct LaunchInfo {
  std::string launcher;  // "kolo", "torchrun", "slurm", "mpi", "single"
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // as the launcher says; -1 when it does not
  std::string addr;     // the rendezvous store; empty when unknown
  int port = 0;         // 0 when unknown
};

LaunchInfo detect_launch();

inline constexpr int kDefaultStorePort = 29500;

}  // namespace kolo::bootstrap
