// One direction-pair of shared-memory channels between this rank and a peer.
//
// Every rank owns one segment holding a header (its pid, an abort flag and a doorbell futex
// word) and one inbound ring per peer. To send to peer P, a rank copies into the ring that P's
// segment keeps for it and rings P's doorbell; P copies out and rings the sender's doorbell so
// that a sender waiting for space wakes up. A waiter sleeps on its own doorbell (futex), so
// oversubscribed ranks give the CPU to the peer they wait for instead of spinning.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "comm/transport/context.h"
#include "comm/transport/shm/shared_buffer.h"

namespace kolo::transport::shm {

// Bytes of each rank's small-message slot (two slots, used alternately by generation).
inline constexpr size_t kSmallSlotBytes = 64 * 1024;
// Bytes of each rank's staging slots (two, used alternately by generation): direct collectives on
// ordinary buffers stream their data through them (comm/collectives/shm_direct.cc), pieces of up to
// this size per round. 256 KiB stays in L2 with room; larger slots (128 KiB per peer) were measured
// faster at 8 ranks from 16 MiB but 1.3x slower at 1 MiB, and far slower in the first operations.
inline constexpr size_t kStageSlotBytes = 256 * 1024;
// How many buffer addresses a rank can publish for one direct collective.
inline constexpr int kMaxPublished = 4;

struct alignas(64) SegmentHeader {
  uint64_t magic;
  int32_t pid;
  std::atomic<uint32_t> aborted;
  // Why this rank gave up, written before `aborted`: local peers quote it without the store,
  // whose host may be the rank that is exiting.
  char abort_reason[1024];
  alignas(64) std::atomic<uint32_t> doorbell;  // bumped by peers on every state change
  std::atomic<uint32_t> sleepers;              // > 0 while the owner sleeps on the doorbell
  // Direct collectives (comm/collectives/shm_direct.cc): `generation` counts this rank's
  // arrivals at shm barriers; `published` holds buffer addresses (in this rank's address space)
  // that peers read with process_vm_readv once they have seen the matching generation.
  alignas(64) std::atomic<uint64_t> generation;
  // The call this rank was in when it arrived at a generation (slot generation % 2): peers
  // compare it with their own once all have arrived (Context::check_call).
  CallSignature calls[2];
  // The call this rank waits in, written once one of its waits has gone on long enough to sleep
  // (a seqlock: `waiting_version` is odd while the words change; the words are seq, bytes, and
  // kind | root << 32). A rank waiting for it through the other mechanism (a generation against
  // a ring transfer: barrier against allreduce) compares it with its own call and fails with
  // kMismatch, where both would otherwise wait out the timeout.
  std::atomic<uint64_t> waiting_version;
  std::atomic<uint64_t> waiting_call[3];
  uint64_t published[kMaxPublished];
  // For each published address that lies in an alloc_shared region: that region, so a peer can
  // map it once and read it with plain loads (id 0: an ordinary buffer, read with CMA).
  SharedRegion published_regions[kMaxPublished];
  uint64_t cma_probe;  // a known value peers read to test whether cross-process reads work
  alignas(64) char small_slots[2][kSmallSlotBytes];
  alignas(64) char stage_slots[2][kStageSlotBytes];
};

// Single-producer single-consumer byte ring; head and tail count bytes ever written / read.
struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
};

class Pair {
 public:
  Pair(int peer, SegmentHeader* self, SegmentHeader* remote, RingHeader* outbound,
       char* outbound_data, RingHeader* inbound, char* inbound_data, size_t capacity);

  void post(Transfer* t);
  // Moves as many bytes as possible for the head transfers; true when anything moved.
  bool progress();
  bool idle() const { return sends_.empty() && recvs_.empty(); }
  bool peer_gone() const;  // the peer aborted or its process no longer exists
  int peer() const { return peer_; }

 private:
  bool progress_send();
  bool progress_recv();

  int peer_;
  SegmentHeader* self_;
  SegmentHeader* remote_;
  RingHeader* out_;  // lives in the peer's segment: the ring the peer keeps for us
  char* out_data_;
  RingHeader* in_;  // lives in our segment: the ring we keep for the peer
  char* in_data_;
  size_t capacity_;
  std::deque<Transfer*> sends_, recvs_;
};

void ring_doorbell(SegmentHeader* header);

}  // namespace kolo::transport::shm
