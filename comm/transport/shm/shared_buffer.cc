// The process's table of alloc_shared regions (memfd + MAP_SHARED mappings).
#include "comm/transport/shm/shared_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "comm/base/error.h"

namespace kolo::transport::shm {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<SharedRegion> regions;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may outlive static teardown
  return *r;
}

}  // namespace

SharedRegion find_shared_region(const void* address) {
  const auto a = reinterpret_cast<uint64_t>(address);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const SharedRegion& region : r.regions)
    if (a >= region.base && a < region.base + region.bytes) return region;
  return {};
}

void* allocate_region(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  const int fd = ::memfd_create("kolo-shared", MFD_CLOEXEC);
  if (fd < 0) KOLO_THROW_ERRNO("alloc_shared: memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    ::close(fd);
    KOLO_THROW_ERRNO("alloc_shared: ftruncate to ", rounded, " B");
  }
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    KOLO_THROW_ERRNO("alloc_shared: mmap of ", rounded, " B");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.regions.push_back(SharedRegion{r.next_id++, reinterpret_cast<uint64_t>(p), rounded, fd, 0});
  return p;
}

void free_region(void* ptr) {
  if (ptr == nullptr) return;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.regions.begin(); it != r.regions.end(); ++it) {
    if (it->base != reinterpret_cast<uint64_t>(ptr)) continue;
    ::munmap(ptr, it->bytes);
    ::close(it->fd);
    r.regions.erase(it);
    return;
  }
  KOLO_THROW(ErrorCode::kInvalidArgument, "free_shared: ", ptr,
             " was not allocated by alloc_shared");
}

}  // namespace kolo::transport::shm
