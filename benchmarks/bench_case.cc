// Sizes, buffers and the check pattern of allreduce_bw. Inputs are small integers chosen so that
// every reduction is exact in every dtype; only avg (a division) and fp16/bf16 get a tolerance.
#include "benchmarks/bench_case.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

#include "comm/base/convert.h"

#include "comm/alloc_shared.h"
#include "comm/base/algorithm.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"

namespace kolo::bench {
namespace {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <typename T>
T encode(double v) {
  return static_cast<T>(v);
}
template <>
Half encode<Half>(double v) {
  return {float_to_half(static_cast<float>(v))};
}
template <>
BFloat16 encode<BFloat16>(double v) {
  return {float_to_bfloat16(static_cast<float>(v))};
}
template <typename T>
double decode(T v) {
  return static_cast<double>(v);
}
double decode(Half v) {
  return half_to_float(v.bits);
}
double decode(BFloat16 v) {
  return bfloat16_to_float(v.bits);
}

// Calls f(T{}) with the C++ type that stores `dtype`.
template <typename F>
void visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kFloat16: return f(Half{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kInt8: return f(int8_t{});
    case DType::kInt16: return f(int16_t{});
  }
}

// The pattern's values are small whole numbers: exact as int64 for the bitwise ops.
int64_t as_bits(double v) {
  return static_cast<int64_t>(v);
}

bool is_integer(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kInt64 || dtype == DType::kUInt8 ||
         dtype == DType::kInt8 || dtype == DType::kInt16;
}

// Rank r's element at global index g, in block b at offset i (the block that reduce_scatter
// and alltoall deal to rank b; allreduce and broadcast have one), is 1 + (i + r + 2b) mod m, with
// m the largest prime that keeps n * m exact in the dtype (at most 17): at one offset every rank
// holds another value (up to m ranks), and so does every block, whatever the block's size. The
// bitwise ops get bit 6 set everywhere, so that a band over many ranks is not 0 (the zeroed
// output's value). For prod, the ranks g mod n and the next one or two hold a few 2s and 3s,
// chosen by (i + b) mod K from K kinds of distinct product (K = 5 pairs at 2 ranks, 9 triples
// from 3 ranks: products 2 to 27), which tells prod from max, min and sum, and up to K blocks
// apart.
class Pattern {
 public:
  explicit Pattern(const BenchCase& c)
      : c_(c), product_(reduces(c.coll) && c.op == ReduceOp::kProduct && c.nranks > 1) {
    double exact = 1e15;
    if (c.dtype == DType::kUInt8) exact = 255;
    if (c.dtype == DType::kInt8) exact = 127;
    if (c.dtype == DType::kInt16) exact = 32767;
    if (c.dtype == DType::kFloat16) exact = 2048;
    if (c.dtype == DType::kBFloat16) exact = 256;
    if (c.dtype == DType::kFloat32) exact = 16777216;
    bitwise_ = reduces(c.coll) &&
               (c.op == ReduceOp::kBand || c.op == ReduceOp::kBor || c.op == ReduceOp::kBxor);
    if (bitwise_) exact = 63;  // values below bit 6
    const size_t most = static_cast<size_t>(std::clamp(exact / c.nranks, 1.0, 17.0));
    for (size_t p : {17, 13, 11, 7, 5, 3, 2, 1})
      if (p <= most) {
        modulus_ = p;
        break;
      }
    kinds_ = c.nranks == 2 ? 5 : 9;
    period_ = product_ ? kinds_ * static_cast<size_t>(c.nranks) : modulus_;
  }
  // Within a block the values repeat every period() elements.
  size_t period() const { return period_; }
  size_t block() const { return std::max<size_t>(c_.block, 1); }
  double value(int rank, size_t g) const {
    const size_t r = static_cast<size_t>(rank), b = g / block(), i = g % block();
    if (product_) {
      // Each kind's product differs from the others' (and, for the first five, with the third
      // value left out too).
      static constexpr int kKinds[9][3] = {{2, 1, 1}, {3, 1, 1}, {2, 2, 1}, {2, 3, 1}, {3, 3, 1},
                                           {2, 2, 2}, {2, 2, 3}, {2, 3, 3}, {3, 3, 3}};
      const size_t n = static_cast<size_t>(c_.nranks), at = (g + r) % n;
      return at < 3 ? kKinds[(i + b) % kinds_][at] : 1;
    }
    const double v = 1.0 + static_cast<double>((i + r + 2 * b) % modulus_);
    return bitwise_ ? v + 64 : v;
  }
  // The reduction over all ranks at index g.
  double reduced(size_t g) const {
    double acc = value(0, g);
    for (int r = 1; r < c_.nranks; ++r) {
      double v = value(r, g);
      switch (c_.op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage: acc += v; break;
        case ReduceOp::kProduct: acc *= v; break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
        case ReduceOp::kBand: acc = static_cast<double>(as_bits(acc) & as_bits(v)); break;
        case ReduceOp::kBor: acc = static_cast<double>(as_bits(acc) | as_bits(v)); break;
        case ReduceOp::kBxor: acc = static_cast<double>(as_bits(acc) ^ as_bits(v)); break;
      }
    }
    if (c_.op != ReduceOp::kAverage) return acc;
    return is_integer(c_.dtype) ? std::trunc(acc / c_.nranks) : acc / c_.nranks;
  }

 private:
  BenchCase c_;
  bool product_, bitwise_ = false;
  size_t modulus_ = 1, period_ = 1, kinds_ = 9;
};

// A run of output elements whose expected values follow one rank's pattern (or the reduced
// pattern, source -1) from global index first_g on, within one block.
struct Segment {
  size_t offset, length, first_g;
  int source;
};

std::vector<Segment> expected_segments(const BenchCase& c) {
  const size_t own = static_cast<size_t>(c.rank) * c.block;
  switch (c.coll) {
    case Collective::kAllreduce: return {{0, c.count, 0, -1}};
    case Collective::kReduceScatter: return {{0, c.block, own, -1}};
    case Collective::kBroadcast: return {{0, c.count, 0, 0}};
    case Collective::kBarrier: return {};
    case Collective::kAllgather:
    case Collective::kAlltoall: break;
  }
  std::vector<Segment> segments;
  for (int p = 0; p < c.nranks; ++p) {
    size_t first = c.coll == Collective::kAllgather ? 0 : own;
    segments.push_back({static_cast<size_t>(p) * c.block, c.block, first, p});
  }
  return segments;
}

// Rank `rank`'s pattern for global indices 0 to length - 1, block by block.
template <typename T>
void write_pattern(T* dst, size_t length, const Pattern& pattern, int rank) {
  std::vector<T> tile(pattern.period());
  for (size_t start = 0; start < length; start += pattern.block()) {
    for (size_t j = 0; j < tile.size(); ++j) tile[j] = encode<T>(pattern.value(rank, start + j));
    const size_t end = std::min(length, start + pattern.block());
    for (size_t i = start, phase = 0; i < end; ++i) {
      dst[i] = tile[phase];
      if (++phase == tile.size()) phase = 0;
    }
  }
}

template <typename T>
int64_t check_segment(const T* got, const Segment& s, const Pattern& pattern, double tolerance) {
  std::vector<double> tile(pattern.period());
  for (size_t j = 0; j < tile.size(); ++j) {
    size_t g = s.first_g + j;
    tile[j] = s.source < 0 ? pattern.reduced(g) : pattern.value(s.source, g);
  }
  int64_t wrong = 0;
  for (size_t i = 0, phase = 0; i < s.length; ++i) {
    double expected = tile[phase];
    if (!(std::fabs(decode(got[s.offset + i]) - expected) <=
          tolerance * std::max(1.0, std::fabs(expected))))
      ++wrong;
    if (++phase == tile.size()) phase = 0;
  }
  return wrong;
}

double tolerance(const BenchCase& c) {
  if (c.dtype == DType::kFloat16) return 2e-3;
  if (c.dtype == DType::kBFloat16) return 1.6e-2;
  if (!reduces(c.coll) || c.op != ReduceOp::kAverage) return 0;
  return c.dtype == DType::kFloat32 ? 1e-6 : c.dtype == DType::kFloat64 ? 1e-12 : 0;
}

}  // namespace

std::optional<Collective> parse_collective(std::string_view text) {
  for (Collective coll : {Collective::kAllreduce, Collective::kReduceScatter,
                          Collective::kAllgather, Collective::kBroadcast, Collective::kAlltoall})
    if (text == collective_name(coll)) return coll;
  return std::nullopt;
}

bool reduces(Collective coll) {
  return coll == Collective::kAllreduce || coll == Collective::kReduceScatter;
}

double bus_factor(Collective coll, int nranks) {
  const double n = nranks;
  if (coll == Collective::kAllreduce) return 2 * (n - 1) / n;
  if (coll == Collective::kBroadcast) return 1;
  return (n - 1) / n;
}

std::optional<BenchCase> make_case(Collective coll, DType dtype, ReduceOp op, int nranks, int rank,
                                   size_t bytes) {
  BenchCase c{coll, dtype, op, nranks, rank, 0, 0, 0};
  const size_t elems = bytes / dtype_size(dtype);
  const bool blocked = coll == Collective::kReduceScatter || coll == Collective::kAllgather ||
                       coll == Collective::kAlltoall;
  c.block = blocked ? elems / static_cast<size_t>(nranks) : elems;
  c.count = blocked ? c.block * static_cast<size_t>(nranks) : elems;
  c.bytes = c.count * dtype_size(dtype);
  if (c.count == 0) return std::nullopt;
  return c;
}

void Buffers::Free::operator()(void* p) const {
  if (shared)
    free_shared(p);
  else
    std::free(p);
}

size_t Buffers::footprint(size_t bytes) {
  constexpr size_t page = 4096;
  return 2 * ((std::max<size_t>(bytes, 1) + page - 1) / page * page);
}

Buffers::Buffers(size_t bytes, bool shared)
    : send_(nullptr, Free{shared}), recv_(nullptr, Free{shared}) {
  const size_t page = 4096, rounded = footprint(bytes) / 2;
  send_.reset(shared ? alloc_shared(rounded) : std::aligned_alloc(page, rounded));
  recv_.reset(shared ? alloc_shared(rounded) : std::aligned_alloc(page, rounded));
  if (!send_ || !recv_)
    KOLO_THROW(ErrorCode::kInvalidArgument, "cannot allocate two buffers of ", rounded, " bytes (",
               shared ? "--alloc shared" : "private memory",
               ") for the largest size: lower -e or the number of ranks on this host");
}

size_t available_host_memory() {
  size_t available = static_cast<size_t>(::sysconf(_SC_AVPHYS_PAGES)) *
                     static_cast<size_t>(::sysconf(_SC_PAGESIZE));  // where MemAvailable is not
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") available = kib << 10;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  // A container's limit: "0::/path" in /proc/self/cgroup names the cgroup v2 directory.
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
    size_t max = 0, current = 0;
    if (max_file >> max && current_file >> current)  // "max" (no limit) does not read
      available = std::min(available, max > current ? max - current : 0);
  }
  return available;
}

void* send_buffer(const BenchCase& c, Buffers& buffers) {
  if (!c.in_place) return buffers.send();
  if (c.coll == Collective::kAllreduce) return buffers.recv();
  return static_cast<char*>(buffers.recv()) +
         static_cast<size_t>(c.rank) * c.block * dtype_size(c.dtype);
}

void fill_inputs(const BenchCase& c, Buffers& buffers) {
  Pattern pattern(c);
  visit_dtype(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (c.coll == Collective::kBroadcast) {
      if (c.rank == 0)
        write_pattern(static_cast<T*>(buffers.recv()), c.count, pattern, 0);
      else
        std::memset(buffers.recv(), 0, c.bytes);
      return;
    }
    const size_t send = c.coll == Collective::kAllgather ? c.block : c.count;
    const size_t recv = c.coll == Collective::kReduceScatter ? c.block : c.count;
    std::memset(buffers.recv(), 0, recv * sizeof(T));
    write_pattern(static_cast<T*>(send_buffer(c, buffers)), send, pattern, c.rank);
  });
}

int64_t count_wrong(const BenchCase& c, const Buffers& buffers) {
  Pattern pattern(c);
  int64_t wrong = 0;
  visit_dtype(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (const Segment& s : expected_segments(c))
      wrong += check_segment(static_cast<const T*>(buffers.recv()), s, pattern, tolerance(c));
  });
  return wrong;
}

}  // namespace kolo::bench
