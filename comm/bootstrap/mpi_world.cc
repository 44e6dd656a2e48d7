// mpi_world: MPI initialization, world rank/size and broadcast for bootstrap and the mpi
// transport. Built in every configuration so callers need no #if; only the KOLO_HAVE_MPI
// build talks to MPI, the other throws a kInvalidArgument that names the build option.
#include "comm/bootstrap/mpi_world.h"

#include "comm/base/error.h"
#include "comm/base/log.h"
#include "kolo_config.h"

#if KOLO_HAVE_MPI
// Only MPI's C API is used: comm/CMakeLists.txt defines OMPI_SKIP_MPICXX and MPICH_SKIP_MPICXX,
// which keep the deprecated C++ bindings (and their warnings) out.
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#endif

namespace kolo::bootstrap::mpi_world {

#if KOLO_HAVE_MPI

namespace {

// Broadcast payloads go in pieces that fit MPI's int count.
constexpr size_t kMaxPiece = size_t{1} << 30;

std::mutex g_init_mutex;  // ensure_initialized may be reached from several threads
std::mutex g_call_mutex;  // see call_lock()
std::atomic<bool> g_ready{false};
std::atomic<bool> g_serialize{false};
// A broadcast that passed its deadline stays posted on MPI_COMM_WORLD (a collective cannot be
// cancelled): another one would be matched against it, and MPI would fail the job.
std::atomic<bool> g_abandoned{false};
std::string g_init_error;  // set when kolo's own MPI_Init_thread gave too little

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

// Registered only when kolo called MPI_Init_thread: whoever initializes MPI finalizes it, on a
// successful exit. A process that exits with an error leaves MPI unfinalized: MPI_Finalize
// waits for every other rank, and they wait in a collective for this one until their deadline
// (a failed rank held the job for KOLO_TIMEOUT_SECONDS); mpirun stops them at once instead.
void finalize_at_exit(int status, void*) {
  if (status != 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Initializes MPI ourselves; returns the thread level MPI provides.
int init_mpi() {
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) KOLO_THROW(ErrorCode::kIo, "MPI_Init_thread failed: ", error_string(rc));
  ::on_exit(finalize_at_exit, nullptr);  // glibc: the handler sees the exit status
  if (provided < MPI_THREAD_SERIALIZED)
    g_init_error = detail::concat("MPI provides only ", thread_level_name(provided),
                                  "; kolo needs MPI_THREAD_SERIALIZED or better (use an MPI "
                                  "library built with thread support)");
  return provided;
}

void check_mpi_call(int rc, const char* call) {
  if (rc != MPI_SUCCESS) KOLO_THROW(ErrorCode::kIo, call, " failed: ", error_string(rc));
}

// Tests `request` until it completes (true) or `deadline` passes (false): a few yields, then
// 1 ms sleeps, since ranks that are still starting share the cores with this one.
bool wait_until(MPI_Request* request, std::chrono::steady_clock::time_point deadline) {
  for (int pass = 0;; ++pass) {
    int done = 0;
    {
      auto lock = call_lock();
      check_mpi_call(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    }
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (pass < 64)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// What a broadcast writes into lives on the heap: after a deadline the request stays posted,
// and MPI may still write there when the late rank comes, so it is then never freed.
struct BroadcastBuffers {
  uint64_t length = 0;
  std::string data;
};

}  // namespace

bool available() {
  return true;
}

void ensure_initialized() {
  if (g_ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (!g_init_error.empty()) KOLO_THROW(ErrorCode::kInvalidArgument, g_init_error);
  if (g_ready.load()) return;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  KOLO_CHECK_ARG(!finalized, "MPI was already finalized; kolo cannot use MPI after MPI_Finalize");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    provided = init_mpi();
    if (!g_init_error.empty()) KOLO_THROW(ErrorCode::kInvalidArgument, g_init_error);
  } else {
    // The application chose its thread level; kolo serializes its own calls, which is enough
    // as long as the application does not call MPI concurrently with kolo.
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED)
      KOLO_LOG(kWarning, "MPI was initialized with ", thread_level_name(provided),
               "; call kolo only from the thread that initialized MPI, or initialize MPI with "
               "MPI_THREAD_MULTIPLE");
  }
  g_serialize.store(provided < MPI_THREAD_MULTIPLE);
  g_ready.store(true, std::memory_order_release);
}

int world_rank() {
  ensure_initialized();
  auto lock = call_lock();
  int rank = 0;
  check_mpi_call(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  return rank;
}

int world_size() {
  ensure_initialized();
  auto lock = call_lock();
  int size = 0;
  check_mpi_call(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  return size;
}

std::string broadcast(const std::string& value, int root, std::chrono::milliseconds timeout,
                      const char* what) {
  int size = world_size();
  int rank = world_rank();
  KOLO_CHECK_ARG(root >= 0 && root < size, "broadcast root ", root, " is not a world rank (0..",
                 size - 1, ")");
  KOLO_CHECK_ARG(!g_abandoned.load(), what,
                 " timed out earlier in this process and left its "
                 "MPI broadcast posted on MPI_COMM_WORLD, where another would be matched against "
                 "it: restart the job");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto buffers = std::make_unique<BroadcastBuffers>();
  buffers->length = value.size();
  auto post_and_wait = [&](void* data, int count, MPI_Datatype type) {
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = call_lock();
      check_mpi_call(MPI_Ibcast(data, count, type, root, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    }
    if (wait_until(&request, deadline)) return;
    (void)buffers.release();
    g_abandoned = true;
    if (rank == root)
      KOLO_THROW(ErrorCode::kTimeout, "not every rank reached ", what, " within ", timeout.count(),
                 " ms (KOLO_TIMEOUT_SECONDS): a rank is late, stuck before it, "
                 "or gone");
    KOLO_THROW(ErrorCode::kTimeout, "world rank ", root, " did not reach ", what, " within ",
               timeout.count(), " ms (KOLO_TIMEOUT_SECONDS): it is late, stuck before it, or gone");
  };
  post_and_wait(&buffers->length, 1, MPI_UINT64_T);
  const uint64_t length = buffers->length;
  buffers->data = rank == root ? value : std::string(length, '\0');
  for (size_t offset = 0; offset < length; offset += kMaxPiece) {
    int piece = static_cast<int>(std::min<size_t>(kMaxPiece, length - offset));
    post_and_wait(buffers->data.data() + offset, piece, MPI_BYTE);
  }
  return std::move(buffers->data);
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

std::unique_lock<std::mutex> call_lock() {
  if (!g_serialize.load(std::memory_order_relaxed)) return {};
  return std::unique_lock<std::mutex>(g_call_mutex);
}

#else  // !KOLO_HAVE_MPI

namespace {

[[noreturn]] void no_mpi(const char* what) {
  KOLO_THROW(ErrorCode::kInvalidArgument, what,
             " is not available: this kolo was built without MPI (KOLO_WITH_MPI)");
}

}  // namespace

bool available() {
  return false;
}
void ensure_initialized() {
  no_mpi("MPI initialization");
}
int world_rank() {
  no_mpi("the MPI world rank");
}
int world_size() {
  no_mpi("the MPI world size");
}
std::string broadcast(const std::string&, int, std::chrono::milliseconds, const char*) {
  no_mpi("broadcast over MPI");
}
std::string error_string(int) {
  no_mpi("an MPI error string");
}
std::unique_lock<std::mutex> call_lock() {
  no_mpi("MPI call serialization");
}

#endif  // KOLO_HAVE_MPI

}  // namespace kolo::bootstrap::mpi_world
