// Shared-memory transport for ranks on one host (ranks may also be threads of one process).
// Segment layout per rank: SegmentHeader, then one RingHeader + data ring per peer (pair.h).
#pragma once

#include <map>
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

  // --- Direct access, for the shm-only collectives of comm/collectives/shm_direct.cc ---
  // True when the direct collectives may run (KOLO_SHM_DIRECT on every rank).
  bool direct_enabled() const { return direct_enabled_; }
  // Barrier over shared-memory flags. Also the publication point: addresses passed to
  // publish() before it are visible to peers after it. Returns this rank's new generation.
  uint64_t sync();
  void publish(int index, const void* address);
  const char* peer_address(int peer, int index) const;
  // A number instead of an address (a size the ranks must agree on), read after sync().
  void publish_value(int index, uint64_t value);
  uint64_t peer_value(int peer, int index) const;
  // Copies `bytes` at `remote` (an address in peer's address space) to `local`.
  void read_peer(int peer, const void* remote, void* local, size_t bytes);
  bool same_process(int peer) const;
  // True when every rank's published buffer `index` can be read with plain loads: all ranks
  // are threads of one process, or every rank published an alloc_shared region and
  // cross-process reads are allowed (opening a peer's fd needs the same permission). The same
  // answer on every rank once they have met at the sync() after publishing.
  bool plain_reads(int index) const;
  // This rank's small-message slot for `generation`, and a peer's (in the shared mapping).
  char* small_slot(uint64_t generation) { return small_slot_of(rank_, generation); }
  char* small_slot_of(int rank, uint64_t generation) const;
  // The same for the staging slots (kStageSlotBytes each).
  char* stage_slot(uint64_t generation) { return stage_slot_of(rank_, generation); }
  char* stage_slot_of(int rank, uint64_t generation) const;
  // Announces arrival at `generation` without waiting; wait_generation() then waits for all.
  void arrive(uint64_t generation);
  void wait_generation(uint64_t generation);
  uint64_t generation() const;

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
  void check_peer_alive(int peer);
  void wait_for_peers(uint64_t generation);
  void copy_from_peer(int peer, const void* remote, void* local, size_t bytes);
  void probe_cross_process_reads(const ContextOptions& options);
  // The peer's alloc_shared region holding [remote, remote + bytes) mapped here, or null.
  const char* mapped_peer_range(int peer, const void* remote, size_t bytes);

  size_t capacity_;
  size_t segment_bytes_;
  std::vector<Mapping> segments_;  // by rank; ours included
  // Peers' alloc_shared regions mapped into this process, by (peer, region id); kept until the
  // context closes (a freed region's pages stay mapped, never reused under a new id).
  std::map<std::pair<int, uint64_t>, Mapping> peer_regions_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  // Every rank can read every peer's memory: all ranks are threads of one process, or
  // cross-process reads (process_vm_readv, "CMA") work between all of them.
  bool can_read_peers_ = false;
  bool direct_enabled_ = false;
  bool oversubscribed_ = false;  // more ranks than cores on this host: never spin
};

}  // namespace kolo::transport::shm
