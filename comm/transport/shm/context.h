// Shared-memory transport for ranks on one host (ranks may also be threads of one process).
// Segment layout per rank: SegmentHeader, then one RingHeader + data ring per peer (pair.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/transport/context.h"
#include "comm/transport/shared_memory.h"
#include "comm/transport/shm/pair.h"

namespace kolo::transport::shm {

std::unique_ptr<Context> create(const ContextOptions& options);
// Reads this transport's settings (KOLO_SHM_*), throwing kInvalidArgument for a bad one.
void check_settings();

// The pid of the process that chose the name of a segment, from its /dev/shm entry name
// ("kolo-..."), or -1 for other names. Segments are unlinked once every rank has mapped them;
// a rank killed before that leaves its entry, which kolorun removes when the job is over.
int segment_creator_pid(const std::string& entry);

class ShmContext : public Context, public SharedMemory {
 public:
  explicit ShmContext(const ContextOptions& options);
  ~ShmContext() override;
  TransportKind kind() const override { return TransportKind::kShm; }

  SharedMemory* shared_memory() override { return this; }

  // SharedMemory (comm/transport/shared_memory.h), for the collectives of shm_direct.cc.
  int rank() const override { return Context::rank(); }
  int size() const override { return Context::size(); }
  bool direct_enabled() const override { return direct_enabled_; }
  uint64_t sync() override;
  void arrive(uint64_t generation) override;
  void wait_generation(uint64_t generation) override;
  uint64_t generation() const override;
  void publish(int index, const void* address) override;
  const char* peer_address(int peer, int index) const override;
  void publish_value(int index, uint64_t value) override;
  uint64_t peer_value(int peer, int index) const override;
  // Same process, or every rank published an alloc_shared region and cross-process reads are
  // allowed (opening a peer's fd needs the same permission).
  bool plain_reads(int index) const override;
  bool kernel_reads() const override { return can_read_peers_; }
  bool oversubscribed() const override { return oversubscribed_; }
  bool one_pass_staging() const override { return one_pass_staging_; }
  bool same_process(int peer) const override;
  void read_peer(int peer, const void* remote, void* local, size_t bytes) override;
  void write_peer(int peer, void* remote, const void* local, size_t bytes, bool streaming) override;
  const char* peer_view(int peer, const void* remote, size_t bytes) override;
  size_t small_slot_bytes() const override { return kSmallSlotBytes; }
  char* small_slot_of(int rank, uint64_t generation) const override;
  size_t stage_slot_bytes() const override { return kStageSlotBytes; }
  char* stage_slot_of(int rank, uint64_t generation) const override;

 protected:
  void do_post(Transfer* t) override;
  void do_wait(Transfer* t) override;
  void do_abort() noexcept override;

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    bool writable = false;  // a peer's region mapped read-write (else read-only)
  };
  SegmentHeader* header(int rank) const;
  static void prefault(const void* base, size_t bytes);
  std::string abort_reason(int peer) const override;
  RingHeader* ring(int owner, int from) const;
  char* ring_data(int owner, int from) const;
  void map_segments(const ContextOptions& options);
  void sleep_until_doorbell(uint32_t seen);
  void check_peers(Transfer* t);
  void check_peer_alive(int peer);
  // SegmentHeader::waiting_call: this rank's call, written once per call by a wait about to
  // sleep; a peer's, compared with this rank's (kMismatch when both are in the same call
  // number but not the same call).
  void publish_waiting_call();
  void check_peer_call(int peer) const;
  void wait_for_peers(uint64_t generation);
  // Copies between `local` and `remote` in the peer's address space, `to_peer` saying which
  // way: plain copies where the memory is reachable here, else the kernel (CMA).
  void copy_with_peer(int peer, void* remote, void* local, size_t bytes, bool to_peer,
                      bool streaming = false);
  void probe_cross_process_reads(const ContextOptions& options);
  // The peer's alloc_shared region holding [remote, remote + bytes) mapped here (read-write
  // where the peer's fd opens so, else read-only), or null; null too when `writable` is asked
  // of a read-only mapping.
  char* mapped_peer_range(int peer, const void* remote, size_t bytes, bool writable);

  size_t capacity_;
  size_t segment_bytes_;
  std::vector<Mapping> segments_;  // by rank; ours included
  // Peers' alloc_shared regions mapped into this process, by (peer, region id); kept until the
  // context closes (a freed region's pages stay mapped, never reused under a new id).
  std::map<std::pair<int, uint64_t>, Mapping> peer_regions_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  uint64_t published_wait_seq_ = 0;  // the call whose signature waiting_call holds
  // Every rank can read every peer's memory: all ranks are threads of one process, or
  // cross-process reads (process_vm_readv, "CMA") work between all of them.
  bool can_read_peers_ = false;
  bool direct_enabled_ = false;
  bool oversubscribed_ = false;    // more ranks than cores on this host: never spin
  bool one_pass_staging_ = false;  // KOLO_SHM_STAGED_PASSES, or 2 ranks with a core each
};

}  // namespace kolo::transport::shm
