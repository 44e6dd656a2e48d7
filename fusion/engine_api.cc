// Engine's public methods: argument checks on the caller's thread, then a Request for the loop.
#include <numeric>

#include "fusion/engine_impl.h"

namespace kolo::engine {
namespace {

// The request of an op, built in this thread's scratch request: assignments into strings and
// vectors that keep their capacity, so a submission allocates nothing for them (the engine
// copies the request into a queue slot that keeps its capacity too).
Request& make_request(const std::string& name, OpType type, const TensorView& t,
                      const OpOptions& o) {
  thread_local Request r;
  r.name = name;
  r.type = type;
  r.dtype = t.dtype;
  r.shape = t.shape;
  r.op = o.op;
  r.prescale = o.prescale;
  r.postscale = o.postscale;
  r.compression = o.compression;
  r.root = o.root;
  r.splits = o.splits;
  r.group.clear();
  r.group_size = 0;
  r.device = t.device >= 0;
  return r;
}

}  // namespace

Engine::Engine(std::shared_ptr<Communicator> comm, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(options))) {}

// In a forked child the engine's threads do not exist (joining them would wait for ever) and its
// transports and shared memory are the parent's: the child leaves them all as they are.
Engine::~Engine() {
  if (impl_ && impl_->forked()) (void)impl_.release();
}

Handle Engine::allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                         const OpOptions& options) {
  KOLO_CHECK_ARG(input.count() == output.count() && input.dtype == output.dtype, "allreduce of '",
                 name, "': output must match the input's dtype and size");
  // Any other overlap than output == input would fail in the engine's loop, stopping it.
  check_overlap(output.data, input.bytes(), input.data, input.bytes(), 0,
                ("allreduce of '" + name + "'").c_str(), "output == input");
  return impl_->submit(make_request(name, OpType::kAllreduce, input, options), Memory(input),
                       Memory(output), options.process_set);
}

std::vector<Handle> Engine::grouped_allreduce(const std::vector<std::string>& names,
                                              const std::vector<TensorView>& tensors,
                                              const OpOptions& options) {
  KOLO_CHECK_ARG(!names.empty() && names.size() == tensors.size(),
                 "grouped_allreduce needs one name per tensor (", names.size(), " names, ",
                 tensors.size(), " tensors)");
  // The group is known by its first member's name (unique while pending) and its size; the
  // coordinator releases it only when every member is ready on every rank.
  std::vector<Impl::Submission> ops;
  for (size_t i = 0; i < names.size(); ++i) {
    Request r = make_request(names[i], OpType::kAllreduce, tensors[i], options);  // a copy
    r.group = names[0];
    r.group_size = static_cast<int32_t>(names.size());
    ops.push_back({std::move(r), Memory(tensors[i]), Memory(tensors[i])});
  }
  return impl_->submit_all(std::move(ops), options.process_set, true);
}

Handle Engine::allgather(const std::string& name, const TensorView& input,
                         const OpOptions& options) {
  return impl_->submit(make_request(name, OpType::kAllgather, input, options), Memory(input), {},
                       options.process_set);
}

Handle Engine::broadcast(const std::string& name, const TensorView& tensor, int root,
                         const OpOptions& options) {
  OpOptions o = options;
  o.root = root;
  return impl_->submit(make_request(name, OpType::kBroadcast, tensor, o), Memory(tensor),
                       Memory(tensor), options.process_set);
}

Handle Engine::alltoall(const std::string& name, const TensorView& input,
                        const OpOptions& options) {
  // The splits are checked against the process set's size when the op is submitted.
  return impl_->submit(make_request(name, OpType::kAlltoall, input, options), Memory(input), {},
                       options.process_set);
}

Handle Engine::reduce_scatter(const std::string& name, const TensorView& input,
                              const OpOptions& options) {
  return impl_->submit(make_request(name, OpType::kReduceScatter, input, options), Memory(input),
                       {}, options.process_set);
}

Handle Engine::barrier(const OpOptions& options) {
  TensorView none{nullptr, DType::kUInt8, {0}, -1};
  return impl_->submit(
      make_request(impl_->next_barrier_name(options.process_set), OpType::kBarrier, none, options),
      Memory(none), Memory(none), options.process_set);
}

Handle Engine::join(const OpOptions& options) {
  TensorView none{nullptr, DType::kUInt8, {0}, -1};
  return impl_->submit(make_request("join", OpType::kJoin, none, options), Memory(none),
                       Memory(none), options.process_set);
}

int Engine::add_process_set(const std::vector<int>& ranks) {
  return impl_->add_process_set(ranks);
}

void Engine::remove_process_set(int id) {
  impl_->remove_process_set(id);
}

// Every caller (C, C++, Python) gets the per-rank path: rank r writes `path.rank<r>` or `%r`.
void Engine::start_timeline(const std::string& path) {
  impl_->check_process();
  const int rank = impl_->world().rank();
  impl_->timeline().start(timeline::timeline_path_for_rank(path, rank), rank);
}

void Engine::stop_timeline() {
  impl_->check_process();
  impl_->timeline().stop();
}

EngineStats Engine::stats() const {
  return impl_->stats();
}

Communicator& Engine::communicator() const {
  return impl_->world();
}

void Engine::check_process() const {
  impl_->check_process();
}

}  // namespace kolo::engine
