// kolo::Communicator: synchronous collectives that every member calls in the same order, like
// an NCCL communicator or a Gloo context. Counts are in elements; buffers are host memory.
// Out of place unless the send and receive buffers alias as documented per call (in place);
// buffers that overlap any other way are refused (kInvalidArgument) before anything is sent.
// One thread at a time per Communicator; use split() or several communicators for concurrency.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/alloc_shared.h"  // kolo::alloc_shared / free_shared
#include "comm/base/algorithm.h"
#include "comm/base/dtype.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"

namespace kolo {

namespace bootstrap {
class Store;
}
namespace transport {
class Context;
class SharedMemory;
}  // namespace transport

struct CommunicatorOptions {
  // kAuto: KOLO_TRANSPORT if set, else shm on one host, mpi under mpirun, tcp otherwise.
  TransportKind transport = TransportKind::kAuto;
  // How long a wait may go without progress; default KOLO_TIMEOUT_SECONDS (300 s).
  std::optional<std::chrono::milliseconds> timeout;
  // Facts about the launch: init() fills them in, split() passes them on. Started by mpirun
  // (then ranks on several hosts use the mpi transport by default), and every rank reached the
  // rendezvous store over loopback (then the job is on this machine, however many hosts
  // KOLO_HOSTNAME pretends, and tcp listens on loopback too).
  bool launched_by_mpi = false;
  bool store_on_loopback = true;
};

struct CollectiveOptions {
  // kAuto: KOLO_ALGORITHM where it fits this collective, else kolo's choice (cost model).
  // allreduce: ring, tree, halving_doubling; on shm also low_latency and direct.
  // reduce_scatter, allgather, broadcast: ring (chain for broadcast); on shm also direct.
  // alltoall and barrier: ring (pairwise exchange and dissemination).
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
  // CPUs the ranks of this host may run on together (the union of their affinity masks).
  int host_cpus() const { return host_cpus_; }
  TransportKind transport() const { return transport_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // This communicator's view of the rendezvous store (keys are prefixed per communicator);
  // for baselines and tools that need their own rendezvous alongside kolo's.
  std::shared_ptr<bootstrap::Store> store() const { return store_; }

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

  // The algorithm a collective of `bytes` would use with these options (kAuto resolved), e.g.
  // choose_algorithm(Collective::kAllreduce, 8). Throws for a requested algorithm that does not
  // fit, naming the accepted ones.
  Algorithm choose_algorithm(Collective collective, size_t bytes,
                             const CollectiveOptions& options = {}) const;

  // Collective over this communicator: ranks with the same color form a new communicator,
  // ordered by (key, rank). kUndefinedColor gives nullptr.
  std::shared_ptr<Communicator> split(int color, int key);
  // The ranks of this host / the ranks with this local rank on every host. Collective the
  // first time every rank calls it; cached afterwards.
  std::shared_ptr<Communicator> local();
  std::shared_ptr<Communicator> cross();

  // Waits of this communicator busy-poll for a few microseconds before sleeping when its ranks
  // have cores to spare (the default, for the latency of small collectives). A communicator
  // driven by a background thread, such as the engine's, turns it off: the application's
  // compute threads need those cores, and a peer that is late wakes the sleeper anyway.
  void set_busy_polling(bool allowed);

 private:
  Communicator();  // with ~Communicator() where Hierarchy is complete
  std::shared_ptr<Communicator> split_with(int color, int key, const CommunicatorOptions& options);
  // Algorithm::kHierarchical (communicator_hierarchical.cc).
  struct Hierarchy;
  Hierarchy& hierarchy();  // collective the first time
  void hierarchical(const std::function<void(Hierarchy&)>& steps);
  void hierarchical_allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
  void hierarchical_allreduce_steps(Hierarchy& h, const void* send, void* recv, size_t count,
                                    DType dtype, ReduceOp op);
  // Only where every host has the same number of consecutive ranks.
  void hierarchical_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                   ReduceOp op);
  void hierarchical_allgather(const void* send, void* recv, size_t count, DType dtype);
  // alltoallv, its argument errors naming `name` (alltoall's say "alltoall").
  void alltoallv_as(const char* name, const void* send, const std::vector<size_t>& send_counts,
                    void* recv, const std::vector<size_t>& recv_counts, DType dtype,
                    const CollectiveOptions& options);

  static std::shared_ptr<Communicator> build(std::shared_ptr<bootstrap::Store> base,
                                             std::string tag, int rank, int size,
                                             std::vector<int> world_ranks,
                                             const CommunicatorOptions& options);
  // Chooses the algorithm and starts the call on the transport: `dtype`, `op` and `root` (where
  // they apply) and `bytes` (unless `sizes_agree` is false) must be the same on every rank.
  Algorithm begin(Collective collective, size_t bytes, const CollectiveOptions& options,
                  std::optional<DType> dtype = std::nullopt,
                  std::optional<ReduceOp> op = std::nullopt, int root = -1,
                  bool sizes_agree = true);
  // True for a call with no bytes to move, after meeting the other ranks in a barrier that
  // carries the call's signature: a rank passing 0 where another passes n gets kMismatch in
  // this call on both (returning at once left the other waiting out its deadline, and paired
  // the next calls wrongly).
  bool done_if_empty(size_t bytes);

  std::shared_ptr<bootstrap::Store> base_store_;
  std::shared_ptr<bootstrap::Store> store_;  // base_store_ with this communicator's prefix
  std::string tag_;
  int rank_ = 0, size_ = 1;
  int local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1, host_cpus_ = 1;
  std::vector<int> world_ranks_;
  std::vector<int> host_of_rank_;
  TransportKind transport_ = TransportKind::kAuto;
  CommunicatorOptions options_;
  std::unique_ptr<transport::Context> context_;  // null when size() == 1
  transport::SharedMemory* shared_ = nullptr;    // context_'s shared-memory capability
  Algorithm env_algorithm_ = Algorithm::kAuto;   // KOLO_ALGORITHM, read at creation
  Algorithm last_algorithm_ = Algorithm::kAuto;  // for logging changes of choice
  int splits_ = 0;
  std::shared_ptr<Communicator> local_, cross_;
  std::unique_ptr<Hierarchy> hierarchy_;  // made by the first hierarchical collective
};

// Every rank's `mine`, in rank order; the lengths may differ (two collectives: the lengths,
// then allgatherv of the bytes).
std::vector<std::string> allgather_bytes(Communicator& comm, const std::string& mine);

// Refuses (kInvalidArgument, naming `collective`) send and receive buffers that share a byte
// unless `inner` starts `offset` bytes into `outer`, the call's one in-place form (named by
// `in_place_form`). The engine checks its ops with it at submission too.
void check_overlap(const void* outer, size_t outer_bytes, const void* inner, size_t inner_bytes,
                   size_t offset, const char* collective, const char* in_place_form);

}  // namespace kolo
