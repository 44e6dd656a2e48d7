// Work and WorkQueue: completion of a queued collective, for torch's waits and futures.
#include "bindings/python/c10d/work.h"

#include <ATen/core/jit_type.h>
#include <Python.h>
#include <c10/core/GradMode.h>
#include <cxxabi.h>

#include "comm/base/error.h"

namespace kolo::c10d_backend {

Work::Work(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void Work::complete(std::exception_ptr error) {
  // The future first: DDP's reducer waits on it, Python's Work.wait on finish().
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

c10::intrusive_ptr<c10::ivalue::Future> Work::getFuture() {
  WorkQueue::run_on_worker_until(*this);
  return future_;
}

bool Work::wait(std::chrono::milliseconds timeout) {
  WorkQueue::run_on_worker_until(*this);
  return ::c10d::Work::wait(timeout);
}

int Work::sourceRank() const {
  return source_rank_ >= 0 ? source_rank_ : ::c10d::Work::sourceRank();
}

thread_local WorkQueue::State* WorkQueue::worker_of_ = nullptr;

WorkQueue::WorkQueue() : thread_([state = state_] { loop(state); }) {}

WorkQueue::~WorkQueue() {
  const bool on_worker = std::this_thread::get_id() == thread_.get_id();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    state_->abandoned = on_worker;
  }
  state_->wake.notify_one();
  if (on_worker) {
    // A future's callback, run by the worker, held the last reference to the process group:
    // the worker cannot join itself. It fails what is left (the Communicator goes with the
    // group) and ends once the callback returns.
    thread_.detach();
    return;
  }
  // The worker may need the GIL: it can drop the last reference to a tensor that Python let go
  // of (torch then frees the tensor's Python object under the GIL), and a future's Python
  // callbacks run on it. A process group released from Python holds the GIL here.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  thread_.join();
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

void WorkQueue::submit(c10::intrusive_ptr<Work> work, std::function<void()> run) {
  work->queue_ = state_.get();
  if (worker_of_ == state_.get()) {  // a future's callback on the worker: run it now
    Item item{std::move(work), std::move(run)};
    execute(*state_, item);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queue.push_back({std::move(work), std::move(run)});
  }
  state_->wake.notify_one();
}

void WorkQueue::run_on_worker_until(const Work& work) {
  State* state = worker_of_;
  if (state == nullptr || work.queue_ != state) return;
  // The worker only pops and runs; while it is here nobody else takes items from the queue.
  for (;;) {
    // The future completes first (its callbacks run before the Work finishes), so a callback
    // asking for the future of the op it belongs to returns at once.
    if (work.future_->completed()) return;
    Item item;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (state->queue.empty()) return;  // nothing left to run (not expected: `work` is queued)
      item = std::move(state->queue.front());
      state->queue.pop_front();
    }
    execute(*state, item);
    release(item);
  }
}

void WorkQueue::execute(State& state, Item& item) {
  bool abandoned;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    abandoned = state.abandoned;
  }
  std::exception_ptr error;
  try {
    if (abandoned)
      KOLO_THROW(ErrorCode::kInvalidArgument,
                 "the process group was destroyed before this "
                 "collective ran");
    item.run();
  } catch (abi::__forced_unwind&) {
    // The thread is being ended (Python ends a thread that takes the GIL while the interpreter
    // shuts down): swallowing that unwind would terminate the process.
    throw;
  } catch (...) {
    error = std::current_exception();
  }
  item.work->complete(error);
}

// Once Python is shutting down, the worker must not take the GIL: Python would end the thread
// from inside a destructor (noexcept), which terminates the process. Dropping the last
// reference to a tensor Python let go of takes it, so a finished item is then left alive: the
// process is exiting anyway.
void WorkQueue::release(Item& item) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing) new Item(std::move(item));  // NOLINT: deliberately never freed
  item = {};
}

void WorkQueue::loop(const std::shared_ptr<State>& state) {
  // Results are written in place, also into tensors that require grad (a broadcast parameter):
  // autograd has no part in a collective, as in torch's own backends.
  c10::AutoGradMode no_grad(false);
  worker_of_ = state.get();
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->wake.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) return;  // stopping, and nothing left to run
      item = std::move(state->queue.front());
      state->queue.pop_front();
    }
    execute(*state, item);
    release(item);
  }
}

}  // namespace kolo::c10d_backend
