// safetensors: header encoding and validation with nlohmann-json, atomic writes through a
// temporary file, whole-file reads.
#include "trainer/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "comm/base/error.h"
#include "comm/base/text.h"
#include "trainer/io/atomic_file.h"
#include "trainer/io/file_bytes.h"
#include "trainer/io/json_text.h"
#include "trainer/io/sha256.h"

namespace kolo::trainer {
namespace {

constexpr size_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {DType::kFloat32, "F32"}, {DType::kFloat16, "F16"}, {DType::kBFloat16, "BF16"},
    {DType::kInt32, "I32"},   {DType::kInt64, "I64"},   {DType::kUInt8, "U8"},
    {DType::kFloat64, "F64"}, {DType::kInt8, "I8"},     {DType::kInt16, "I16"},
};

// Elements of `shape`; a product that would not fit in 2^62 (bytes of any dtype) is refused
// instead of wrapping.
size_t shape_numel(const std::vector<int64_t>& shape, const std::string& context) {
  size_t n = 1;
  for (int64_t d : shape) {
    KOLO_CHECK_ARG(d >= 0, context, ": negative dimension ", d);
    KOLO_CHECK_ARG(!__builtin_mul_overflow(n, static_cast<size_t>(d), &n) && n < (size_t{1} << 60),
                   context, ": shape ", shape_text(shape), " has too many elements");
  }
  return n;
}

std::string encode_header(const std::vector<TensorRef>& tensors,
                          const std::map<std::string, std::string>& metadata,
                          const std::string& path) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorRef& t : tensors) {
    std::string context = path + ": tensor '" + t.name + "'";
    KOLO_CHECK_ARG(!t.name.empty() && t.name != "__metadata__", path, ": invalid tensor name '",
                   t.name, "'");
    KOLO_CHECK_ARG(!header.contains(t.name), context, " appears twice");
    size_t bytes = shape_numel(t.shape, context) * dtype_size(t.dtype);
    KOLO_CHECK_ARG(bytes == 0 || t.data != nullptr, context, ": null data");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& m,
                                                  const std::string& path) {
  KOLO_CHECK_ARG(m.is_object(), path, ": __metadata__ is not an object");
  std::map<std::string, std::string> out;
  for (auto it = m.begin(); it != m.end(); ++it) {
    KOLO_CHECK_ARG(it->is_string(), path, ": metadata '", it.key(), "' is not a string");
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

// One header entry: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, checked
// against the data section.
SafetensorsFile::Entry parse_entry(const std::string& name, const nlohmann::json& t,
                                   const uint8_t* data, size_t data_start, size_t data_bytes,
                                   const std::string& path) {
  std::string context = path + ": tensor '" + name + "'";
  KOLO_CHECK_ARG(t.is_object() && t.contains("dtype") && t.contains("shape") &&
                     t.contains("data_offsets") && t["dtype"].is_string() &&
                     t["shape"].is_array() && t["data_offsets"].is_array() &&
                     t["data_offsets"].size() == 2,
                 context, ": needs dtype, shape and data_offsets [begin, end]");
  SafetensorsFile::Entry e;
  e.name = name;
  e.dtype = parse_safetensors_dtype(t["dtype"].get<std::string>(), context);
  for (const auto& d : t["shape"]) {
    KOLO_CHECK_ARG(d.is_number_integer(), context, ": shape entries must be integers");
    e.shape.push_back(d.get<int64_t>());
  }
  KOLO_CHECK_ARG(
      t["data_offsets"][0].is_number_unsigned() && t["data_offsets"][1].is_number_unsigned(),
      context, ": data_offsets must be non-negative integers");
  uint64_t begin = t["data_offsets"][0].get<uint64_t>();
  uint64_t end = t["data_offsets"][1].get<uint64_t>();
  KOLO_CHECK_ARG(begin <= end && end <= data_bytes, context, ": data_offsets [", begin, ", ", end,
                 "] outside the data section of ", data_bytes, " bytes");
  e.bytes = end - begin;
  const size_t needed = shape_numel(e.shape, context) * dtype_size(e.dtype);
  KOLO_CHECK_ARG(needed == e.bytes, context, ": its shape and dtype take ", needed,
                 " bytes, its data_offsets [", begin, ", ", end, "] ", e.bytes);
  e.data = data != nullptr ? data + begin : nullptr;
  e.offset = data_start + begin;
  return e;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  KOLO_THROW(ErrorCode::kInvalidArgument, "dtype ", dtype_name(dtype),
             " has no safetensors name (accepted: F32, F16, BF16, I32, I64, U8, F64, I8, I16)");
}

DType parse_safetensors_dtype(const std::string& name, const std::string& context) {
  for (const DTypeName& d : kDTypeNames)
    if (name == d.name) return d.dtype;
  KOLO_THROW(ErrorCode::kInvalidArgument, context, ": unsupported dtype '", name,
             "' (accepted: F32, F16, BF16, I32, I64, U8, F64, I8, I16)");
}

size_t SafetensorsFile::Entry::numel() const {
  return bytes / dtype_size(dtype);
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata, std::string* sha256) {
  std::string header = encode_header(tensors, metadata, path);
  Sha256 sha;
  write_file_atomically(path, [&](const Append& write) {
    auto append = [&](const void* data, size_t bytes) {
      write(data, bytes);
      if (sha256 != nullptr) sha.update(data, bytes);
    };
    uint8_t len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    append(len, sizeof(len));
    append(header.data(), header.size());
    for (const TensorRef& t : tensors)
      append(t.data, shape_numel(t.shape, path) * dtype_size(t.dtype));
  });
  if (sha256 != nullptr) *sha256 = sha.hex();
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  require_regular_file(path_, "safetensors file");  // before the open: a FIFO's blocks
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (f == nullptr) KOLO_THROW_ERRNO("open ", path_);
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);  // a folder opens too, and claims a size of 2^63 - 1
    KOLO_THROW(ErrorCode::kIo, path_, " is not a regular file");
  }
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  buffer_.resize(size > 0 ? static_cast<size_t>(size) : 0);
  size_t got = std::fread(buffer_.data(), 1, buffer_.size(), f);
  std::fclose(f);
  if (size < 0 || got != buffer_.size()) KOLO_THROW(ErrorCode::kIo, "read ", path_, " failed");
  parse(buffer_.size());
}

SafetensorsFile SafetensorsFile::header_only(std::string path) {
  SafetensorsFile file;
  file.path_ = std::move(path);
  const int fd = ::open(file.path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) KOLO_THROW_ERRNO("open ", file.path_);
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const size_t file_bytes = sized ? static_cast<size_t>(st.st_size) : 0;
  uint8_t len[8] = {};
  uint64_t header_len = 0;
  if (sized && file_bytes >= 8 && ::pread(fd, len, 8, 0) == 8)
    for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  const size_t want = 8 + static_cast<size_t>(std::min<uint64_t>(
                              header_len, std::min<uint64_t>(kMaxHeaderBytes, file_bytes)));
  file.buffer_.assign(std::min(want, file_bytes), 0);
  const ssize_t got = ::pread(fd, file.buffer_.data(), file.buffer_.size(), 0);
  ::close(fd);
  if (!sized || got != static_cast<ssize_t>(file.buffer_.size()))
    KOLO_THROW(ErrorCode::kIo, "read ", file.path_, " failed");
  file.parse(file_bytes);
  return file;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.buffer_ = std::move(bytes);
  file.parse(file.buffer_.size());
  return file;
}

void SafetensorsFile::parse(size_t file_bytes) {
  KOLO_CHECK_ARG(file_bytes >= 8 && buffer_.size() >= 8, path_, ": ", file_bytes,
                 " bytes, too short for a safetensors file");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(buffer_[i]) << (8 * i);
  KOLO_CHECK_ARG(header_len <= kMaxHeaderBytes && header_len <= file_bytes - 8 &&
                     header_len <= buffer_.size() - 8,
                 path_, ": header length ", header_len, " exceeds the file (", file_bytes,
                 " bytes) or 100 MiB");
  const char* text = reinterpret_cast<const char*>(buffer_.data() + 8);
  nlohmann::json header = parse_json(std::string_view(text, header_len), path_ + ": header");
  KOLO_CHECK_ARG(header.is_object(), path_, ": header is not a JSON object");
  const size_t data_start = 8 + header_len;
  const uint8_t* data = buffer_.size() == file_bytes ? buffer_.data() + data_start : nullptr;
  const size_t data_bytes = file_bytes - data_start;

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      metadata_ = parse_metadata(*it, path_);
    } else {
      entries_.push_back(parse_entry(it.key(), *it, data, data_start, data_bytes, path_));
    }
  }
  // File order; at one offset an empty tensor first (it holds no bytes), then by name, so that
  // the order does not depend on the header's.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.offset, a.bytes, a.name) < std::tie(b.offset, b.bytes, b.name);
  });
  // Tensors may not share bytes (a crafted header could alias one tensor onto another), and, as
  // the format requires, they cover the data section without holes or trailing bytes (bytes no
  // tensor owns are either damage or something hidden in the file). An empty tensor owns none,
  // wherever its offsets point.
  const Entry* last = nullptr;  // the previous non-empty tensor
  size_t next = data_start;     // where the next non-empty tensor must begin
  for (const Entry& e : entries_) {
    if (e.bytes == 0) continue;
    KOLO_CHECK_ARG(last == nullptr || e.offset >= next, path_, ": tensors '", last->name, "' and '",
                   e.name, "' overlap in the data section");
    KOLO_CHECK_ARG(e.offset == next, path_, ": ", e.offset - next,
                   " bytes of the data section before tensor '", e.name,
                   "' belong to no tensor (the data section may have no holes)");
    next = e.offset + e.bytes;
    last = &e;
  }
  KOLO_CHECK_ARG(next == file_bytes, path_, ": ", file_bytes - next,
                 " bytes after the last tensor belong to no tensor (truncated header or "
                 "trailing bytes)");
}

const SafetensorsFile::Entry* SafetensorsFile::get(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const SafetensorsFile::Entry& SafetensorsFile::find(const std::string& name) const {
  const Entry* e = get(name);
  if (e == nullptr)
    KOLO_THROW(ErrorCode::kInvalidArgument, path_, ": no tensor named '", name, "'");
  return *e;
}

}  // namespace kolo::trainer
