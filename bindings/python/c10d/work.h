// What a kolo process group's collectives return to torch, and the thread that runs them.
// A collective is checked on the caller's thread, queued, and run by the group's one worker
// thread in the order of submission; its Work (wait, isCompleted, exception, and the future that
// DDP's reducer waits on) completes when the worker is done with it.
//
// The worker completes a future, so it runs the future's callbacks (as torch's gloo backend
// does). A callback may start collectives of its own and wait for them (DDP's PowerSGD hook
// does: the callback of one allreduce runs the next and waits on its future), which the worker
// could never run while it is inside that callback. So a collective submitted from a callback
// on the worker runs there and then, before the worker goes on with its queue: on every rank in
// the same place (right after the op whose callback started it), whenever other threads queue
// their ops. A callback that waits for a Work queued earlier, or asks for its future, runs the
// queue up to that Work.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kolo::c10d_backend {

class Work : public ::c10d::Work {
 public:
  // `outputs`: the tensors the collective writes, kept alive until it is done and handed to
  // result() and to the future's value.
  Work(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs);

  std::vector<at::Tensor> result() override { return outputs_; }
  // Both as ::c10d::Work has them, but on a group's worker thread (in a future's callback) they
  // first run that group's queue until this Work is done.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool wait(std::chrono::milliseconds timeout) override;
  // A recv's sender (torch's irecv work.source_rank()); other ops throw as ::c10d::Work does.
  int sourceRank() const override;
  void set_source_rank(int rank) { source_rank_ = rank; }

  // Called once, by the worker: completes the Work and its future, failed when `error` is set.
  void complete(std::exception_ptr error);

 private:
  friend class WorkQueue;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const void* queue_ = nullptr;  // the WorkQueue state it was submitted to
  int source_rank_ = -1;         // set for a recv
};

// One thread running queued collectives in submission order. Every rank submits the same
// sequence (c10d's contract), and a kolo Communicator serves one thread at a time, so one
// thread per process group keeps both. Destruction runs what is queued, then joins.
class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `run`; its return or exception completes `work`. Called on the worker itself (from
  // a future's callback), runs it at once instead.
  void submit(c10::intrusive_ptr<Work> work, std::function<void()> run);

  // On the worker thread of the queue `work` went to: runs that queue, in order, until `work`'s
  // future is complete. Elsewhere (another thread, another group's worker): nothing.
  static void run_on_worker_until(const Work& work);

 private:
  struct Item {
    c10::intrusive_ptr<Work> work;
    std::function<void()> run;
  };
  // Destroys a finished item's references, or leaves them alive once Python shuts down.
  static void release(Item& item);
  // Shared with the thread, which outlives the queue when the queue is destroyed on it.
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Item> queue;
    bool stopping = false;
    bool abandoned = false;  // destroyed by the worker itself: fail what is left, run nothing
  };
  static void loop(const std::shared_ptr<State>& state);
  // Runs `item` and completes its Work (the future's callbacks run here).
  static void execute(State& state, Item& item);
  // The queue whose worker this thread is (null on other threads).
  static thread_local State* worker_of_;

  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::thread thread_;  // last: starts once the state exists
};

}  // namespace kolo::c10d_backend
