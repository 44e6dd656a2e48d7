// ShmContext: segment setup through the store, and the wait loop (progress, then sleep on the
// doorbell futex; check the peers' liveness while waiting).
#include "comm/transport/shm/context.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <random>
#include <string_view>
#include <thread>

#include <immintrin.h>
#include <sys/uio.h>

#include "comm/base/copy.h"
#include "comm/base/env.h"
#include "comm/base/log.h"
#include "comm/bootstrap/store.h"

namespace kolo::transport::shm {
namespace {

constexpr uint64_t kMagic = 0x6b6f6c6f73686d31ull;  // "kolo shm1"
// Yields before a wait sleeps on the doorbell. With ranks sharing cores a sleeper wakes only
// when the scheduler gets to it, so sleeping early made small collectives erratic: np=4 on 2
// cores, 64 B, six interleaved runs each (us), 16 yields against 256: allreduce 4.9-152 (median
// of the runs about 55) against 3.2-44 (8), alltoall 8-209 (57) against 11-57 (12), broadcast
// 11-313 (110) against 7-58 (11); np=8 alltoall 64 KiB 78-276 against 65-66. A yield hands the
// core to a runnable rank at once, so the longer yielding phase costs the others little.
constexpr int kSpinsBeforeSleep = 256;
constexpr auto kLivenessInterval = std::chrono::milliseconds(50);

// "/kolo-<random>-<pid of the communicator's rank 0>-<rank>": segment_creator_pid() reads it.
std::string segment_name(const std::string& job, int rank) {
  return "/kolo-" + job + "-" + std::to_string(rank);
}

// Tests (tests/shm_cleanup_test.sh) kill ranks at the worst moment: KOLO_FAULT_INJECT=
// shm_created:<rank> (or :all) sends SIGKILL to the rank right after it created its segment,
// before its peers have mapped it. Any other value is refused (a typo would fault nothing).
void inject_fault_after_create(int rank) {
  auto fault = env::get("KOLO_FAULT_INJECT");
  if (!fault) return;
  constexpr std::string_view kPoint = "shm_created:";
  const std::string_view target =
      std::string_view(*fault).substr(fault->rfind(kPoint, 0) == 0 ? kPoint.size() : fault->size());
  const bool any_rank = !target.empty() && target.size() <= 7 &&
                        target.find_first_not_of("0123456789") == std::string_view::npos;
  KOLO_CHECK_ARG(target == "all" || any_rank, "KOLO_FAULT_INJECT='", *fault,
                 "' is not shm_created:<rank> or shm_created:all (a setting for tests only)");
  if (target == "all" || (any_rank && std::stoi(std::string(target)) == rank)) ::raise(SIGKILL);
}

size_t ring_stride(size_t capacity) {
  return sizeof(RingHeader) + capacity;
}

// ThreadSanitizer tracks happens-before per address. Ranks that are threads of one process map
// each segment at their own address, so it cannot see that a generation stored through one
// mapping and loaded through another orders the buffers published with it (which peers then
// read with plain loads). One process-wide token stands in for every generation word.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
char g_tsan_generation_token;
void tsan_release_generation() {
  __tsan_release(&g_tsan_generation_token);
}
void tsan_acquire_generation() {
  __tsan_acquire(&g_tsan_generation_token);
}
#else
void tsan_release_generation() {}
void tsan_acquire_generation() {}
#endif

}  // namespace

int segment_creator_pid(const std::string& entry) {
  // "kolo-<random>-<pid>-<rank>", as listed in /dev/shm (without the leading slash).
  if (entry.rfind("kolo-", 0) != 0) return -1;
  const size_t last = entry.rfind('-');
  if (last == std::string::npos || last <= 5) return -1;
  const size_t before = entry.rfind('-', last - 1);
  if (before == std::string::npos || before < 5 || last - before < 2 || last - before > 10)
    return -1;
  const std::string pid = entry.substr(before + 1, last - before - 1);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(pid);
}

std::unique_ptr<Context> create(const ContextOptions& options) {
  return std::make_unique<ShmContext>(options);
}

namespace {

size_t buffer_bytes_setting() {
  return static_cast<size_t>(
      env::get_int("KOLO_SHM_BUFFER_BYTES", 4 << 20, 4096, int64_t(1) << 30) / 64 * 64);
}
bool cross_process_reads_setting() {
  return env::get_bool("KOLO_SHM_CROSS_PROCESS_READS", true);
}
std::optional<int64_t> staged_passes_setting() {
  return env::get_int_opt("KOLO_SHM_STAGED_PASSES", 1, 2);
}
bool direct_setting() {
  return env::get_bool("KOLO_SHM_DIRECT", true);
}

}  // namespace

void check_settings() {
  buffer_bytes_setting();
  cross_process_reads_setting();
  staged_passes_setting();
  direct_setting();
}

ShmContext::ShmContext(const ContextOptions& options)
    : Context(options),
      capacity_(buffer_bytes_setting()),
      segment_bytes_(sizeof(SegmentHeader) +
                     static_cast<size_t>(options.size) * ring_stride(capacity_)),
      segments_(static_cast<size_t>(options.size)) {
  map_segments(options);
  // Ranks bound one per core are not oversubscribed although each may use one CPU only.
  oversubscribed_ = size_ > options.host_cpus;
  probe_cross_process_reads(options);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) {
      pairs_.push_back(nullptr);
      continue;
    }
    pairs_.push_back(std::make_unique<Pair>(p, header(rank_), header(p), ring(p, rank_),
                                            ring_data(p, rank_), ring(rank_, p),
                                            ring_data(rank_, p), capacity_));
  }
}

ShmContext::~ShmContext() {
  for (auto& m : segments_)
    if (m.base != nullptr) ::munmap(m.base, m.bytes);
  for (auto& [key, m] : peer_regions_)
    if (m.base != nullptr && m.base != MAP_FAILED) ::munmap(m.base, m.bytes);
}

SegmentHeader* ShmContext::header(int rank) const {
  return static_cast<SegmentHeader*>(segments_[static_cast<size_t>(rank)].base);
}

RingHeader* ShmContext::ring(int owner, int from) const {
  char* base = static_cast<char*>(segments_[static_cast<size_t>(owner)].base);
  return reinterpret_cast<RingHeader*>(base + sizeof(SegmentHeader) +
                                       static_cast<size_t>(from) * ring_stride(capacity_));
}

char* ShmContext::ring_data(int owner, int from) const {
  return reinterpret_cast<char*>(ring(owner, from)) + sizeof(RingHeader);
}

// Creates our segment, publishes it, maps every peer's, then unlinks ours: once every rank has
// mapped, no name is left behind in /dev/shm even if a process is killed later.
void ShmContext::map_segments(const ContextOptions& options) {
  auto& store = *options.store;
  // Every rank must lay the segments out alike: a different KOLO_SHM_BUFFER_BYTES on one rank
  // would map past the end of a peer's segment (SIGBUS) or misplace its rings.
  bootstrap::require_same_on_every_rank(
      "KOLO_SHM_BUFFER_BYTES",
      bootstrap::store_allgather(store, "shm/capacity", rank_, size_, std::to_string(capacity_),
                                 timeout_),
      rank_, " bytes");
  if (rank_ == 0)
    store.set("shm/job", std::to_string(std::random_device{}()) + "-" + std::to_string(::getpid()));
  std::string job = bootstrap::wait_for_key(store, "shm/job", timeout_);
  std::string own = segment_name(job, rank_);
  int fd = ::shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) KOLO_THROW_ERRNO("shm_open(", own, ")");
  if (::ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
    ::close(fd);
    ::shm_unlink(own.c_str());
    KOLO_THROW_ERRNO("ftruncate of ", own, " to ", segment_bytes_, " bytes (is /dev/shm full?)");
  }
  void* base = ::mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(own.c_str());
    KOLO_THROW_ERRNO("mmap of ", own);
  }
  segments_[static_cast<size_t>(rank_)] = {base, segment_bytes_};
  auto* h = new (base) SegmentHeader{};
  h->pid = ::getpid();
  h->magic = kMagic;
  for (int p = 0; p < size_; ++p) new (ring(rank_, p)) RingHeader{};
  inject_fault_after_create(rank_);

  try {
    bootstrap::store_barrier(store, "shm/created", size_, timeout_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      std::string name = segment_name(job, p);
      int pfd = ::shm_open(name.c_str(), O_RDWR, 0600);
      if (pfd < 0) KOLO_THROW_ERRNO("shm_open(", name, ") of ", describe_peer(p));
      void* pbase = ::mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
      ::close(pfd);
      if (pbase == MAP_FAILED) KOLO_THROW_ERRNO("mmap of ", name);
      segments_[static_cast<size_t>(p)] = {pbase, segment_bytes_};
      KOLO_CHECK_EQ(header(p)->magic, kMagic, ErrorCode::kIo, "segment ", name, " magic");
      prefault(pbase, sizeof(SegmentHeader));
    }
    bootstrap::store_barrier(store, "shm/mapped", size_, timeout_);
  } catch (...) {
    // A peer that died before every rank mapped its segment cannot unlink its name: whoever is
    // left removes every name of this setup (a name already gone is no error).
    for (int p = 0; p < size_; ++p) ::shm_unlink(segment_name(job, p).c_str());
    throw;
  }
  ::shm_unlink(own.c_str());
}

void ShmContext::do_post(Transfer* t) {
  pairs_[static_cast<size_t>(t->peer)]->post(t);
}

void ShmContext::do_wait(Transfer* t) {
  using Clock = std::chrono::steady_clock;
  SegmentHeader* self = header(rank_);
  auto last_progress = Clock::now();
  auto last_check = last_progress;
  int idle_rounds = 0;
  while (!t->complete()) {
    uint32_t seen = self->doorbell.load(std::memory_order_acquire);
    bool moved = false;
    for (auto& pair : pairs_)
      if (pair && !pair->idle()) moved = pair->progress() || moved;
    if (moved) {
      last_progress = Clock::now();
      idle_rounds = 0;
      continue;
    }
    if (++idle_rounds < kSpinsBeforeSleep) {
      ::sched_yield();  // let the peer we wait for run (ranks may outnumber cores)
      continue;
    }
    auto now = Clock::now();
    if (now - last_check >= kLivenessInterval) {
      check_peers(t);
      check_peer_call(t->peer);
      last_check = now;
    }
    check_wait(now - last_progress, t->peer);
    publish_waiting_call();
    sleep_until_doorbell(seen);
  }
}

// Maps the pages of a peer's header (its slots, which its owner wrote when it created them)
// into this process now, so that a fresh communicator's first collectives do not stop at a page
// fault per 4 KiB of every peer's slots. The rings behind the header are left alone: their
// pages are not even allocated until a ring algorithm uses them.
void ShmContext::prefault(const void* base, size_t bytes) {
  const auto* p = static_cast<const volatile char*>(base);
  for (size_t at = 0; at < bytes; at += 4096) (void)p[at];
}

void ShmContext::sleep_until_doorbell(uint32_t seen) {
  SegmentHeader* self = header(rank_);
  self->sleepers.fetch_add(1, std::memory_order_acq_rel);
  // Short sleeps bound how late we notice a dead peer or a passed deadline.
  timespec ts{0, 10 * 1000 * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&self->doorbell), FUTEX_WAIT, seen, &ts, nullptr,
          0);
  self->sleepers.fetch_sub(1, std::memory_order_acq_rel);
}

void ShmContext::check_peers(Transfer* t) {
  // The peer of `t` first, so the error names the rank this wait depends on. A peer that wrote
  // its last bytes and then exited is not lost: progress() drains what it left in the ring.
  auto lost = [](Pair& pair) { return pair.peer_gone() && !pair.progress(); };
  if (lost(*pairs_[static_cast<size_t>(t->peer)]))
    throw_peer_lost(t->peer, "its process exited or it aborted");
  for (auto& pair : pairs_)
    if (pair && !pair->idle() && lost(*pair))
      throw_peer_lost(pair->peer(), "its process exited or it aborted");
}

// Each rank publishes the address of a known value in its own address space; every rank
// tries to read it from every peer. Cross-process reads count as available only if all reads
// worked everywhere (containers often forbid process_vm_readv) and
// KOLO_SHM_CROSS_PROCESS_READS allows them; the direct collectives run if KOLO_SHM_DIRECT
// allows them on every rank (without cross-process reads they stage everything). The same
// exchange checks that every rank has the same KOLO_SHM_STAGED_PASSES.
void ShmContext::probe_cross_process_reads(const ContextOptions& options) {
  auto& store = *options.store;
  SegmentHeader* self = header(rank_);
  self->cma_probe = kMagic ^ static_cast<uint64_t>(rank_);
  self->published[0] = reinterpret_cast<uint64_t>(&self->cma_probe);
  bootstrap::store_barrier(store, "shm/probe", size_, timeout_);
  bool ok = cross_process_reads_setting();
  for (int p = 0; ok && p < size_; ++p) {
    if (p == rank_ || same_process(p)) continue;
    uint64_t value = 0;
    iovec local{&value, sizeof value};
    iovec remote{reinterpret_cast<void*>(header(p)->published[0]), sizeof value};
    ok = ::process_vm_readv(header(p)->pid, &local, 1, &remote, 1, 0) == sizeof value &&
         value == (kMagic ^ static_cast<uint64_t>(p));
  }
  // KOLO_SHM_STAGED_PASSES must agree: ranks taking different passes would wait at different
  // barriers.
  const auto passes = staged_passes_setting();
  const std::string vote = std::string{ok ? '1' : '0'} + (direct_setting() ? '1' : '0') +
                           (passes ? std::to_string(*passes) : "auto (unset)");
  auto votes = bootstrap::store_allgather(store, "shm/direct", rank_, size_, vote, timeout_);
  auto all = [&](size_t i) {
    return std::all_of(votes.begin(), votes.end(), [i](auto& v) { return v.at(i) == '1'; });
  };
  can_read_peers_ = all(0);
  direct_enabled_ = all(1);
  std::vector<std::string> passes_votes;
  for (const std::string& v : votes) passes_votes.push_back(v.substr(2));
  bootstrap::require_same_on_every_rank("KOLO_SHM_STAGED_PASSES", passes_votes, rank_, "");
  one_pass_staging_ = passes ? *passes == 1 : size_ == 2 && !oversubscribed_;
  if (!can_read_peers_)
    KOLO_LOG(kInfo, "shm: cross-process reads are unavailable; direct collectives use staging");
  if (!direct_enabled_) KOLO_LOG(kInfo, "shm: direct collectives are off; using the ring path");
}

bool ShmContext::same_process(int peer) const {
  return header(peer)->pid == ::getpid();
}

bool ShmContext::plain_reads(int index) const {
  bool one_process = true, all_shared = true;
  for (int p = 0; p < size_; ++p) {
    one_process = one_process && header(p)->pid == header(0)->pid;
    all_shared = all_shared && header(p)->published_regions[index].id != 0;
  }
  return one_process || (all_shared && can_read_peers_);
}

void ShmContext::publish(int index, const void* address) {
  KOLO_ASSERT(index >= 0 && index < kMaxPublished);
  header(rank_)->published[index] = reinterpret_cast<uint64_t>(address);
  header(rank_)->published_regions[index] = find_shared_region(address);
}

void ShmContext::publish_value(int index, uint64_t value) {
  KOLO_ASSERT(index >= 0 && index < kMaxPublished);
  header(rank_)->published[index] = value;
  header(rank_)->published_regions[index] = SharedRegion{};
}

uint64_t ShmContext::peer_value(int peer, int index) const {
  return header(peer)->published[index];
}

const char* ShmContext::peer_address(int peer, int index) const {
  return reinterpret_cast<const char*>(header(peer)->published[index]);
}

char* ShmContext::small_slot_of(int rank, uint64_t generation) const {
  return header(rank)->small_slots[generation % 2];
}

char* ShmContext::stage_slot_of(int rank, uint64_t generation) const {
  return header(rank)->stage_slots[generation % 2];
}

uint64_t ShmContext::generation() const {
  return header(rank_)->generation.load(std::memory_order_relaxed);
}

void ShmContext::arrive(uint64_t generation) {
  if (failed()) throw_already_failed();
  header(rank_)->calls[generation % 2] = call_;
  tsan_release_generation();
  header(rank_)->generation.store(generation, std::memory_order_release);
  for (int p = 0; p < size_; ++p)
    if (p != rank_) ring_doorbell(header(p));
}

uint64_t ShmContext::sync() {
  uint64_t generation = this->generation() + 1;
  arrive(generation);
  wait_generation(generation);
  return generation;
}

// Waits until every peer has arrived at `generation`. A failure marks the context failed and
// tells the peers, as Context::wait does for transfers.
void ShmContext::wait_generation(uint64_t generation) {
  try {
    wait_for_peers(generation);
    tsan_acquire_generation();
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      check_call(p, header(p)->calls[generation % 2]);
      // A peer that arrived, then gave up waiting for this rank, left its part: it failed there.
      if (header(p)->aborted.load(std::memory_order_acquire) != 0)
        throw_peer_lost(p, "it gave up before this rank arrived");
    }
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

// A short spin when ranks have cores to themselves and busy polling is on (the latency of
// small collectives), then yields, then sleeps on the doorbell.
void ShmContext::wait_for_peers(uint64_t generation) {
  using Clock = std::chrono::steady_clock;
  SegmentHeader* self = header(rank_);
  auto first_missing = [&]() {
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && header(p)->generation.load(std::memory_order_acquire) < generation)
        return p;
    return -1;
  };
  const int spins = oversubscribed_ || !busy_polling() ? 0 : 20000;
  for (int i = 0; i < spins; ++i) {
    if (first_missing() < 0) return;
    _mm_pause();
  }
  auto last_progress = Clock::now(), last_check = last_progress;
  int missing = first_missing(), idle_rounds = 0;
  while (missing >= 0) {
    uint32_t seen = self->doorbell.load(std::memory_order_acquire);
    int now_missing = first_missing();
    if (now_missing != missing) last_progress = Clock::now();
    if ((missing = now_missing) < 0) return;
    if (++idle_rounds < kSpinsBeforeSleep) {
      ::sched_yield();
      continue;
    }
    auto now = Clock::now();
    if (now - last_check >= kLivenessInterval) {
      check_peer_alive(missing);
      check_peer_call(missing);
      last_check = now;
    }
    check_wait(now - last_progress, missing);
    publish_waiting_call();
    sleep_until_doorbell(seen);
  }
}

std::string ShmContext::abort_reason(int peer) const {
  const SegmentHeader* h = header(peer);
  if (h == nullptr || h->aborted.load(std::memory_order_acquire) == 0) return {};
  return std::string(h->abort_reason, strnlen(h->abort_reason, sizeof h->abort_reason));
}

void ShmContext::publish_waiting_call() {
  const CallSignature& mine = call();
  if (mine.seq == published_wait_seq_) return;
  published_wait_seq_ = mine.seq;
  // A seqlock without fences (ThreadSanitizer has none): each word is a release store, so the
  // odd version before it is visible to whoever reads the word; the reader's acquire loads of
  // the words keep its second version load after them.
  SegmentHeader* self = header(rank_);
  const uint64_t version = self->waiting_version.load(std::memory_order_relaxed);
  self->waiting_version.store(version + 1, std::memory_order_relaxed);
  self->waiting_call[0].store(mine.seq, std::memory_order_release);
  self->waiting_call[1].store(mine.bytes, std::memory_order_release);
  self->waiting_call[2].store(mine.kind | uint64_t{static_cast<uint32_t>(mine.root)} << 32,
                              std::memory_order_release);
  self->waiting_version.store(version + 2, std::memory_order_release);
}

void ShmContext::check_peer_call(int peer) const {
  const SegmentHeader* h = header(peer);
  const uint64_t before = h->waiting_version.load(std::memory_order_acquire);
  if (before % 2 != 0) return;  // being written: looked at again at the next check
  CallSignature theirs;
  theirs.seq = h->waiting_call[0].load(std::memory_order_acquire);
  theirs.bytes = h->waiting_call[1].load(std::memory_order_acquire);
  const uint64_t kind_root = h->waiting_call[2].load(std::memory_order_acquire);
  if (h->waiting_version.load(std::memory_order_relaxed) != before) return;
  theirs.kind = static_cast<uint32_t>(kind_root);
  theirs.root = static_cast<int32_t>(static_cast<uint32_t>(kind_root >> 32));
  // The same call number with another signature: the ranks called different collectives (or
  // sizes). Another number is no evidence (the peer may be in an earlier call that does not
  // wait for this rank): the timeout decides then.
  if (theirs.seq == call().seq) check_call(peer, theirs);
}

void ShmContext::check_peer_alive(int peer) {
  if (pairs_[static_cast<size_t>(peer)]->peer_gone())
    throw_peer_lost(peer, "its process exited or it aborted");
}

void ShmContext::read_peer(int peer, const void* remote, void* local, size_t bytes) {
  try {
    copy_with_peer(peer, const_cast<void*>(remote), local, bytes, false);
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

void ShmContext::write_peer(int peer, void* remote, const void* local, size_t bytes,
                            bool streaming) {
  try {
    copy_with_peer(peer, remote, const_cast<void*>(local), bytes, true, streaming);
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

const char* ShmContext::peer_view(int peer, const void* remote, size_t bytes) {
  if (same_process(peer)) return static_cast<const char*>(remote);
  return mapped_peer_range(peer, remote, bytes, false);
}

void ShmContext::copy_with_peer(int peer, void* remote, void* local, size_t bytes, bool to_peer,
                                bool streaming) {
  if (bytes == 0) return;
  char* reachable = same_process(peer) ? static_cast<char*>(remote)
                                       : mapped_peer_range(peer, remote, bytes, to_peer);
  if (reachable != nullptr) {
    if (to_peer && streaming)
      copy_streaming(reachable, local, bytes);
    else if (to_peer)
      std::memcpy(reachable, local, bytes);
    else
      std::memcpy(local, reachable, bytes);
    return;
  }
  auto* near = static_cast<char*>(local);
  auto* far = static_cast<char*>(remote);
  while (bytes > 0) {
    iovec l{near, bytes}, r{far, bytes};
    ssize_t n = to_peer ? ::process_vm_writev(header(peer)->pid, &l, 1, &r, 1, 0)
                        : ::process_vm_readv(header(peer)->pid, &l, 1, &r, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == ESRCH) throw_peer_lost(peer, "its process exited");
      KOLO_THROW_ERRNO(operation(), to_peer ? ": writing " : ": reading ", bytes,
                       to_peer ? " B to " : " B from ", describe_peer(peer));
    }
    near += n;
    far += n;
    bytes -= static_cast<size_t>(n);
  }
}

char* ShmContext::mapped_peer_range(int peer, const void* remote, size_t bytes, bool writable) {
  const auto at = reinterpret_cast<uint64_t>(remote);
  for (const SharedRegion& region : header(peer)->published_regions) {
    if (region.id == 0 || at < region.base || at + bytes > region.base + region.bytes) continue;
    Mapping& m = peer_regions_[{peer, region.id}];
    if (m.base == nullptr) {
      // Opening another process's fd needs the same permission as process_vm_readv; when it
      // is refused the copies fall back to CMA (a null mapping is remembered as MAP_FAILED).
      // Read-write first (the allreduce writes reduced blocks into peers' outputs), else
      // read-only.
      const std::string path =
          "/proc/" + std::to_string(header(peer)->pid) + "/fd/" + std::to_string(region.fd);
      void* p = MAP_FAILED;
      for (const bool rw : {true, false}) {
        const int fd = ::open(path.c_str(), (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        if (fd < 0) continue;
        p = ::mmap(nullptr, region.bytes, rw ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
                   0);
        ::close(fd);
        if (p != MAP_FAILED) {
          m.writable = rw;
          break;
        }
      }
      m.base = p;
      m.bytes = p == MAP_FAILED ? 0 : region.bytes;
    }
    if (m.base == MAP_FAILED || (writable && !m.writable)) return nullptr;
    return static_cast<char*>(m.base) + (at - region.base);
  }
  return nullptr;
}

void ShmContext::do_abort() noexcept {
  SegmentHeader* self = header(rank_);
  if (self == nullptr) return;
  const size_t n = std::min(failure_.size(), sizeof self->abort_reason - 1);
  std::memcpy(self->abort_reason, failure_.data(), n);
  self->abort_reason[n] = '\0';
  self->aborted.store(1, std::memory_order_release);
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && header(p) != nullptr) ring_doorbell(header(p));
}

}  // namespace kolo::transport::shm
