// Sweep cases. Each case fills inputs from values.h, runs one collective, and checks the output
// element by element; a case passes only if it passes on every rank (allreduced verdict).
#include "tests/common/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>

#include "comm/base/algorithm.h"
#include "comm/base/reduce_op.h"
#include "tests/common/values.h"

namespace kolo::testing {
namespace {

struct Case {
  Communicator& comm;
  DType dtype;
  ReduceOp op;
  size_t count;
  std::string name;
  std::string error;  // first mismatch on this rank
  uint64_t hash = 0;  // of this rank's output
  bool same_everywhere = false;

  void expect(size_t i, double got, double want, double tol = 0.0) {
    if (!error.empty()) return;
    bool ok = std::fabs(got - want) <= tol || (std::isnan(got) && std::isnan(want));
    if (ok) return;
    std::ostringstream out;
    out << name << " on rank " << comm.rank() << ": element " << i << " is " << got << ", expected "
        << want;
    if (tol > 0) out << " (tolerance " << tol << ")";
    error = out.str();
  }
  void finish(const std::vector<char>& out, size_t elements) {
    hash = fnv1a(out.data(), elements * dtype_size(dtype));
  }
};

// Checks `count` elements of `out` against the tiled `pattern`; memcmp runs first, and only a
// difference is examined element by element (with the tolerance of `op`).
void check(Case& c, const void* out, size_t count, const std::vector<char>& pattern, size_t phase,
           ReduceOp op) {
  for (size_t i = first_mismatch(c.dtype, out, count, pattern, phase); i < count; ++i) {
    double want = load(c.dtype, pattern.data(), (phase + i) % kValuePeriod);
    if (op == ReduceOp::kAverage)
      want = expected_value(c.dtype, op, c.comm.size(), (phase + i) % kValuePeriod);
    c.expect(i, load(c.dtype, out, i), want, tolerance(c.dtype, op, want));
    if (!c.error.empty()) return;
  }
}

std::vector<char> filled(DType dtype, ReduceOp op, int rank, size_t count, size_t phase = 0) {
  auto buf = make_buffer(dtype, count);
  tile(dtype, buf.data(), count, input_pattern(dtype, op, rank), phase);
  return buf;
}

size_t phase_of(size_t index) {
  return index % kValuePeriod;
}

// Odd counts run from alloc_shared copies of their buffers: over shared memory peers then read
// them (and the allreduce writes them) directly instead of through the staging slots.
using SharedBuffer = std::unique_ptr<char, void (*)(void*)>;
SharedBuffer shared_copy(const std::vector<char>& bytes) {
  SharedBuffer shared(nullptr, free_shared);
  if (bytes.empty()) return shared;
  shared.reset(static_cast<char*>(alloc_shared(bytes.size())));
  std::memcpy(shared.get(), bytes.data(), bytes.size());
  return shared;
}

void run_allreduce(Case& c, bool in_place, Algorithm algorithm) {
  auto send = filled(c.dtype, c.op, c.comm.rank(), c.count);
  auto recv = make_buffer(c.dtype, c.count);
  char* in = send.data();
  char* out = in_place ? send.data() : recv.data();
  SharedBuffer shared_in(nullptr, free_shared), shared_out(nullptr, free_shared);
  if (c.count % 2 == 1) {
    shared_in = shared_copy(send);
    shared_out = in_place ? SharedBuffer(nullptr, free_shared) : shared_copy(recv);
    in = shared_in.get();
    out = in_place ? in : shared_out.get();
  }
  c.comm.allreduce(in, out, c.count, c.dtype, c.op, CollectiveOptions{algorithm});
  check(c, out, c.count, expected_pattern(c.dtype, c.op, c.comm.size()), 0, c.op);
  c.same_everywhere = true;
  c.hash = fnv1a(out, c.count * dtype_size(c.dtype));
}

// In place: the output is this rank's block of the input (as ZeRO-1's gradient buffer).
void run_reduce_scatter(Case& c, bool in_place) {
  const int n = c.comm.size(), r = c.comm.rank();
  auto send = filled(c.dtype, c.op, r, c.count * static_cast<size_t>(n));
  auto recv = make_buffer(c.dtype, c.count);
  char* out =
      in_place ? send.data() + static_cast<size_t>(r) * c.count * dtype_size(c.dtype) : recv.data();
  c.comm.reduce_scatter(send.data(), out, c.count, c.dtype, c.op);
  check(c, out, c.count, expected_pattern(c.dtype, c.op, n),
        phase_of(static_cast<size_t>(r) * c.count), c.op);
  c.hash = fnv1a(out, c.count * dtype_size(c.dtype));
}

// allgatherv: rank p contributes count + 3p elements (the first dimension differs by rank). In
// place (allgather only): the input is this rank's block of the output.
void run_allgather(Case& c, bool variable, bool in_place = false) {
  const int n = c.comm.size(), r = c.comm.rank();
  std::vector<size_t> counts;
  for (int p = 0; p < n; ++p)
    counts.push_back(c.count + (variable ? 3 * static_cast<size_t>(p) : 0));
  size_t total = 0;
  for (size_t k : counts) total += k;
  auto send = filled(c.dtype, ReduceOp::kSum, r, counts[static_cast<size_t>(r)]);
  auto recv = make_buffer(c.dtype, total);
  if (variable)
    c.comm.allgatherv(send.data(), counts[static_cast<size_t>(r)], recv.data(), counts, c.dtype);
  else if (in_place) {
    char* mine = recv.data() + static_cast<size_t>(r) * c.count * dtype_size(c.dtype);
    std::memcpy(mine, send.data(), c.count * dtype_size(c.dtype));
    c.comm.allgather(mine, recv.data(), c.count, c.dtype);
  } else
    c.comm.allgather(send.data(), recv.data(), c.count, c.dtype);
  size_t at = 0;
  for (int p = 0; p < n; ++p) {
    check(c, recv.data() + at * dtype_size(c.dtype), counts[static_cast<size_t>(p)],
          input_pattern(c.dtype, ReduceOp::kSum, p), 0, ReduceOp::kSum);
    at += counts[static_cast<size_t>(p)];
  }
  c.same_everywhere = true;
  c.finish(recv, total);
}

void run_broadcast(Case& c) {
  const int n = c.comm.size(), r = c.comm.rank();
  const int root = static_cast<int>(c.count % static_cast<size_t>(n));
  auto data =
      r == root ? filled(c.dtype, ReduceOp::kSum, root, c.count) : make_buffer(c.dtype, c.count);
  c.comm.broadcast(data.data(), c.count, c.dtype, root);
  check(c, data.data(), c.count, input_pattern(c.dtype, ReduceOp::kSum, root), 0, ReduceOp::kSum);
  c.same_everywhere = true;
  c.finish(data, c.count);
}

// alltoallv: rank r sends (block + r + 2p) % (block + 3) elements to rank p.
size_t v_count(size_t block, int from, int to) {
  return (block + static_cast<size_t>(from) + 2 * static_cast<size_t>(to)) % (block + 3);
}

// Element j of the block from rank `from` to rank `to` is input_value(from, to * kStride + j).
constexpr size_t kStride = 1000003;

void run_alltoall(Case& c, bool variable) {
  const int n = c.comm.size(), r = c.comm.rank();
  const size_t esize = dtype_size(c.dtype);
  const size_t block = (c.count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  std::vector<size_t> sends, recvs;
  for (int p = 0; p < n; ++p) {
    sends.push_back(variable ? v_count(block, r, p) : block);
    recvs.push_back(variable ? v_count(block, p, r) : block);
  }
  size_t send_total = 0, recv_total = 0;
  for (auto k : sends) send_total += k;
  for (auto k : recvs) recv_total += k;
  auto send = make_buffer(c.dtype, send_total);
  auto mine = input_pattern(c.dtype, ReduceOp::kSum, r);
  size_t at = 0;
  for (int p = 0; p < n; ++p) {
    size_t k = sends[static_cast<size_t>(p)];
    tile(c.dtype, send.data() + at * esize, k, mine, phase_of(static_cast<size_t>(p) * kStride));
    at += k;
  }
  auto recv = make_buffer(c.dtype, recv_total);
  // Odd counts send from an alloc_shared copy (the peers copy their blocks straight out of it).
  const SharedBuffer shared =
      c.count % 2 == 1 ? shared_copy(send) : SharedBuffer(nullptr, free_shared);
  const void* source = shared ? shared.get() : send.data();
  if (variable)
    c.comm.alltoallv(source, sends, recv.data(), recvs, c.dtype);
  else
    c.comm.alltoall(source, recv.data(), block, c.dtype);
  at = 0;
  for (int p = 0; p < n; ++p) {
    size_t k = recvs[static_cast<size_t>(p)];
    check(c, recv.data() + at * esize, k, input_pattern(c.dtype, ReduceOp::kSum, p),
          phase_of(static_cast<size_t>(r) * kStride), ReduceOp::kSum);
    at += k;
  }
  c.finish(recv, recv_total);
}

// Random fp inputs: every algorithm rounds after each of its n-1 additions, so the error is bounded
// by (n-1) * u * sum|x| (u = unit roundoff) plus the final rounding u * |sum|.
void run_random_sum(Case& c, Algorithm algorithm) {
  const int n = c.comm.size(), r = c.comm.rank();
  auto data = make_buffer(c.dtype, c.count);
  for (size_t i = 0; i < c.count; ++i)
    store(c.dtype, data.data(), i, random_value(c.dtype, 7, r, i));
  c.comm.allreduce(data.data(), data.data(), c.count, c.dtype, ReduceOp::kSum,
                   CollectiveOptions{algorithm});
  const double u = unit_roundoff(c.dtype);
  for (size_t i = 0; i < c.count; ++i) {
    double sum = 0, abs_sum = 0;
    for (int p = 0; p < n; ++p) {
      double v = random_value(c.dtype, 7, p, i);
      sum += v;
      abs_sum += std::fabs(v);
    }
    c.expect(i, load(c.dtype, data.data(), i), sum, (n - 1) * u * abs_sum + u * std::fabs(sum));
  }
  c.same_everywhere = true;
  c.finish(data, c.count);
}

constexpr size_t kRandomSumMaxCount = 1 << 16;

// Agrees across ranks on the verdict and, for replicated outputs, on the bits.
bool conclude(Case& c, SweepResult& result) {
  const int n = c.comm.size();
  int64_t mine[2] = {c.error.empty() ? 0 : 1, static_cast<int64_t>(c.hash)};
  std::vector<int64_t> all(2 * static_cast<size_t>(n));
  c.comm.allgather(mine, all.data(), 2, DType::kInt64);
  bool ok = true;
  for (int p = 0; p < n; ++p) {
    ok = ok && all[2 * static_cast<size_t>(p)] == 0;
    if (c.same_everywhere && all[2 * static_cast<size_t>(p) + 1] != all[1]) {
      ok = false;
      if (c.error.empty())
        c.error = c.name + ": rank " + std::to_string(p) + "'s result differs from rank 0's";
    }
    result.digest = fnv1a(&all[2 * static_cast<size_t>(p) + 1], 8,
                          result.digest ? result.digest : 1469598103934665603ull);
  }
  if (ok)
    ++result.passed;
  else
    ++result.failed;
  if (!c.error.empty() && result.failures.size() < 20) result.failures.push_back(c.error);
  if (!ok && c.error.empty() && result.failures.size() < 20)
    result.failures.push_back(c.name + ": failed on another rank");
  return ok;
}

}  // namespace

SweepResult run_sweep(Communicator& comm, const SweepConfig& config) {
  SweepResult result;
  bool stopped = false;
  auto run = [&](const char* collective, DType dtype, ReduceOp op, size_t count,
                 const std::function<void(Case&)>& body) {
    if (stopped || std::find(config.collectives.begin(), config.collectives.end(), collective) ==
                       config.collectives.end())
      return;
    std::ostringstream name;
    name << collective << " " << dtype_name(dtype) << " " << op_name(op) << " count=" << count
         << " np=" << comm.size();
    Case c{comm, dtype, op, count, name.str(), "", 0, false};
    try {
      body(c);
      conclude(c, result);
    } catch (const std::exception& e) {
      // A failed collective leaves the communicator failed: record it and stop the sweep.
      ++result.failed;
      result.failures.push_back(c.name + " threw: " + e.what());
      stopped = true;
    }
  };
  const ReduceOp sum = ReduceOp::kSum;
  for (size_t count : config.sizes) {
    for (DType dtype : config.dtypes) {
      for (ReduceOp op : config.ops) {
        // The bitwise ops combine bytes alike whatever the integer dtype (the kernels' tests
        // check each): here int32 at every size, uint8 up to 1000 elements.
        const bool bitwise_case =
            dtype == DType::kInt32 || (dtype == DType::kUInt8 && count <= 1000);
        if (is_bitwise(op) && !bitwise_case) continue;
        // Alternate in place and out of place so both are covered for every size.
        bool in_place = (count + static_cast<size_t>(op)) % 2 == 0;
        run("allreduce", dtype, op, count,
            [&](Case& c) { run_allreduce(c, in_place, config.algorithm); });
        run("reduce_scatter", dtype, op, count, [&](Case& c) { run_reduce_scatter(c, !in_place); });
      }
      const bool in_place = count % 2 == 1;
      run("allgather", dtype, sum, count, [&](Case& c) { run_allgather(c, false, in_place); });
      run("allgatherv", dtype, sum, count, [](Case& c) { run_allgather(c, true); });
      run("broadcast", dtype, sum, count, run_broadcast);
      run("alltoall", dtype, sum, count, [](Case& c) { run_alltoall(c, false); });
      run("alltoallv", dtype, sum, count, [](Case& c) { run_alltoall(c, true); });
      // Random values are checked element by element: kept to the smaller sizes.
      if (is_floating(dtype) && count <= kRandomSumMaxCount)
        run("random_sum", dtype, sum, count, [&](Case& c) { run_random_sum(c, config.algorithm); });
    }
    run("barrier", DType::kUInt8, sum, count, [](Case& c) { c.comm.barrier(); });
  }
  return result;
}

}  // namespace kolo::testing
