// Typed access to byte buffers, for the reduction tests (reduce_test.cc, reduce_scalar_test.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace kolo::reduce {

using Bytes = std::vector<uint8_t>;

template <typename T>
T read(const Bytes& bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void write(Bytes& bytes, size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

template <typename T>
Bytes pack(std::initializer_list<T> values) {
  Bytes bytes(values.size() * sizeof(T));
  size_t i = 0;
  for (T value : values) write(bytes, i++, value);
  return bytes;
}

}  // namespace kolo::reduce
