// Buffers that ranks on one host can map into each other's address space: kolo::alloc_shared
// backs them with a memfd, and the shm direct collectives then read a peer's registered buffer
// with plain loads from a mapping instead of process_vm_readv (the role of ncclMemAlloc).
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

}  // namespace kolo::transport::shm

namespace kolo {

// `bytes` of zeroed, page-aligned memory that peers on this host read directly in the shm
// collectives. Any buffer works with every collective; these are only faster to read. Throws
// kolo::Error(kIo) when the memory cannot be had.
void* alloc_shared(size_t bytes);
// Frees memory from alloc_shared (null is ignored; anything else throws kInvalidArgument).
void free_shared(void* ptr);

}  // namespace kolo
