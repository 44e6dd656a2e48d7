// kolo::alloc_shared / free_shared: the public names of the shm transport's registered
// regions (comm/transport/shm/shared_buffer.h).
#include "comm/alloc_shared.h"

#include "comm/transport/shm/shared_buffer.h"

namespace kolo {

void* alloc_shared(size_t bytes) {
  return transport::shm::allocate_region(bytes);
}

void free_shared(void* ptr) {
  transport::shm::free_region(ptr);
}

}  // namespace kolo
