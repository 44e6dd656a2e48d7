// Binary encoding of negotiation messages: little-endian fields appended to a string, read
// back in the same order; a short or malformed buffer raises kolo::Error (kInternal), and so
// do a count the rest of the buffer cannot hold and an enum value past its last name.
#include <cstring>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "comm/base/text.h"
#include "fusion/request.h"

namespace kolo::engine {
namespace {

class Writer {
 public:
  template <typename T>
  void pod(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void text(const std::string& s) {
    pod<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void ints(const std::vector<int64_t>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) pod(x);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T pod() {
    KOLO_ASSERT(at_ + sizeof(T) <= in_.size());
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string text() {
    uint32_t n = pod<uint32_t>();
    KOLO_ASSERT(at_ + n <= in_.size());
    std::string s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> v(count(sizeof(int64_t)));
    for (auto& x : v) x = pod<int64_t>();
    return v;
  }
  // A list's length, checked against the bytes left for its items (`min_bytes` each at least)
  // before anything is allocated for them.
  size_t count(size_t min_bytes) {
    const uint32_t n = pod<uint32_t>();
    KOLO_ASSERT(n <= (in_.size() - at_) / min_bytes);
    return n;
  }
  // An enum: values past `last` are refused (the tables that name them are indexed by them).
  template <typename E>
  E choice(E last) {
    using Int = std::underlying_type_t<E>;
    const Int value = pod<Int>();
    KOLO_ASSERT(value <= static_cast<Int>(last));
    return static_cast<E>(value);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  const std::string& in_;
  size_t at_ = 0;
};

void write_request(Writer& w, const Request& r) {
  w.text(r.name);
  w.pod(r.type);
  w.pod(r.dtype);
  w.ints(r.shape);
  w.pod(r.op);
  w.pod(r.prescale);
  w.pod(r.postscale);
  w.pod(r.compression);
  w.pod<int32_t>(r.root);
  w.ints(r.splits);
  w.text(r.group);
  w.pod<int32_t>(r.group_size);
  w.pod<uint8_t>(r.device ? 1 : 0);
}

Request read_request(Reader& rd) {
  Request r;
  r.name = rd.text();
  r.type = rd.choice(OpType::kJoin);
  r.dtype = rd.choice(kLastDType);
  r.shape = rd.ints();
  r.op = rd.choice(ReduceOp::kBxor);
  r.prescale = rd.pod<double>();
  r.postscale = rd.pod<double>();
  r.compression = rd.choice(Compression::kBf16);
  r.root = rd.pod<int32_t>();
  r.splits = rd.ints();
  r.group = rd.text();
  r.group_size = rd.pod<int32_t>();
  r.device = rd.pod<uint8_t>() != 0;
  return r;
}

void write_response(Writer& w, const Response& r) {
  w.pod(r.kind);
  w.pod(r.type);
  w.pod<uint32_t>(static_cast<uint32_t>(r.names.size()));
  for (const auto& n : r.names) w.text(n);
  w.text(r.error);
  w.ints(r.first_dims);
  w.ints(r.splits);
  w.ints(std::vector<int64_t>(r.joined.begin(), r.joined.end()));
  w.pod(r.last_joined);
  write_request(w, r.params);
  w.ints(r.counts);
}

Response read_response(Reader& rd) {
  Response r;
  r.kind = rd.choice(Response::Kind::kError);
  r.type = rd.choice(OpType::kJoin);
  r.names.resize(rd.count(sizeof(uint32_t)));
  for (auto& n : r.names) n = rd.text();
  r.error = rd.text();
  r.first_dims = rd.ints();
  r.splits = rd.ints();
  for (int64_t j : rd.ints()) r.joined.push_back(static_cast<int>(j));
  r.last_joined = rd.pod<int64_t>();
  r.params = read_request(rd);
  r.counts = rd.ints();
  return r;
}

// Bytes of T's smallest encoding (every string and list empty): the least each item of a
// list of them takes on the wire.
template <typename T>
size_t min_bytes(void (*write)(Writer&, const T&)) {
  Writer w;
  write(w, T{});
  return w.take().size();
}

}  // namespace

std::string Request::signature() const {
  std::ostringstream s;
  s << op_type_name(type) << " dtype=" << dtype_name(dtype) << " shape=" << shape_text(shape)
    << " op=" << op_name(op) << " prescale=" << prescale << " postscale=" << postscale
    << " compression=" << static_cast<int>(compression) << " root=" << root
    << " memory=" << (device ? "device" : "host");
  if (!group.empty()) s << " group=" << group << "/" << group_size;
  return s.str();
}

bool Request::same_signature(const Request& o) const {
  auto fields = [](const Request& r) {  // signature()'s fields (group_size is 0 without group)
    return std::tie(r.type, r.dtype, r.shape, r.op, r.prescale, r.postscale, r.compression, r.root,
                    r.group, r.group_size, r.device);
  };
  return fields(*this) == fields(o);
}

std::string encode_requests(const std::vector<Request>& requests, bool joined) {
  Writer w;
  w.pod<uint8_t>(joined ? 1 : 0);
  w.pod<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const auto& r : requests) write_request(w, r);
  return w.take();
}

std::vector<Request> decode_requests(const std::string& bytes, bool* joined) {
  Reader rd(bytes);
  *joined = rd.pod<uint8_t>() != 0;
  static const size_t kMinRequestBytes = min_bytes<Request>(write_request);
  std::vector<Request> out(rd.count(kMinRequestBytes));
  for (auto& r : out) r = read_request(rd);
  KOLO_ASSERT(rd.done());
  return out;
}

std::string encode_responses(const std::vector<Response>& responses) {
  Writer w;
  w.pod<uint32_t>(static_cast<uint32_t>(responses.size()));
  for (const auto& r : responses) write_response(w, r);
  return w.take();
}

std::vector<Response> decode_responses(const std::string& bytes) {
  Reader rd(bytes);
  static const size_t kMinResponseBytes = min_bytes<Response>(write_response);
  std::vector<Response> out(rd.count(kMinResponseBytes));
  for (auto& r : out) r = read_response(rd);
  KOLO_ASSERT(rd.done());
  return out;
}

}  // namespace kolo::engine
