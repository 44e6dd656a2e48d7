// The registry behind kolo::alloc_shared (comm/alloc_shared.h): which memfd-backed region an
// address lies in, so the shm transport can tell peers what to map.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo::transport::shm {

// One registered region as peers see it: `fd` is open in the owner's process (peers open it
// through /proc/<pid>/fd), `id` is unique within the owner's process, so a region freed and
// reallocated at the same address with the same fd number is never mistaken for the old one.
struct SharedRegion {
  uint64_t id = 0;  // 0: not a registered region
  uint64_t base = 0;
  uint64_t bytes = 0;
  int32_t fd = -1;
  int32_t unused = 0;
};

// The registered region that contains [address, address + 1), or a region with id 0.
SharedRegion find_shared_region(const void* address);

// kolo::alloc_shared and kolo::free_shared (comm/alloc_shared.h): a memfd-backed region of at
// least `bytes`, registered so find_shared_region() knows it; and its release.
void* allocate_region(size_t bytes);
void free_region(void* ptr);

}  // namespace kolo::transport::shm
