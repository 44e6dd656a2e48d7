// kolorun: the single-host launcher of kolo. Starts N ranks of a command with the KOLO_*
// rendezvous environment, forwards their output line by line with a "[rank] " prefix, and stops
// the whole job as soon as one rank fails or kolorun itself is interrupted.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/bootstrap/host.h"
#include "comm/net/auth.h"
#include "comm/transport/shm/context.h"
#include "tools/kolorun/kolorun_hosts.h"
#include "tools/kolorun/kolorun_options.h"
#include "tools/kolorun/kolorun_output.h"

namespace kolo::kolorun {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;
constexpr int kGroupPollMs = 50;  // re-check for leftover processes while stopping
// How long the other ranks may take to end on their own after one failed (begin_stop).
constexpr auto kSettle = std::chrono::seconds(1);

// --secret-stdin: the first line of stdin, which kolorun --hosts wrote into the remote shell's
// stdin; refused when it does not come within 30 s or is empty.
std::string secret_from_stdin() {
  std::string line;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  char c = 0;
  while (line.size() < 4096) {
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || poll(&in, 1, static_cast<int>(left)) <= 0 || read(STDIN_FILENO, &c, 1) != 1 ||
        c == '\n')
      break;
    line += c;
  }
  KOLO_CHECK_ARG(!line.empty() && c == '\n',
                 "--secret-stdin: no secret line on stdin (kolorun --hosts writes the job's secret "
                 "to the remote shell's stdin, so --rsh must pass stdin on, as ssh does without "
                 "-n; run by hand, give KOLO_SECRET or KOLO_SECRET_FILE instead)");
  return line;
}

// The kernel picks a free port for port 0; it is released again for rank 0 to bind. Someone
// else could take it in between, which --port avoids.
int find_free_port(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) KOLO_THROW_ERRNO("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof sa;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  int saved = errno;
  close(fd);
  errno = saved;
  if (!ok) KOLO_THROW_ERRNO("cannot find a free port on --addr ", addr, " (or pass --port)");
  return ntohs(sa.sin_port);
}

std::string signal_name(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
#endif
  const char* text = strsignal(sig);
  return text ? text : "unknown";
}

// Signal handlers only record what happened and wake the poll() loop through a self-pipe; all
// the work happens in the loop, outside signal context.
volatile sig_atomic_t g_child_exited = 0;
volatile sig_atomic_t g_stop_signal = 0;  // the last SIGINT/SIGTERM kolorun received
volatile sig_atomic_t g_stop_count = 0;
int g_wake_fd = -1;

void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGCHLD) {
    g_child_exited = 1;
  } else {
    g_stop_signal = sig;
    g_stop_count = g_stop_count + 1;
  }
  char byte = 0;
  ssize_t ignored = write(g_wake_fd, &byte, 1);  // a full pipe already means "wake up"
  (void)ignored;
  errno = saved;
}

void make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) KOLO_THROW_ERRNO("pipe (raise ulimit -n for a large -np)");
}

struct Rank {
  pid_t pid = -1;  // also the id of its process group
  bool running = false;
  Stream out, err;
};

class Launcher {
 public:
  explicit Launcher(Options opts)
      : opts_(std::move(opts)),
        ranks_(opts_.hosts.empty() ? opts_.np : static_cast<int>(opts_.hosts.size())) {}
  ~Launcher();
  int run();

 private:
  void setup();
  void spawn(int rank);
  void remove_leftover_segments() const;
  [[noreturn]] void exec_rank(int rank, pid_t launcher, int out_fd, int err_fd, int status_fd);
  int first_rank() const { return opts_.node_rank * opts_.np; }
  // What child `i` is, for messages: "rank 5" (the job's rank), or with --hosts "host 1
  // (10.0.0.2)'s remote shell 'ssh'".
  std::string child_name(int i) const;
  // The program child `i` execs: CMD, or with --hosts the remote shell.
  std::string child_program(int i) const;
  void check_exec(int rank, int status_fd);
  void wait_for_events();
  int poll_timeout_ms() const;
  void handle_signals();
  void on_rank_exit(Rank& r, int rank, int status);
  // Stops the ranks with `sig`, after `delay` (SIGKILL follows --grace seconds later). After a
  // rank failed the others get kSettle to end on their own first: a bad setting or a lost peer
  // fails them too, and each says why.
  void begin_stop(int exit_code, int sig, Clock::duration delay = Clock::duration::zero());
  void kill_stragglers(bool deadline);
  void signal_groups(int sig);
  bool any_group_alive() const;

  Options opts_;
  std::vector<Rank> ranks_;
  int running_ = 0;
  int exit_code_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  int stops_seen_ = 0;
  Clock::time_point deadline_;
  int pending_signal_ = 0;  // begin_stop's signal while its delay runs, sent at signal_at_
  Clock::time_point signal_at_;
  int wake_[2] = {-1, -1};
  std::optional<rlimit> fd_limit_;  // as kolorun found it, restored in the ranks
  std::unique_ptr<Binder> binder_;  // --bind: loaded before the ranks are forked
};

Launcher::~Launcher() {
  // Only reached with ranks running if the loop itself failed: leave no orphans behind.
  for (Rank& r : ranks_)
    if (r.running) kill(-r.pid, SIGKILL);
}

void Launcher::setup() {
  if (opts_.secret_stdin) setenv("KOLO_SECRET", secret_from_stdin().c_str(), 1);
  if (opts_.hosts.empty()) binder_ = std::make_unique<Binder>(opts_.bind);
  // Each rank holds two pipes; raise the soft descriptor limit as far as allowed.
  if (rlimit limit; getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    fd_limit_ = limit;
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
#ifdef __linux__
  // Orphaned grandchildren get reparented to kolorun and reaped here, so no zombies linger and
  // "are a rank's processes gone?" has a prompt answer even under a non-reaping init.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) KOLO_THROW_ERRNO("pipe");
  g_wake_fd = wake_[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NOCLDSTOP;
  for (int sig : {SIGCHLD, SIGINT, SIGTERM}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher (see write_all)

  // --hosts hands KOLO_SECRET on as one line of at most 4096 bytes (secret_from_stdin).
  if (std::optional<std::string> secret = env::get("KOLO_SECRET"); secret && !opts_.hosts.empty())
    KOLO_CHECK_ARG(secret->size() <= 4096 && secret->find('\n') == std::string::npos,
                   "KOLO_SECRET: with --hosts, the secret must be one line of at most 4096 bytes "
                   "(it has ",
                   secret->size(), " bytes",
                   secret->find('\n') == std::string::npos ? "" : " and a line break", ")");
  const std::string np = std::to_string(opts_.np);
  int port = opts_.port ? opts_.port : find_free_port(opts_.addr);
  if (opts_.nnodes > 1 && !env::get("KOLO_SECRET") && !env::get("KOLO_SECRET_FILE") &&
      !net::insecure_allowed())
    KOLO_THROW(ErrorCode::kInvalidArgument, "--nnodes ", opts_.nnodes,
               ": set the same KOLO_SECRET (or KOLO_SECRET_FILE) on every host (or "
               "KOLO_INSECURE=1 on a trusted network), so the hosts' ranks can prove they belong "
               "to this job; kolorun --hosts makes one for you");
  setenv("KOLO_SIZE", std::to_string(opts_.nnodes * opts_.np).c_str(), 1);
  setenv("KOLO_LOCAL_SIZE", np.c_str(), 1);
  setenv("KOLO_ADDR", opts_.addr.c_str(), 1);
  setenv("KOLO_PORT", std::to_string(port).c_str(), 1);
  setenv("KOLO_LAUNCHER", "kolorun", 1);
  // The ranks' math libraries share the host's CPUs instead of each starting a thread per CPU
  // (OpenBLAS and OpenMP do by default), unless the user chose (empty counts as unset, as for
  // every KOLO_* variable: OpenMP would take it for one thread per CPU).
  const std::string threads = std::to_string(std::max(1, bootstrap::usable_cpus() / opts_.np));
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    if (!env::get(name)) setenv(name, threads.c_str(), 1);
  // Every job is authenticated: a secret of the user's (KOLO_SECRET, KOLO_SECRET_FILE) or a fresh
  // one.
  if (!env::get("KOLO_SECRET") && !env::get("KOLO_SECRET_FILE"))
    setenv("KOLO_SECRET", net::make_secret().c_str(), 1);
}

int Launcher::run() {
  setup();
  for (int i = 0; i < static_cast<int>(ranks_.size()) && !stopping_; ++i) {
    try {
      spawn(i);
    } catch (const Error& e) {
      std::fprintf(stderr, "kolorun: cannot start %s: %s\n", child_name(i).c_str(), e.what());
      begin_stop(kExitFailure, SIGTERM);
    }
    handle_signals();  // a Ctrl-C or a failure during a long launch stops it early
  }
  while (running_ > 0 || (stopping_ && !killed_ && any_group_alive())) {
    wait_for_events();
    handle_signals();
    if (pending_signal_ != 0 && Clock::now() >= signal_at_) {
      signal_groups(pending_signal_);
      pending_signal_ = 0;
    }
    if (stopping_ && !killed_ && Clock::now() >= deadline_) kill_stragglers(true);
  }
  // Pipes can still be open when a rank left a process behind that holds them.
  for (Rank& r : ranks_) {
    finish(r.out);
    finish(r.err);
  }
  remove_leftover_segments();
  return exit_code_;
}

// A rank killed while its communicator was being set up can leave its shared-memory segment's
// name in /dev/shm (comm/transport/shm/context.h). Once the job is over, the names chosen by
// this job's ranks are removed.
void Launcher::remove_leftover_segments() const {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  int removed = 0;
  while (dirent* entry = readdir(dir)) {
    const int pid = transport::shm::segment_creator_pid(entry->d_name);
    if (pid <= 0) continue;
    bool ours =
        std::any_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.pid == pid; });
    if (ours && shm_unlink((std::string("/") + entry->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  if (removed > 0)
    std::fprintf(stderr,
                 "kolorun: removed %d shared-memory segment(s) left in /dev/shm by ranks that "
                 "died during setup\n",
                 removed);
}

void Launcher::spawn(int rank) {
  int out[2], err[2], status[2];
  make_pipe(out);
  make_pipe(err);
  make_pipe(status);
  // Until the child has reset its handlers, a signal must not run kolorun's handler in it.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old);
  // Forked by the main thread, which lives as long as kolorun: the child's parent-death signal
  // (exec_rank) fires when the forking thread ends, not the process.
  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) exec_rank(rank, launcher, out[1], err[1], status[1]);
  int fork_errno = errno;
  if (pid > 0) setpgid(pid, pid);  // the child does it too; whichever runs first wins the race
  sigprocmask(SIG_SETMASK, &old, nullptr);
  for (int fd : {out[1], err[1], status[1]}) close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], status[0]}) close(fd);
    errno = fork_errno;
    KOLO_THROW_ERRNO("fork");
  }
  Rank& r = ranks_[rank];
  r.pid = pid;
  r.running = true;
  ++running_;
  // With --hosts each host's kolorun prefixes its ranks' lines itself.
  const bool prefixed = opts_.prefix && opts_.hosts.empty();
  std::string prefix = prefixed ? "[" + std::to_string(first_rank() + rank) + "] " : "";
  // The lines of a host's kolorun are at most kMaxLineBytes and its prefix long: whole here.
  const size_t max_line = opts_.hosts.empty() ? kMaxLineBytes : kMaxLineBytes + 64;
  r.out = Stream{out[0], STDOUT_FILENO, prefix, max_line, ""};
  r.err = Stream{err[0], STDERR_FILENO, prefix, max_line, ""};
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  check_exec(rank, status[0]);
}

// In the forked child: never returns. kolorun is single-threaded, so setenv is safe here.
void Launcher::exec_rank(int rank, pid_t launcher, int out_fd, int err_fd, int status_fd) {
  // Its own process group lets kolorun signal the rank together with anything it starts; the
  // terminal's Ctrl-C then reaches only kolorun, which forwards it once.
  setpgid(0, 0);
#ifdef __linux__
  // A kolorun that dies without stopping its job (SIGKILL, a crash) takes the rank (with
  // --hosts: the remote shell) along: SIGTERM, kept across exec. Set while SIGTERM is still
  // blocked, so it waits for the default action restored below.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGPIPE}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // kolorun died between fork and prctl: the signal will never come, so end as if it had.
  if (getppid() != launcher) raise(SIGTERM);
  if (fd_limit_) setrlimit(RLIMIT_NOFILE, &*fd_limit_);
  // stdin is /dev/null: a rank outside the terminal's foreground group would stop on reading it.
  // A host's remote shell reads the job's secret there instead (--secret-stdin): a pipe that
  // holds its one line, off every command line and environment that `ps` shows.
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  std::vector<std::string> words;  // the remote shell's, made while KOLO_SECRET is still set
  if (!opts_.hosts.empty()) {
    words = host_command(opts_, rank);
    if (std::optional<std::string> secret = env::get("KOLO_SECRET")) {
      int secret_pipe[2];
      if (pipe(secret_pipe) == 0) {
        const std::string line = *secret + "\n";  // at most a page: the pipe holds it
        if (write(secret_pipe[1], line.data(), line.size()) == static_cast<ssize_t>(line.size()))
          dup2(secret_pipe[0], STDIN_FILENO);
        close(secret_pipe[0]);
        close(secret_pipe[1]);
      }
      unsetenv("KOLO_SECRET");  // the remote shell's own environment does not hold it either
    }
  }
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  if (!opts_.hosts.empty()) {
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
  } else {
    try {
      binder_->bind(rank, opts_.np);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kolorun: rank %d: %s\n", first_rank() + rank, e.what());
      _exit(126);
    }
    setenv("KOLO_RANK", std::to_string(first_rank() + rank).c_str(), 1);
    setenv("KOLO_LOCAL_RANK", std::to_string(rank).c_str(), 1);
    execvp(opts_.cmd[0], opts_.cmd.data());
  }
  int e = errno;
  ssize_t ignored = write(status_fd, &e, sizeof e);
  (void)ignored;
  _exit(e == ENOENT ? 127 : 126);
}

// The status pipe is close-on-exec: EOF means exec succeeded, an errno means it failed. A
// failed exec stops the launch at once with one clear message instead of N rank failures.
void Launcher::check_exec(int rank, int status_fd) {
  int e = 0;
  ssize_t n;
  do {
    n = read(status_fd, &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(status_fd);
  if (n != static_cast<ssize_t>(sizeof e)) return;
  if (opts_.hosts.empty())
    std::fprintf(stderr, "kolorun: %s: cannot execute '%s': %s\n", child_name(rank).c_str(),
                 opts_.cmd[0], std::strerror(e));
  else
    std::fprintf(stderr, "kolorun: cannot execute %s: %s\n", child_name(rank).c_str(),
                 std::strerror(e));
  begin_stop(e == ENOENT ? 127 : 126, SIGTERM);
}

std::string Launcher::child_program(int i) const {
  return opts_.hosts.empty() ? std::string(opts_.cmd[0]) : host_command(opts_, i).at(0);
}

std::string Launcher::child_name(int i) const {
  if (opts_.hosts.empty()) return "rank " + std::to_string(first_rank() + i);
  return "host " + std::to_string(i) + " (" + opts_.hosts[static_cast<size_t>(i)] +
         ")'s remote shell '" + child_program(i) + "'";
}

void Launcher::wait_for_events() {
  std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
  std::vector<Stream*> streams;
  for (Rank& r : ranks_) {
    for (Stream* s : {&r.out, &r.err}) {
      if (s->fd < 0) continue;
      fds.push_back({s->fd, POLLIN, 0});
      streams.push_back(s);
    }
  }
  int n = poll(fds.data(), fds.size(), poll_timeout_ms());
  if (n < 0 && errno == EINTR) return;
  if (n < 0) KOLO_THROW_ERRNO("poll");
  if (fds[0].revents) {
    char buf[256];
    while (read(wake_[0], buf, sizeof buf) > 0) {
    }
  }
  for (size_t k = 1; k < fds.size(); ++k)
    if (fds[k].revents) pump(*streams[k - 1], false);
}

// Blocks until output or a signal arrives; only a pending SIGKILL deadline sets a timeout.
int Launcher::poll_timeout_ms() const {
  if (!stopping_ || killed_) return -1;
  const Clock::time_point next = pending_signal_ != 0 ? signal_at_ : deadline_;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  int ms = static_cast<int>(std::max<int64_t>(left, 0));
  // With every rank reaped there is no SIGCHLD left to wait for, only leftover processes.
  return running_ > 0 ? ms : std::min(ms, kGroupPollMs);
}

void Launcher::handle_signals() {
  if (g_child_exited) {
    g_child_exited = 0;  // cleared before reaping, so a later exit sets it again
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      // Other pids are orphaned grandchildren reaped as subreaper: nothing more to do.
      for (size_t i = 0; i < ranks_.size(); ++i)
        if (ranks_[i].running && ranks_[i].pid == pid)
          on_rank_exit(ranks_[i], static_cast<int>(i), status);
    }
  }
  int count = g_stop_count;
  if (count == stops_seen_) return;
  bool again = stops_seen_ > 0;
  stops_seen_ = count;
  int sig = g_stop_signal;
  if (again) {  // a second Ctrl-C: the user does not want to wait for the grace period
    std::fprintf(stderr, "kolorun: received %s again; killing the ranks\n",
                 signal_name(sig).c_str());
    kill_stragglers(false);
    return;
  }
  std::fprintf(stderr, "kolorun: received %s; forwarding it to the ranks\n",
               signal_name(sig).c_str());
  if (stopping_) {
    signal_groups(sig);
  } else {
    begin_stop(128 + sig, sig);
  }
}

void Launcher::on_rank_exit(Rank& r, int rank, int status) {
  r.running = false;
  --running_;
  // Its output is complete now: forward it before saying how the rank ended.
  pump(r.out, true);
  pump(r.err, true);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  // While stopping, exits are the expected result of the stop; the first failure is the cause.
  if (stopping_) return;
  if (WIFEXITED(status)) {
    std::fprintf(stderr, "kolorun: %s exited with code %d\n", child_name(rank).c_str(),
                 WEXITSTATUS(status));
    begin_stop(WEXITSTATUS(status), SIGTERM, kSettle);
  } else {
    int sig = WTERMSIG(status);
    std::fprintf(stderr, "kolorun: %s killed by signal %d (%s)\n", child_name(rank).c_str(), sig,
                 signal_name(sig).c_str());
    begin_stop(128 + sig, SIGTERM, kSettle);
  }
}

void Launcher::begin_stop(int exit_code, int sig, Clock::duration delay) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = exit_code;
  signal_at_ = Clock::now() + delay;
  deadline_ = signal_at_ + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(opts_.grace_s));
  if (delay > Clock::duration::zero())
    pending_signal_ = sig;
  else
    signal_groups(sig);
}

void Launcher::kill_stragglers(bool deadline) {
  for (size_t i = 0; i < ranks_.size() && deadline; ++i)
    if (ranks_[i].running)
      std::fprintf(stderr, "kolorun: %s still running %gs after SIGTERM; sending SIGKILL\n",
                   child_name(static_cast<int>(i)).c_str(), opts_.grace_s);
  signal_groups(SIGKILL);
  stopping_ = killed_ = true;
}

// Whole process groups, so whatever a rank started goes too, even after the rank exited.
void Launcher::signal_groups(int sig) {
  for (Rank& r : ranks_)
    if (r.pid > 0) kill(-r.pid, sig);
}

bool Launcher::any_group_alive() const {
  for (const Rank& r : ranks_)
    if (r.pid > 0 && kill(-r.pid, 0) == 0) return true;
  return false;
}

// Descriptors 0-2 must be open, or a pipe could land on them and be clobbered by dup2.
void ensure_std_fds() {
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
}

}  // namespace
}  // namespace kolo::kolorun

int main(int argc, char** argv) {
  using namespace kolo::kolorun;
  ensure_std_fds();
  std::optional<Options> opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const kolo::Error& e) {
    std::fprintf(stderr, "kolorun: %s (see kolorun --help)\n", e.what());
    return kExitUsage;
  }
  if (!opts) return 0;
  try {
    Launcher launcher(std::move(*opts));
    return launcher.run();
  } catch (const kolo::Error& e) {
    std::fprintf(stderr, "kolorun: %s\n", e.what());
    return kExitFailure;
  }
}
