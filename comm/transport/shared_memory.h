// A capability that some transports have: every rank of the context can reach the others'
// memory on this host. Algorithms ask a Context for it (Context::shared_memory()) instead of
// knowing any transport by name; the shared-memory collectives of comm/collectives/shm_direct.cc
// are written against this interface alone.
//
// The protocol: ranks publish buffer addresses (or small values), then meet at sync(), a
// barrier over shared flags that also makes what was published before it visible after it.
// Generations count a rank's arrivals; slots alternate by generation, so a slot is only reused
// two generations later, after every peer has left the one in between.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo::transport {

class SharedMemory {
 public:
  virtual ~SharedMemory() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // True when the direct collectives may run (KOLO_SHM_DIRECT on every rank).
  virtual bool direct_enabled() const = 0;

  // Barrier and publication point; returns this rank's new generation.
  virtual uint64_t sync() = 0;
  // Announces arrival at `generation` without waiting; wait_generation() then waits for all.
  virtual void arrive(uint64_t generation) = 0;
  virtual void wait_generation(uint64_t generation) = 0;
  virtual uint64_t generation() const = 0;

  // Buffer addresses (index < kMaxPublished) and numbers the ranks must agree on, read by peers
  // after the next sync().
  virtual void publish(int index, const void* address) = 0;
  virtual const char* peer_address(int peer, int index) const = 0;
  virtual void publish_value(int index, uint64_t value) = 0;
  virtual uint64_t peer_value(int peer, int index) const = 0;
  // True when every rank's published buffer `index` can be read with plain loads (same process,
  // or mapped shared buffers); the same answer on every rank after the sync() that follows.
  virtual bool plain_reads(int index) const = 0;
  // True when every rank may read every peer's private memory through the kernel (read_peer on
  // an address outside any shared region: process_vm_readv); the same answer on every rank.
  virtual bool kernel_reads() const = 0;
  virtual bool same_process(int peer) const = 0;
  // True when this host has more ranks of the context than CPUs (waits then never spin).
  virtual bool oversubscribed() const = 0;
  // True when the staged allreduce runs its two halves in one pass of rounds, with two barriers
  // per round (KOLO_SHM_STAGED_PASSES=1; by default at 2 ranks that do not share a core),
  // instead of a reduce-scatter and then an allgather in rounds of their own (fewer barriers:
  // each costs oversubscribed ranks a wait to be scheduled, and with more ranks the pieces per
  // round are smaller); the same on every rank.
  virtual bool one_pass_staging() const = 0;
  // Copies `bytes` at `remote` (an address in the peer's address space) to `local`.
  virtual void read_peer(int peer, const void* remote, void* local, size_t bytes) = 0;
  // Copies `bytes` at `local` to `remote` in the peer's address space; `streaming`: with
  // non-temporal stores where the memory is reachable with plain stores (a large output that
  // nobody reads soon).
  virtual void write_peer(int peer, void* remote, const void* local, size_t bytes,
                          bool streaming) = 0;
  // A pointer through which this rank reads the `bytes` at `remote` with plain loads: remote
  // itself for a thread of this process, or the peer's alloc_shared region mapped here; null
  // when there is none (read_peer still works).
  virtual const char* peer_view(int peer, const void* remote, size_t bytes) = 0;

  // Small-message slots (two per rank, alternating by generation), for the low-latency
  // allreduce, and staging slots through which the direct collectives stream ordinary buffers.
  virtual size_t small_slot_bytes() const = 0;
  virtual char* small_slot_of(int rank, uint64_t generation) const = 0;
  virtual size_t stage_slot_bytes() const = 0;
  virtual char* stage_slot_of(int rank, uint64_t generation) const = 0;
  char* small_slot(uint64_t generation) const { return small_slot_of(rank(), generation); }
  char* stage_slot(uint64_t generation) const { return stage_slot_of(rank(), generation); }
};

}  // namespace kolo::transport
