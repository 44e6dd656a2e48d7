// ProcessGroupKolo: torch.distributed's "kolo" backend, a c10d::ProcessGroup whose collectives
// run on a kolo Communicator (docs/python.md). torch 1.13 calls the methods below for
// dist.all_reduce & co. and DistributedDataParallel (whose reducer waits on Work's future).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bindings/python/c10d/p2p.h"
#include "bindings/python/c10d/work.h"
#include "comm/communicator.h"

namespace kolo::c10d_backend {

class ProcessGroupKolo : public ::c10d::ProcessGroup {
 public:
  // Collective over the `size` ranks sharing `store` (torch's, prefixed per group): builds the
  // group's Communicator on it. `timeout` is the Communicator's: a wait that long without
  // progress fails its collective (kolo's TimeoutError).
  ProcessGroupKolo(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupKolo() override;

  const std::string getBackendName() const override { return "kolo"; }
  const Communicator& communicator() const { return *comm_; }

  // Every collective checks its arguments here (kInvalidArgument, nothing queued), queues the
  // call for the worker and returns its Work. Results are written in place into the outputs.
  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  // Several tensors of one dtype, reduced as one concatenated buffer.
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  // outputs[0] holds one tensor per rank; their sizes may differ (allgatherv).
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  // inputs[0] holds one tensor per rank, each the size of outputs[0].
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  // Splits count rows of dimension 0; empty splits mean equal parts.
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  // One tensor per rank each way; sizes may differ per pair.
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;
  // Rooted collectives (process_group_rooted.cc). reduce leaves non-root tensors unchanged.
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  // Point to point (p2p.h): each (sender, receiver, tag) has a channel of its own; a recv
  // needs its source (recvAnysource is refused).
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;

 private:
  // Queues `run` on the worker; the Work returned completes when it has run.
  c10::intrusive_ptr<::c10d::Work> enqueue(::c10d::OpType type, std::vector<at::Tensor> outputs,
                                           std::function<void(Communicator&)> run);
  // A per-call timeout other than the group's is refused: kolo has one per communicator.
  void check_timeout(std::chrono::milliseconds timeout, const char* op) const;

  std::shared_ptr<Communicator> comm_;  // used by the worker thread only, after construction
  std::chrono::milliseconds timeout_;
  std::unique_ptr<P2p> p2p_;  // send and recv: channels with communicators of their own
  WorkQueue queue_;           // last: its thread stops before the communicator goes
};

}  // namespace kolo::c10d_backend
