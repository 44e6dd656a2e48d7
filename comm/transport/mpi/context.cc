// MpiContext: setup (world ranks through the store, then a private MPI_Comm of just the
// members), the wait loop that tests requests with a sleeping backoff, and abort notices that
// make the peers of a failed rank fail fast instead of waiting out their timeout.
#include "comm/transport/mpi/context.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/transport_kind.h"
#include "comm/bootstrap/mpi_world.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/mpi/pair.h"  // and <mpi.h>, without its C++ bindings

namespace kolo::transport::mpi {
namespace {

namespace mpi_world = bootstrap::mpi_world;
using Clock = std::chrono::steady_clock;

// Abort notices are empty messages on their own tag, so they never match a data receive. The
// reason travels through the store (Context::fail leaves it there before do_abort).
constexpr int kNoticeTag = 1;

// Backoff while nothing completes: a few tight tests, then yields for a short window (pieces
// of a moving transfer complete well within it), then sleeps doubling up to 1 ms. Ranks may
// outnumber cores, so a waiter never spins for long.
constexpr int kTightTests = 16;
constexpr auto kYieldWindow = std::chrono::microseconds(200);
constexpr std::chrono::nanoseconds kFirstSleep = std::chrono::microseconds(10);
constexpr std::chrono::nanoseconds kMaxSleep = std::chrono::milliseconds(1);

class Backoff {
 public:
  void progressed(Clock::time_point now) {
    idle_tests_ = 0;
    since_ = now;
    sleep_ = kFirstSleep;
  }
  void pause() {
    if (++idle_tests_ <= kTightTests) return;
    if (Clock::now() - since_ < kYieldWindow) {
      sched_yield();
      return;
    }
    timespec ts{0, static_cast<long>(sleep_.count())};
    nanosleep(&ts, nullptr);
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  int idle_tests_ = 0;
  Clock::time_point since_ = Clock::now();
  std::chrono::nanoseconds sleep_ = kFirstSleep;
};

// MPI_Comm_create_group's tag only separates concurrent creations over overlapping groups;
// 32767 is the smallest MPI_TAG_UB the standard allows. FNV-1a of the communicator's name.
int comm_tag(const std::string& tag) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : tag) {
    hash ^= c;
    hash *= 16777619u;
  }
  return static_cast<int>(hash % 32768u);
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

void check_setup(int rc, const char* call) {
  if (rc != MPI_SUCCESS)
    KOLO_THROW(ErrorCode::kIo, "mpi transport setup: ", call,
               " failed: ", mpi_world::error_string(rc));
}

struct WorldId {
  int rank = -1;
  int size = 0;
};

// "<world rank>/<world size>", as published by every member.
WorldId parse_world_id(const std::string& text) {
  WorldId id;
  auto slash = text.find('/');
  const char* end = text.data() + text.size();
  bool ok = slash != std::string::npos &&
            std::from_chars(text.data(), text.data() + slash, id.rank).ptr == text.data() + slash &&
            std::from_chars(text.data() + slash + 1, end, id.size).ptr == end;
  if (!ok) KOLO_THROW(ErrorCode::kInternal, "mpi transport: malformed store value '", text, "'");
  return id;
}

class MpiContext final : public Context {
 public:
  explicit MpiContext(const ContextOptions& options);
  ~MpiContext() override;
  TransportKind kind() const override { return TransportKind::kMpi; }

 protected:
  void do_post(Transfer* t) override;
  void do_wait(Transfer* t) override;
  void do_abort() noexcept override;

 private:
  std::vector<int> exchange_world_ranks(const ContextOptions& options);
  void create_comm(const std::vector<int>& world_ranks, const std::string& tag);
  bool progress();
  int take_notice();
  void send_notices();

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<Pair> pairs_;                        // by peer rank; our own entry is never used
  MPI_Request notice_request_ = MPI_REQUEST_NULL;  // the receive for any peer's notice
  int notice_source_ = -1;                         // the peer whose notice we took
  bool notices_sent_ = false;
};

MpiContext::MpiContext(const ContextOptions& options) : Context(options) {
  KOLO_CHECK_ARG(options.store != nullptr, "the mpi transport needs a rendezvous store");
  mpi_world::ensure_initialized();
  auto world_ranks = exchange_world_ranks(options);
  create_comm(world_ranks, options.tag);
  pairs_.reserve(static_cast<size_t>(size_));
  for (int p = 0; p < size_; ++p) pairs_.emplace_back(comm_, p);
}

// Every member learns every member's MPI world rank. All members see the same values and so
// reach the same verdict: either all go on to the collective MPI_Comm_create_group or all throw.
std::vector<int> MpiContext::exchange_world_ranks(const ContextOptions& options) {
  std::string mine =
      std::to_string(mpi_world::world_rank()) + "/" + std::to_string(mpi_world::world_size());
  auto values =
      bootstrap::store_allgather(*options.store, "mpi", rank_, size_, mine, options.timeout);
  std::vector<int> world_ranks;
  std::map<int, int> member_of;  // world rank -> first member that has it
  WorldId first = parse_world_id(values[0]);
  auto refuse_unless = [&](bool ok) {
    if (!ok) bootstrap::linger_before_verdict(rank_);
    return ok;
  };
  for (int r = 0; r < size_; ++r) {
    WorldId id = parse_world_id(values[static_cast<size_t>(r)]);
    KOLO_CHECK_ARG(refuse_unless(id.size == first.size),
                   "the mpi transport needs all ranks in one MPI job: ", describe_peer(0),
                   " is in an MPI world of ", first.size, ", ", describe_peer(r), " in one of ",
                   id.size, " (start every rank with one mpirun)");
    auto [it, fresh] = member_of.emplace(id.rank, r);
    KOLO_CHECK_ARG(refuse_unless(fresh), "the mpi transport needs one MPI process per rank, but ",
                   describe_peer(it->second), " and ", describe_peer(r),
                   " are both MPI world rank ", id.rank, " (start every rank with one mpirun)");
    world_ranks.push_back(id.rank);
  }
  return world_ranks;
}

void MpiContext::create_comm(const std::vector<int>& world_ranks, const std::string& tag) {
  auto lock = mpi_world::call_lock();
  MPI_Group world_group, group;
  check_setup(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
  int rc = MPI_Group_incl(world_group, size_, world_ranks.data(), &group);
  MPI_Group_free(&world_group);
  check_setup(rc, "MPI_Group_incl");
  // Collective over the members only, so communicators of disjoint groups form independently.
  rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, comm_tag(tag), &comm_);
  MPI_Group_free(&group);
  check_setup(rc, "MPI_Comm_create_group");
  // Errors on our communicator come back as codes (and become kolo::Errors) instead of MPI's
  // default of killing the job.
  int comm_rank = -1;
  rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm_, &comm_rank);
  if (rc == MPI_SUCCESS)
    rc = MPI_Irecv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, comm_, &notice_request_);
  if (rc != MPI_SUCCESS) MPI_Comm_free(&comm_);
  check_setup(rc, "preparing the communicator");
  KOLO_ASSERT(comm_rank == rank_);
}

MpiContext::~MpiContext() {
  // After MPI_Finalize (a static communicator outliving kolo's atexit) every handle is gone.
  if (comm_ == MPI_COMM_NULL || mpi_finalized()) return;
  try {
    auto lock = mpi_world::call_lock();
    for (auto& pair : pairs_) pair.abandon();
    if (notice_request_ != MPI_REQUEST_NULL) {
      // A cancelled receive completes at once; one that matched has its data already.
      MPI_Cancel(&notice_request_);
      MPI_Wait(&notice_request_, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&comm_);
  } catch (...) {
    // Only the mutex can throw here; a destructor must not.
  }
}

void MpiContext::do_post(Transfer* t) {
  int rc;
  std::string how;
  {
    auto lock = mpi_world::call_lock();
    rc = pairs_[static_cast<size_t>(t->peer)].post(t);
    if (rc != MPI_SUCCESS)
      how = std::string(t->kind == Transfer::Kind::kSend ? "MPI_Isend" : "MPI_Irecv") +
            " failed: " + mpi_world::error_string(rc);
  }
  if (rc == MPI_SUCCESS) return;
  // Context::post does not fail the context on an error; do it here so the peers hear of it.
  try {
    throw_peer_lost(t->peer, how);
  } catch (const Error& e) {
    fail(e.what());
    throw;
  }
}

void MpiContext::do_wait(Transfer* t) {
  if (!pairs_[static_cast<size_t>(t->peer)].queued(t))
    KOLO_THROW(ErrorCode::kInternal, "mpi transport: wait on a transfer that was never posted");
  Backoff backoff;
  auto last_progress = Clock::now();
  while (true) {
    if (progress()) {
      last_progress = Clock::now();
      backoff.progressed(last_progress);
    }
    if (t->complete()) return;
    check_wait(Clock::now() - last_progress, t->peer);
    backoff.pause();
  }
}

// One pass over every request in flight; true when any of them completed.
bool MpiContext::progress() {
  bool moved = false;
  int failed_peer = -1;
  bool truncated = false;
  std::string how;
  {
    auto lock = mpi_world::call_lock();
    for (int p = 0; p < size_ && failed_peer < 0; ++p) {
      if (p == rank_) continue;
      int rc = pairs_[static_cast<size_t>(p)].test(moved);
      if (rc != MPI_SUCCESS) {
        failed_peer = p;
        int error_class = MPI_SUCCESS;
        truncated =
            MPI_Error_class(rc, &error_class) == MPI_SUCCESS && error_class == MPI_ERR_TRUNCATE;
        how = "MPI_Test failed: " + mpi_world::error_string(rc);
      }
    }
    if (failed_peer < 0) {
      failed_peer = take_notice();
      if (failed_peer >= 0) how = "it aborted";
    }
  }
  // A receive posted before its header was checked (so that the data need not wait for it)
  // matched a larger message: the peer is alive and passed another count.
  if (truncated) throw_larger_message(failed_peer);
  if (failed_peer >= 0) throw_peer_lost(failed_peer, how);
  return moved;
}

// Returns the peer whose abort notice arrived, or -1.
int MpiContext::take_notice() {
  if (notice_request_ == MPI_REQUEST_NULL) return -1;
  int flag = 0;
  MPI_Status status;
  if (MPI_Test(&notice_request_, &flag, &status) != MPI_SUCCESS || !flag) return -1;
  notice_source_ = status.MPI_SOURCE;
  return notice_source_;
}

void MpiContext::do_abort() noexcept {
  if (comm_ == MPI_COMM_NULL || mpi_finalized()) return;
  try {
    auto lock = mpi_world::call_lock();
    send_notices();
    for (auto& pair : pairs_) pair.abandon();
  } catch (...) {
    // Best effort: only the mutex can throw.
  }
}

// Tells every other member (but the one that told us) that this rank gave up. The messages
// are empty, so no buffer has to outlive the context and the requests are released at once.
void MpiContext::send_notices() {
  if (notices_sent_) return;
  notices_sent_ = true;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || p == notice_source_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(nullptr, 0, MPI_BYTE, p, kNoticeTag, comm_, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

}  // namespace

std::unique_ptr<Context> create(const ContextOptions& options) {
  return std::make_unique<MpiContext>(options);
}

}  // namespace kolo::transport::mpi
