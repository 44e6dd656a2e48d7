// Reading and writing safetensors files (the Hugging Face tensor format): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw little-endian data. Used for model weights, checkpoints and the PyTorch dumps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/base/dtype.h"

namespace kolo::trainer {

// A tensor to write: `data` points at numel(shape) elements of `dtype` in host memory.
struct TensorRef {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes `tensors` (in this order in the data section) and the string `metadata` to `path`
// atomically (io/atomic_file.h). Supported dtypes: float32, float16, bfloat16, int32, int64,
// uint8, float64, int8, int16. `sha256` (optional) receives the SHA-256 of the file's bytes,
// computed as they are written.
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       std::string* sha256 = nullptr);

// A whole safetensors file read into memory and validated (header JSON, dtypes, shapes against
// byte ranges, ranges inside the data section).
class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    DType dtype = DType::kFloat32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // into this object's buffer; unaligned in general
    size_t bytes = 0;
    size_t offset = 0;  // of the first byte in the file
    size_t numel() const;
  };

  explicit SafetensorsFile(std::string path);  // throws kolo::Error(kIo / kInvalidArgument)
  // Only the header: entries carry their file offset and no data (read them with pread), so a
  // reader that needs a few ranges of a large file does not load it whole.
  static SafetensorsFile header_only(std::string path);
  // A whole file's bytes already in memory, with the same checks; `name` stands for the path
  // in messages.
  static SafetensorsFile from_bytes(std::string name, std::vector<uint8_t> bytes);

  const std::string& path() const { return path_; }
  const std::vector<Entry>& tensors() const { return entries_; }  // in file (offset) order
  const Entry* get(const std::string& name) const;                // null when absent
  const Entry& find(const std::string& name) const;               // throws naming file, tensor
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  // Parses the header held in buffer_ (its first 8 + header length bytes) for a file of
  // file_bytes bytes; data pointers are set when the whole file is in buffer_.
  void parse(size_t file_bytes);

  std::string path_;
  std::vector<uint8_t> buffer_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// "F32", "F16", "BF16", "I32", "I64", "U8", "F64", "I8", "I16" and back.
const char* safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(const std::string& name, const std::string& context);

}  // namespace kolo::trainer
