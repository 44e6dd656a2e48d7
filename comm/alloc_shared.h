// Buffers that ranks on one host can read from each other's address space: kolo::alloc_shared
// backs them with a memfd, so the shared-memory collectives read a peer's buffer with plain
// loads from a mapping instead of staging it (the role of ncclMemAlloc).
#pragma once

#include <cstddef>

namespace kolo {

// `bytes` of zeroed, page-aligned memory that peers on this host read directly in the shm
// collectives. Any buffer works with every collective; these are only faster to read. Throws
// kolo::Error(kIo) when the memory cannot be had.
void* alloc_shared(size_t bytes);
// Frees memory from alloc_shared (null is ignored; anything else throws kInvalidArgument).
void free_shared(void* ptr);

}  // namespace kolo
