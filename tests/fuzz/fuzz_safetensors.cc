// Fuzz target: the safetensors reader (trainer/io/safetensors.h) on arbitrary file contents.
// Run: scripts/fuzz.sh fuzz_safetensors 60. The bytes are read twice: whole, from memory
// (from_bytes), and header only, from a memfd (header_only, which reads just the header of a
// large file). Both must agree, accepting the same tensors or refusing with kolo::Error; an
// accepted file's tensors are in offset order, apart, inside the data section, and sized by
// their shape.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/io/safetensors.h"

namespace {

using kolo::trainer::SafetensorsFile;

void check_entries(const SafetensorsFile& file, size_t size) {
  size_t end = 0;
  for (const SafetensorsFile::Entry& e : file.tensors()) {
    FUZZ_CHECK(e.offset >= end && e.offset >= 8 && e.bytes <= size - e.offset);
    FUZZ_CHECK(e.numel() * kolo::dtype_size(e.dtype) == e.bytes);
    FUZZ_CHECK(file.get(e.name) == &e);
    end = e.offset + e.bytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string whole_error;
  std::vector<SafetensorsFile::Entry> whole_entries;
  try {
    SafetensorsFile whole =
        SafetensorsFile::from_bytes("fuzz", std::vector<uint8_t>(data, data + size));
    check_entries(whole, size);
    for (const SafetensorsFile::Entry& e : whole.tensors()) {
      // The bytes are in the buffer: AddressSanitizer checks the first and the last.
      FUZZ_CHECK(e.data != nullptr);
      if (e.bytes > 0) FUZZ_CHECK(e.data[0] == data[e.offset]);
      if (e.bytes > 0) FUZZ_CHECK(e.data[e.bytes - 1] == data[e.offset + e.bytes - 1]);
    }
    whole_entries = whole.tensors();
  } catch (const kolo::Error& e) {
    whole_error = e.what();
  }
  try {
    const SafetensorsFile header = SafetensorsFile::header_only(kolo::fuzz::as_file(data, size));
    check_entries(header, size);
    FUZZ_CHECK(whole_error.empty() && header.tensors().size() == whole_entries.size());
    for (size_t i = 0; i < whole_entries.size(); ++i) {
      const SafetensorsFile::Entry& h = header.tensors()[i];
      FUZZ_CHECK(h.name == whole_entries[i].name && h.dtype == whole_entries[i].dtype);
      FUZZ_CHECK(h.shape == whole_entries[i].shape && h.offset == whole_entries[i].offset);
      FUZZ_CHECK(h.bytes == whole_entries[i].bytes);
    }
  } catch (const kolo::Error&) {
    FUZZ_CHECK(!whole_error.empty());
  }
  return 0;
}
