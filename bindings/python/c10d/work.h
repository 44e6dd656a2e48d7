// What a kolo process group's collectives return to torch, and the thread that runs them.
// A collective is checked on the caller's thread, queued, and run by the group's one worker
// thread in the order of submission; its Work (wait, isCompleted, exception, and the future that
// DDP's reducer waits on) completes when the worker is done with it.
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
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called once, by the worker: completes the Work and its future, failed when `error` is set.
  void complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
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

  // Queues `run`; its return or exception completes `work`.
  void submit(c10::intrusive_ptr<Work> work, std::function<void()> run);

 private:
  struct Item {
    c10::intrusive_ptr<Work> work;
    std::function<void()> run;
  };
  // Shared with the thread, which outlives the queue when the queue is destroyed on it.
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Item> queue;
    bool stopping = false;
    bool abandoned = false;  // destroyed by the worker itself: fail what is left, run nothing
  };
  static void loop(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::thread thread_;  // last: starts once the state exists
};

}  // namespace kolo::c10d_backend
