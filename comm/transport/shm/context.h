// Shared-memory transport for ranks on one host (ranks may also be threads of one process).
// Segment layout per rank: SegmentHeader, then one RingHeader + data ring per peer (pair.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/transport/context.h"
#include "comm/transport/shm/pair.h"

namespace kolo::transport::shm {

std::unique_ptr<Context> create(const ContextOptions& options);

class ShmContext : public Context {
 public:
  explicit ShmContext(const ContextOptions& options);
  ~ShmContext() override;
  TransportKind kind() const override { return TransportKind::kShm; }

 protected:
  void do_post(Transfer* t) override;
  void do_wait(Transfer* t) override;
  void do_abort() noexcept override;

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  SegmentHeader* header(int rank) const;
  RingHeader* ring(int owner, int from) const;
  char* ring_data(int owner, int from) const;
  void map_segments(const ContextOptions& options);
  void sleep_until_doorbell(uint32_t seen);
  void check_peers(Transfer* t);

  size_t capacity_;
  size_t segment_bytes_;
  std::vector<Mapping> segments_;  // by rank; ours included
  std::vector<std::unique_ptr<Pair>> pairs_;
};

}  // namespace kolo::transport::shm
