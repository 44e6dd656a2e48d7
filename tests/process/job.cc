// ForkedJob: fork, run, report through a pipe, reap.
#include "tests/process/job.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "comm/base/error.h"
#include "comm/base/transport_kind.h"

namespace kolo::testing {

ForkedJob::ForkedJob(int size, TransportKind transport, double timeout_seconds)
    : size_(size), transport_(transport), timeout_seconds_(timeout_seconds) {
  // Forked before this process starts any thread; it serves until the destructor kills it.
  int fds[2];
  KOLO_ASSERT(::pipe(fds) == 0);
  server_pid_ = ::fork();
  KOLO_ASSERT(server_pid_ >= 0);
  if (server_pid_ == 0) {
    ::close(fds[0]);
    bootstrap::TcpStoreServer server("127.0.0.1", 0);
    const int port = server.port();
    ssize_t ignored = ::write(fds[1], &port, sizeof port);
    (void)ignored;
    ::close(fds[1]);
    while (true) ::pause();
  }
  ::close(fds[1]);
  KOLO_ASSERT(::read(fds[0], &store_port_, sizeof store_port_) == sizeof store_port_);
  ::close(fds[0]);
}

ForkedJob::~ForkedJob() {
  for (pid_t pid : pids_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  for (int fd : pipes_) ::close(fd);
  ::kill(server_pid_, SIGKILL);
  ::waitpid(server_pid_, nullptr, 0);
}

double ForkedJob::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ForkedJob::start(const std::function<void(Communicator&, int rank)>& body) {
  start_ = std::chrono::steady_clock::now();
  for (int rank = 0; rank < size_; ++rank) {
    int fds[2];
    KOLO_ASSERT(::pipe(fds) == 0);
    pid_t pid = ::fork();
    KOLO_ASSERT(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      for (const auto& [name, value] : env_[rank]) ::setenv(name.c_str(), value.c_str(), 1);
      if (auto cpu = cpu_.find(rank); cpu != cpu_.end()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu->second, &set);
        KOLO_ASSERT(::sched_setaffinity(0, sizeof set, &set) == 0);
      }
      std::string report = "ok";
      try {
        auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds_ * 1000));
        auto store = std::make_shared<bootstrap::TcpStore>("127.0.0.1", store_port_, rank, timeout);
        CommunicatorOptions options;
        options.transport = transport_;
        options.timeout = timeout;
        auto comm = Communicator::create(store, rank, size_, options);
        body(*comm, rank);
      } catch (const std::exception& e) {
        report = std::string("error ") + e.what();
      }
      ssize_t ignored = ::write(fds[1], report.data(), report.size());
      (void)ignored;
      ::_exit(0);
    }
    ::close(fds[1]);
    pids_.push_back(pid);
    pipes_.push_back(fds[0]);
  }
}

void mark_started(Communicator& comm) {
  comm.store()->set("started/" + std::to_string(comm.rank()), "1");
}

void ForkedJob::wait_started(double limit_seconds) {
  auto limit = std::chrono::milliseconds(static_cast<int64_t>(limit_seconds * 1000));
  bootstrap::TcpStore client("127.0.0.1", store_port_, -1, limit);
  for (int r = 0; r < size_; ++r) client.get("w/started/" + std::to_string(r), limit);
}

void ForkedJob::kill(int rank, int signal) {
  ::kill(pids_[static_cast<size_t>(rank)], signal);
}

std::vector<Outcome> ForkedJob::collect(double limit_seconds) {
  std::vector<Outcome> outcomes(static_cast<size_t>(size_));
  std::vector<std::string> text(static_cast<size_t>(size_));
  std::vector<bool> open(static_cast<size_t>(size_), true);
  int remaining = size_;
  while (remaining > 0 && elapsed() < limit_seconds) {
    std::vector<pollfd> fds;
    for (int r = 0; r < size_; ++r)
      if (open[static_cast<size_t>(r)]) fds.push_back({pipes_[static_cast<size_t>(r)], POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    for (int r = 0; r < size_; ++r) {
      size_t ur = static_cast<size_t>(r);
      if (!open[ur]) continue;
      pollfd p{pipes_[ur], POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(pipes_[ur], buf, sizeof buf);
      if (n > 0) {
        text[ur].append(buf, static_cast<size_t>(n));
        continue;
      }
      open[ur] = false;  // EOF: the child exited (or was killed)
      --remaining;
      outcomes[ur].exited = !text[ur].empty();
      outcomes[ur].ok = text[ur] == "ok";
      outcomes[ur].message = text[ur];
      outcomes[ur].seconds = elapsed();
    }
  }
  return outcomes;
}

}  // namespace kolo::testing
