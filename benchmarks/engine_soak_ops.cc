// engine_soak's ops: specs, values, submission, the closed-form check and the bad calls.
#include "benchmarks/engine_soak_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>

#include "comm/base/convert.h"

namespace kolo::soak {
namespace {

using engine::Compression;
using engine::Engine;
using engine::OpOptions;
using engine::TensorView;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                             DType::kFloat64, DType::kInt32,   DType::kInt64,
                             DType::kUInt8,   DType::kInt8,    DType::kInt16};
constexpr int kNumDTypesUsed = static_cast<int>(std::size(kDTypes));
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax};

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool floating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
         d == DType::kBFloat16;
}

// Element count: 90% 1-511, 9% 512-16K, 1% 128 KiB-1 MiB of data.
size_t element_count(uint64_t h, DType dtype) {
  const uint64_t bucket = h % 100, e = (h >> 8) % 9, r = h >> 12;
  if (bucket < 90) return (size_t{1} << e) + r % (size_t{1} << e);
  if (bucket < 99) return 512 + r % (16384 - 512);
  return ((128 << 10) + r % (896 << 10)) / dtype_size(dtype);
}

// ---- Values with closed-form results: element i is b(i) = (i + phase) % 4 + 1, scaled ----

void fill(void* dst, DType dtype, size_t count, size_t phase, double scale, double offset) {
  constexpr size_t kHead = 64;  // a multiple of the period: the doubling copies stay in phase
  double head[kHead] = {};
  const size_t first = std::min(count, kHead), esize = dtype_size(dtype);
  for (size_t i = 0; i < first; ++i) head[i] = double((i + phase) % 4 + 1) * scale + offset;
  convert(dst, dtype, head, DType::kFloat64, first);
  char* out = static_cast<char*>(dst);
  for (size_t done = first; done < count;) {
    const size_t n = std::min(done, count - done);
    std::memcpy(out + done * esize, out, n * esize);
    done += n;
  }
}

// Rank r contributes 2 b(i) (r + 1) to a reduction, so every op's result is b(i) times this.
double reduce_factor(const Spec& s, int n) {
  const double f = s.op == ReduceOp::kSum       ? n * (n + 1)
                   : s.op == ReduceOp::kAverage ? n + 1
                   : s.op == ReduceOp::kMin     ? 2
                                                : 2 * n;
  return f * s.prescale * s.postscale;
}

// alltoall: rows rank r sends to rank q (0 for some pairs when rows is 1: empty blocks too).
int64_t split(const Spec& s, int r, int q) {
  return s.rows * (1 + (r + q) % 2) / 2;
}

std::vector<char> typed(DType dtype, size_t count) {
  return std::vector<char>(std::max<size_t>(count, 1) * dtype_size(dtype));
}

// The bytes and shape this rank's result must have.
std::vector<char> expected(const Spec& s, int me, int n, std::vector<int64_t>* shape) {
  const size_t esize = dtype_size(s.dtype), cols = size_t(s.cols);
  std::vector<char> out;
  auto append = [&](size_t rows, size_t phase, double scale, double offset) {
    const size_t at = out.size();
    out.resize(at + rows * cols * esize);
    fill(out.data() + at, s.dtype, rows * cols, phase, scale, offset);
  };
  int64_t rows = 0;
  for (int q = 0; q < n; ++q) {
    const int64_t r = s.kind == Kind::kAllgather ? s.rows + q % 2 : split(s, q, me);
    if (s.kind == Kind::kAllgather) append(size_t(r), s.phase, 1, 8.0 * q);
    if (s.kind == Kind::kAlltoall) append(size_t(r), s.phase + size_t(me), 1, 5.0 * q);
    rows += r;
  }
  if (s.kind == Kind::kAllreduce) append(size_t(s.rows), s.phase, reduce_factor(s, n), 0);
  if (s.kind == Kind::kBroadcast) append(size_t(s.rows), s.phase, 1, 8.0 * s.root);
  if (s.kind == Kind::kReduceScatter) {  // rows split evenly, the first rows % n get one more
    const int64_t base = s.rows / n, extra = s.rows % n;
    rows = base + (me < extra ? 1 : 0);
    const int64_t first = me * base + std::min<int64_t>(me, extra);
    append(size_t(rows), s.phase + size_t(first) * cols, reduce_factor(s, n), 0);
  }
  if (s.kind == Kind::kAllreduce || s.kind == Kind::kBroadcast) rows = s.rows;
  *shape = {rows, s.cols};
  return out;
}

}  // namespace

Spec spec_of(int name, int world) {
  const uint64_t a = mix(uint64_t(name)), b = mix(a);
  Spec s;
  const uint64_t kind = a % 100;
  s.kind = kind < 55   ? Kind::kAllreduce
           : kind < 67 ? Kind::kAllgather
           : kind < 79 ? Kind::kBroadcast
           : kind < 90 ? Kind::kAlltoall
                       : Kind::kReduceScatter;
  s.dtype = kDTypes[(a >> 8) % kNumDTypesUsed];
  // A sum reaches 4 n (n + 1) (reduce_factor), past int8's 127 beyond 5 ranks.
  if (s.dtype == DType::kInt8 && world > 5) s.dtype = DType::kInt16;
  s.op = kOps[(a >> 12) % 4];
  s.cols = 1 + int64_t((a >> 16) % 3);
  s.rows = std::max<int64_t>(1, int64_t(element_count(b, s.dtype)) / s.cols);
  s.in_place = (a >> 20) % 2 == 0;
  s.root = name % world;
  s.phase = size_t(name) % 4;
  // Scale factors keep every result exact; integers get none (an average would truncate).
  const uint64_t variant = (a >> 24) % 10;
  if (floating(s.dtype) && (s.kind == Kind::kAllreduce || s.kind == Kind::kReduceScatter)) {
    if (variant == 0) s.prescale = 0.5;
    if (variant == 1) s.postscale = 0.5;
  }
  if ((s.dtype == DType::kFloat32 || s.dtype == DType::kFloat64) && s.kind == Kind::kAllreduce)
    s.compression = variant == 2   ? Compression::kFp16
                    : variant == 3 ? Compression::kBf16
                                   : Compression::kNone;
  return s;
}

// The last rank's view of an injected mismatch: another dtype, shape or op type.
Spec mismatched(Spec s, int variant) {
  if (variant == 0) {
    auto at = std::find(std::begin(kDTypes), std::end(kDTypes), s.dtype) - std::begin(kDTypes);
    s.dtype = kDTypes[(at + 1) % kNumDTypesUsed];
  } else if (variant == 1) {
    s.cols += 1;
  } else {
    s.kind = s.kind == Kind::kAllreduce ? Kind::kBroadcast : Kind::kAllreduce;
  }
  return s;
}

void submit(Engine& eng, Op& op, int me, int n) {
  const Spec& s = op.spec;
  OpOptions o{s.op, s.prescale, s.postscale, s.compression, s.root, {}, 0};
  int64_t rows = s.rows;
  if (s.kind == Kind::kAllgather) rows += me % 2;
  if (s.kind == Kind::kAlltoall) {
    rows = 0;
    for (int q = 0; q < n; ++q) rows += o.splits.emplace_back(split(s, me, q));
  }
  const size_t count = size_t(rows * s.cols);
  op.input = typed(s.dtype, count);
  TensorView in{op.input.data(), s.dtype, {rows, s.cols}};
  switch (s.kind) {
    case Kind::kAllreduce: {
      fill(in.data, s.dtype, count, s.phase, 2.0 * (me + 1), 0);
      TensorView out = in;
      if (!s.in_place) op.output = typed(s.dtype, count), out.data = op.output.data();
      op.handle = eng.allreduce(op.name, in, out, o);
      break;
    }
    case Kind::kAllgather:
      fill(in.data, s.dtype, count, s.phase, 1, 8.0 * me);
      op.handle = eng.allgather(op.name, in, o);
      break;
    case Kind::kBroadcast:
      if (me == s.root) fill(in.data, s.dtype, count, s.phase, 1, 8.0 * me);
      op.handle = eng.broadcast(op.name, in, s.root, o);
      break;
    case Kind::kAlltoall: {
      size_t at = 0;  // the block for rank q: phase shifted by q, offset by the sender
      for (int q = 0; q < n; ++q) {
        const size_t c = size_t(o.splits[size_t(q)] * s.cols);
        fill(op.input.data() + at * dtype_size(s.dtype), s.dtype, c, s.phase + size_t(q), 1,
             5.0 * me);
        at += c;
      }
      op.handle = eng.alltoall(op.name, in, o);
      break;
    }
    case Kind::kReduceScatter:
      fill(in.data, s.dtype, count, s.phase, 2.0 * (me + 1), 0);
      op.handle = eng.reduce_scatter(op.name, in, o);
      break;
  }
}

// "" when the op ended as it must, else what went wrong.
std::string check(const Op& op, int me, int n) {
  const engine::Status st = op.handle.status();
  if (op.injected) {
    const bool named = st.message.find("tensor '" + op.name + "'") != std::string::npos &&
                       st.message.find("mismatch") != std::string::npos;
    return !st.ok && st.code == ErrorCode::kMismatch && named
               ? ""
               : "injected mismatch of '" + op.name +
                     "' ended with: " + (st.ok ? "success" : st.message);
  }
  if (!st.ok) return "'" + op.name + "' failed: " + st.message;
  std::vector<int64_t> shape;
  const std::vector<char> want = expected(op.spec, me, n, &shape);
  const Kind k = op.spec.kind;
  const bool engine_sized =
      k == Kind::kAllgather || k == Kind::kAlltoall || k == Kind::kReduceScatter;
  const char* got = engine_sized                                 ? op.handle.output().data()
                    : k == Kind::kAllreduce && !op.spec.in_place ? op.output.data()
                                                                 : op.input.data();
  if (engine_sized &&
      (op.handle.output().size() != want.size() || op.handle.output_shape() != shape))
    return "'" + op.name + "': result has " + std::to_string(op.handle.output().size()) +
           " bytes, expected " + std::to_string(want.size());
  if (!want.empty() && std::memcmp(got, want.data(), want.size()) != 0)
    return "'" + op.name + "': wrong values";
  return "";
}

std::string try_bad_call(Engine& eng, int which, int size) {
  float x[4] = {1, 2, 3, 4};
  const TensorView v{x, DType::kFloat32, {4}};
  const std::string name = "bad." + std::to_string(which);
  // Each changes one thing of a valid call.
  auto with = [&](auto change) {
    TensorView t = v;
    change(t);
    return t;
  };
  auto options = [](auto change) {
    OpOptions o;
    change(o);
    return o;
  };
  const std::function<void()> calls[kBadCalls] = {
      [&] { eng.allreduce(name, with([](auto& t) { t.data = nullptr; }), v); },
      [&] { eng.allgather(name, with([](auto& t) { t.shape = {-3}; })); },
      [&] {
        auto t = with([](auto& t) { t.dtype = static_cast<DType>(77); });
        eng.allreduce(name, t, t);
      },
      [&] { eng.allreduce(name, v, v, options([](auto& o) { o.op = static_cast<ReduceOp>(9); })); },
      [&] { eng.broadcast(name, v, size); },  // root out of range
      [&] { eng.alltoall(name, v, options([&](auto& o) { o.splits.assign(size_t(size), 3); })); },
      [&] {
        eng.grouped_allreduce({name, name}, {v, v});
      },  // one name twice
      [&] { eng.allreduce(name, v, with([](auto& t) { t.shape = {3}; })); },
      [&] {
        auto t = with([](auto& t) { t.device = 0; });
        eng.allreduce(name, t, t);
      },
      [&] { eng.allreduce(name, v, v, options([](auto& o) { o.prescale = std::nan(""); })); },
      [&] { eng.allreduce(name, v, v, options([](auto& o) { o.process_set = 99; })); },
      [&] {
        eng.allreduce(name, v, v,
                      options([](auto& o) { o.compression = static_cast<Compression>(7); }));
      },
  };
  try {
    calls[which % kBadCalls]();
  } catch (const Error& e) {
    return e.code() == ErrorCode::kInvalidArgument
               ? ""
               : "bad call " + std::to_string(which) + " gave " + e.what();
  }
  return "bad call " + std::to_string(which) + " was accepted";
}

}  // namespace kolo::soak
