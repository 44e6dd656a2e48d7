// kolo::Communicator: synchronous collectives that every member calls in the same order, like
// an NCCL communicator or a Gloo context. Counts are in elements; buffers are host memory.
// Out of place unless the send and receive buffers alias as documented per call (in place).
// One thread at a time per Communicator; use split() or several communicators for concurrency.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/base/dtype.h"

namespace kolo {

namespace bootstrap {
class Store;
}
namespace transport {
class Context;
}

struct CommunicatorOptions {
  // kAuto: KOLO_TRANSPORT if set, else shm on one host, mpi under mpirun, tcp otherwise.
  TransportKind transport = TransportKind::kAuto;
  // How long a wait may go without progress; default KOLO_TIMEOUT_SECONDS (300 s).
  std::optional<std::chrono::milliseconds> timeout;
};

struct CollectiveOptions {
  // kAuto: KOLO_ALGORITHM if set, else kolo's choice. This build implements ring (and the
  // chain / pairwise / dissemination schedules the other collectives use).
  Algorithm algorithm = Algorithm::kAuto;
};

inline constexpr int kUndefinedColor = -1;  // split(): this rank joins no new communicator

class Communicator {
 public:
  // Every process of the job calls init(): rank and size come from the launcher (kolorun,
  // mpirun, torchrun, Slurm, KOLO_RANK/KOLO_SIZE); rank 0 hosts the rendezvous store.
  static std::shared_ptr<Communicator> init(const CommunicatorOptions& options = {});
  // Explicit rendezvous: `size` ranks (threads or processes) sharing `store`.
  static std::shared_ptr<Communicator> create(std::shared_ptr<bootstrap::Store> store, int rank,
                                              int size, const CommunicatorOptions& options = {});
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int cross_rank() const { return cross_rank_; }
  int cross_size() const { return cross_size_; }
  TransportKind transport() const { return transport_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // recv = op over ranks of send. In place when send == recv.
  void allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                 const CollectiveOptions& options = {});
  // send holds size() * recv_count elements; rank r receives the reduction of block r.
  // In place when recv == send + rank * recv_count elements.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                      const CollectiveOptions& options = {});
  // recv holds size() * count elements, rank r's block at r * count.
  // In place when send == recv + rank * count elements.
  void allgather(const void* send, void* recv, size_t count, DType dtype,
                 const CollectiveOptions& options = {});
  // recv_counts[r] elements from rank r, packed in rank order; send_count == recv_counts[rank].
  void allgatherv(const void* send, size_t send_count, void* recv,
                  const std::vector<size_t>& recv_counts, DType dtype,
                  const CollectiveOptions& options = {});
  void broadcast(void* data, size_t count, DType dtype, int root,
                 const CollectiveOptions& options = {});
  // send and recv hold size() * count elements; block p of send goes to rank p.
  void alltoall(const void* send, void* recv, size_t count, DType dtype,
                const CollectiveOptions& options = {});
  // send_counts[p] elements go to rank p, recv_counts[p] come from it; blocks packed in rank
  // order. Every rank's send_counts[p] must equal rank p's recv_counts[rank].
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType dtype,
                 const CollectiveOptions& options = {});
  void barrier(const CollectiveOptions& options = {});

  // Collective over this communicator: ranks with the same color form a new communicator,
  // ordered by (key, rank). kUndefinedColor gives nullptr.
  std::shared_ptr<Communicator> split(int color, int key);
  // The ranks of this host / the ranks with this local rank on every host. Collective the
  // first time every rank calls it; cached afterwards.
  std::shared_ptr<Communicator> local();
  std::shared_ptr<Communicator> cross();

 private:
  Communicator() = default;
  static std::shared_ptr<Communicator> build(std::shared_ptr<bootstrap::Store> base,
                                             std::string tag, int rank, int size,
                                             std::vector<int> world_ranks,
                                             const CommunicatorOptions& options);
  Algorithm resolve_algorithm(const CollectiveOptions& options, const char* collective) const;
  void begin(const char* collective, size_t bytes, const CollectiveOptions& options);

  std::shared_ptr<bootstrap::Store> base_store_;
  std::string tag_;
  int rank_ = 0, size_ = 1;
  int local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1;
  std::vector<int> world_ranks_;
  std::vector<int> host_of_rank_;
  TransportKind transport_ = TransportKind::kAuto;
  CommunicatorOptions options_;
  std::unique_ptr<transport::Context> context_;  // null when size() == 1
  int splits_ = 0;
  std::shared_ptr<Communicator> local_, cross_;
};

}  // namespace kolo
