// Pair: copies between user buffers and the shared-memory rings.
#include "comm/transport/shm/pair.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "comm/bootstrap/host.h"

namespace kolo::transport::shm {

void ring_doorbell(SegmentHeader* header) {
  header->doorbell.fetch_add(1, std::memory_order_release);
  if (header->sleepers.load(std::memory_order_acquire) > 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header->doorbell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

Pair::Pair(int peer, SegmentHeader* self, SegmentHeader* remote, RingHeader* outbound,
           char* outbound_data, RingHeader* inbound, char* inbound_data, size_t capacity)
    : peer_(peer),
      self_(self),
      remote_(remote),
      out_(outbound),
      out_data_(outbound_data),
      in_(inbound),
      in_data_(inbound_data),
      capacity_(capacity) {}

void Pair::post(Transfer* t) {
  (t->kind == Transfer::Kind::kSend ? sends_ : recvs_).push_back(t);
}

bool Pair::progress() {
  bool moved = progress_send();
  return progress_recv() || moved;
}

bool Pair::progress_send() {
  bool moved = false;
  while (!sends_.empty()) {
    Transfer* t = sends_.front();
    uint64_t head = out_->head.load(std::memory_order_relaxed);
    uint64_t tail = out_->tail.load(std::memory_order_acquire);
    size_t space = capacity_ - static_cast<size_t>(head - tail);
    size_t n = std::min(space, t->bytes - t->done);
    if (n == 0) break;
    // Copy in at most two pieces: up to the end of the ring, then from its start.
    size_t at = static_cast<size_t>(head % capacity_);
    size_t first = std::min(n, capacity_ - at);
    std::memcpy(out_data_ + at, t->data + t->done, first);
    std::memcpy(out_data_, t->data + t->done + first, n - first);
    out_->head.store(head + n, std::memory_order_release);
    t->done += n;
    moved = true;
    if (t->complete()) sends_.pop_front();
  }
  if (moved) ring_doorbell(remote_);
  return moved;
}

bool Pair::progress_recv() {
  bool moved = false;
  while (!recvs_.empty()) {
    Transfer* t = recvs_.front();
    uint64_t tail = in_->tail.load(std::memory_order_relaxed);
    uint64_t head = in_->head.load(std::memory_order_acquire);
    size_t n = std::min(static_cast<size_t>(head - tail), t->bytes - t->done);
    if (n == 0) break;
    size_t at = static_cast<size_t>(tail % capacity_);
    size_t first = std::min(n, capacity_ - at);
    std::memcpy(t->data + t->done, in_data_ + at, first);
    std::memcpy(t->data + t->done + first, in_data_, n - first);
    in_->tail.store(tail + n, std::memory_order_release);
    t->done += n;
    moved = true;
    if (t->complete()) recvs_.pop_front();
  }
  if (moved) ring_doorbell(remote_);  // the peer may be waiting for ring space
  return moved;
}

bool Pair::peer_gone() const {
  return remote_->aborted.load(std::memory_order_acquire) ||
         bootstrap::process_exited(remote_->pid);
}

}  // namespace kolo::transport::shm
