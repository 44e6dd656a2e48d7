// Communicator lifecycle: rendezvous (init/create), host topology, transport choice, split.
#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <numeric>

#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/log.h"
#include "comm/bootstrap/host.h"
#include "comm/bootstrap/launch_env.h"
#include "comm/bootstrap/mpi_world.h"
#include "comm/bootstrap/store.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/net/auth.h"
#include "comm/net/socket.h"
#include "comm/reduce/reduce.h"
#include "comm/transport/context.h"

namespace kolo {
namespace {

// Open MPI says how many ranks share this host; when all do, the store stays on loopback.
bool mpi_job_on_one_host(int size) {
  return env::get_int("OMPI_COMM_WORLD_LOCAL_SIZE", -1, -1, 1 << 20) == size;
}

// Under mpirun and srun, rank 0 shares the store's address and the job secret over MPI: its
// own (KOLO_SECRET or KOLO_SECRET_FILE), else a fresh one, so these jobs are authenticated
// without the user doing anything. A rank with a secret of its own keeps it.
// Where this rank's secret came from, for the log (never the secret itself).
std::string secret_origin(int rank) {
  if (env::get("KOLO_SECRET")) return "KOLO_SECRET";
  if (env::get("KOLO_SECRET_FILE")) return "KOLO_SECRET_FILE";
  return rank == 0 ? "this rank (made now)" : "rank 0 over MPI";
}

void rendezvous_over_mpi(bootstrap::LaunchInfo* info, uint64_t generation,
                         std::chrono::milliseconds timeout,
                         std::unique_ptr<bootstrap::TcpStoreServer>* server) {
  const std::string no_address = "launched by " + info->launcher +
                                 " but no rendezvous address is set: set KOLO_ADDR and KOLO_PORT "
                                 "(or MASTER_ADDR and MASTER_PORT)";
  // Ranks from kolorun-style or torchrun-style variables are no MPI job: MPI_Init would make
  // each a world of its own, with nobody to share the address.
  KOLO_CHECK_ARG(info->launcher == "mpi" || info->launcher == "slurm", no_address);
  KOLO_CHECK_ARG(bootstrap::mpi_world::available(), no_address,
                 ", or build kolo with MPI (KOLO_WITH_MPI)");
  bootstrap::mpi_world::ensure_initialized();
  KOLO_CHECK_ARG(bootstrap::mpi_world::world_size() == info->size, no_address,
                 ", or start the job with mpirun or srun: the launcher's variables say ",
                 info->size, " ranks but MPI's world has ", bootstrap::mpi_world::world_size(),
                 " (variables set by hand?)");
  // Both the same size, but rank variables left from another launcher (a batch script's
  // SLURM_PROCID) would give two processes one rank: they would fail on each other's secret.
  KOLO_CHECK_ARG(bootstrap::mpi_world::world_rank() == info->rank, "the ", info->launcher,
                 " launcher's variables say this process is rank ", info->rank, " but it is rank ",
                 bootstrap::mpi_world::world_rank(),
                 " of MPI's world: variables left from another launcher? Unset them, or start the "
                 "job with the launcher they come from");
  // Rank 0's failure (a bad KOLO_SECRET_FILE, a port in use) travels in the broadcast too:
  // MPI's broadcast has no deadline, so the others must not wait for a message never sent.
  constexpr char kFailed = '!';
  constexpr const char* kRendezvous = "the rendezvous over MPI (kolo's init)";
  std::string message;
  if (info->rank == 0) {
    try {
      std::string secret = net::job_secret();
      if (secret.empty()) {
        secret = net::make_secret();
        net::set_job_secret(secret);
      }
      const bool local = mpi_job_on_one_host(info->size);
      *server = std::make_unique<bootstrap::TcpStoreServer>(local ? "127.0.0.1" : "0.0.0.0",
                                                            info->port, generation);
      message = (local ? std::string("127.0.0.1") : net::routable_address()) + ":" +
                std::to_string((*server)->port()) + "\n" + secret;
    } catch (const Error& e) {
      bootstrap::mpi_world::broadcast(kFailed + std::string(e.what()), 0, timeout, kRendezvous);
      throw;
    }
  }
  message = bootstrap::mpi_world::broadcast(message, 0, timeout, kRendezvous);
  if (!message.empty() && message[0] == kFailed)
    KOLO_THROW(ErrorCode::kPeerLost,
               "rank 0 could not open the rendezvous over MPI: ", message.substr(1));
  KOLO_LOG(kInfo, "rendezvous over MPI: the store is at ", message.substr(0, message.find('\n')),
           ", the job secret comes from ", secret_origin(info->rank));
  size_t newline = message.find('\n');
  std::string where = message.substr(0, newline);
  if (info->rank != 0 && net::job_secret().empty())
    net::set_job_secret(message.substr(newline + 1));
  info->addr = where.substr(0, where.rfind(':'));
  info->port = std::stoi(where.substr(where.rfind(':') + 1));
}

// Where rank 0's store listens and how the others find it; `generation`: this process's count
// of stores (tcp_store.h). Sets options->store_on_loopback.
std::shared_ptr<bootstrap::Store> connect_store(bootstrap::LaunchInfo info,
                                                std::chrono::milliseconds timeout,
                                                uint64_t generation, CommunicatorOptions* options) {
  std::unique_ptr<bootstrap::TcpStoreServer> server;
  if (info.addr.empty() || info.port == 0) {
    rendezvous_over_mpi(&info, generation, timeout, &server);
  } else {
    // A bad KOLO_SECRET_FILE or address is refused here, on every rank that names it, before
    // any rank waits for another.
    (void)net::job_secret();
    net::require_ipv4_host(info.addr, info.addr_var);
    // Every rank refuses an exposed store without a secret, so every rank names the fix.
    net::require_secret_for(info.addr, "the rendezvous store (" + info.launcher + " launch, " +
                                           info.addr_var + "=" + info.addr + ")");
    if (info.rank == 0) {
      // A loopback address keeps the store off the network; otherwise listen everywhere.
      std::string bind = net::is_loopback(info.addr) ? "127.0.0.1" : "0.0.0.0";
      try {
        server = std::make_unique<bootstrap::TcpStoreServer>(bind, info.port, generation);
      } catch (const Error& e) {
        if (e.message().find("Address already in use") == std::string::npos) throw;
        KOLO_THROW(e.code(), e.message(), ": the rendezvous port ", info.port,
                   " is taken, by another job or by a second process that is also rank 0; pick "
                   "another port (KOLO_PORT / MASTER_PORT) or check each process's rank");
      }
    }
  }
  if (!net::is_loopback(info.addr) && net::job_secret().empty())
    KOLO_LOG(kWarning, "KOLO_INSECURE=1: the store at ", info.addr, ":", info.port,
             " and the tcp transport accept connections without authentication; anyone who can "
             "reach them can join or read this job (docs/security.md)");
  options->store_on_loopback = net::is_loopback(info.addr);
  std::shared_ptr<bootstrap::TcpStore> store;
  try {
    store =
        std::make_shared<bootstrap::TcpStore>(info.addr, info.port, info.rank, timeout, generation);
  } catch (const Error& e) {
    // Rank 0 hosts the store: an address that reaches no one, or another host, left every rank
    // waiting with "is the peer running?" and no word of where the address came from.
    if (e.code() != ErrorCode::kTimeout && e.code() != ErrorCode::kIo) throw;
    const std::string from = info.addr_var.empty() ? std::string("shared by rank 0 over MPI")
                                                   : info.addr_var + "=" + info.addr + ", port " +
                                                         std::to_string(info.port);
    KOLO_THROW(e.code(), e.message(),
               ": the rendezvous store, which rank 0 hosts, was not reached (", from,
               "; it must name rank 0's host, reachable from this one)");
  }
  if (server) store->host_server(std::move(server));
  return store;
}

TransportKind resolve_transport(const CommunicatorOptions& options, int hosts) {
  TransportKind requested = options.transport;
  if (requested == TransportKind::kAuto)
    if (auto text = env::get("KOLO_TRANSPORT"))
      requested = parse_transport(*text, "KOLO_TRANSPORT");
  if (requested == TransportKind::kAuto) {
    if (hosts == 1) return TransportKind::kShm;
    return options.launched_by_mpi && bootstrap::mpi_world::available() ? TransportKind::kMpi
                                                                        : TransportKind::kTcp;
  }
  KOLO_CHECK_ARG(requested != TransportKind::kShm || hosts == 1,
                 "transport 'shm' needs every rank on one host, but the ranks are on ", hosts,
                 " hosts (KOLO_HOSTNAME / KOLO_TRANSPORT)");
  return requested;
}

// Ranks that chose another transport would wait for each other in setup, and another
// algorithm sends other messages: every rank compares them first and fails naming both values.
void require_same_choices(bootstrap::Store& store, int rank, int size, const std::string& transport,
                          const std::string& algorithm, std::chrono::milliseconds timeout) {
  auto all = bootstrap::store_allgather(store, "choices", rank, size, transport + " " + algorithm,
                                        timeout);
  std::vector<std::string> transports, algorithms;
  for (const std::string& choice : all) {
    size_t space = choice.find(' ');
    transports.push_back(choice.substr(0, space));
    algorithms.push_back(space == std::string::npos ? "" : choice.substr(space + 1));
  }
  bootstrap::require_same_on_every_rank(
      "the transport (KOLO_TRANSPORT, or the program's transport option)", transports, rank);
  bootstrap::require_same_on_every_rank("KOLO_ALGORITHM", algorithms, rank);
}

// Every setting of the communicator, its transports and the reductions is read before the
// rendezvous: a bad one fails each rank with its own message. Read later, rank 0's failure
// closed the store under the others, who saw only that (and kolorun could stop rank 0 before
// it had printed).
void check_settings() {
  if (auto text = env::get("KOLO_TRANSPORT")) parse_transport(*text, "KOLO_TRANSPORT");
  parse_algorithm(env::get_or("KOLO_ALGORITHM", "auto"), "KOLO_ALGORITHM");
  (void)reduce::best_isa();
  (void)log::threshold();
  (void)net::insecure_allowed();
  transport::check_transport_settings();
}

// A timeout given in the options is held to KOLO_TIMEOUT_SECONDS's range: 0 or 10^10 s failed
// every first connect at once, blaming the peer.
void check_timeout(const CommunicatorOptions& options) {
  if (!options.timeout) return;
  const double seconds = static_cast<double>(options.timeout->count()) / 1000.0;
  KOLO_CHECK_ARG(seconds >= env::kMinTimeoutSeconds && seconds <= env::kMaxTimeoutSeconds,
                 "the communicator's timeout of ", seconds, " s is outside [",
                 env::kMinTimeoutSeconds, ", ", env::kMaxTimeoutSeconds,
                 "] (the range of KOLO_TIMEOUT_SECONDS)");
}

std::vector<int> all_ranks(int size) {
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

// Handshake tags are at most 64 bytes; deep split chains are hashed down.
std::string bounded_tag(const std::string& tag) {
  if (tag.size() <= 48) return tag;
  return "h" + std::to_string(std::hash<std::string>{}(tag));
}

}  // namespace

std::shared_ptr<Communicator> Communicator::init(const CommunicatorOptions& given) {
  auto info = bootstrap::detect_launch();
  log::set_rank(info.rank);
  // A bad setting fails this rank with its own message before any wait, and is left in the
  // store too (below), so that the others' setup waits quote it rather than wait out the timeout.
  std::exception_ptr bad_setting;
  try {
    check_settings();
  } catch (const Error&) {
    bad_setting = std::current_exception();
  }
  CommunicatorOptions options = given;
  options.launched_by_mpi = info.launcher == "mpi";
  check_timeout(options);
  auto timeout = options.timeout.value_or(env::timeout());
  // A process may call init() again while a communicator of an earlier call lives (a script's
  // own kolo.Communicator.init() next to hvd.init()): rank 0 cannot host a second store on
  // the launcher's port, so the later calls join the earlier store, each under a tag of its
  // own ("w2", "w3", ...). Every rank makes the same calls in the same order, so the tags agree.
  static std::mutex mutex;
  static std::weak_ptr<bootstrap::Store> earlier;
  static std::string earlier_launch;
  static bool earlier_loopback = true;
  static int calls = 0;
  static uint64_t generation = 0;  // stores this process has made (tcp_store.h)
  std::unique_lock<std::mutex> lock(mutex);
  // The process too: a forked child must not share its parent's store connection.
  std::string launch = info.launcher + " " + info.addr + ":" + std::to_string(info.port) + " " +
                       std::to_string(info.rank) + "/" + std::to_string(info.size) + " pid " +
                       std::to_string(::getpid());
  std::shared_ptr<bootstrap::Store> store = earlier.lock();
  if (store && launch == earlier_launch) {
    options.store_on_loopback = earlier_loopback;
    ++calls;
  } else {
    try {
      store = info.size == 1 ? std::make_shared<bootstrap::MemoryStore>()
                             : connect_store(info, timeout, ++generation, &options);
    } catch (const Error&) {
      if (bad_setting) std::rethrow_exception(bad_setting);  // the cause, not its consequence
      throw;
    }
    earlier = store;
    earlier_launch = launch;
    earlier_loopback = options.store_on_loopback;
    calls = 1;
  }
  std::string tag = calls > 1 ? "w" + std::to_string(calls) : "w";
  lock.unlock();
  if (bad_setting) {
    try {
      std::rethrow_exception(bad_setting);
    } catch (const Error& e) {
      bootstrap::PrefixStore prefixed(store, tag);  // the communicator's keys, as build() has them
      bootstrap::leave_setup_reason(prefixed, info.rank, "rank " + std::to_string(info.rank),
                                    e.what());
      bootstrap::linger_before_verdict(info.rank);
      throw;
    }
  }
  KOLO_LOG(kInfo, "init: launcher ", info.launcher, ", rank ", info.rank, " of ", info.size,
           ", communicator ", tag);
  return build(std::move(store), tag, info.rank, info.size, all_ranks(info.size), options);
}

std::shared_ptr<Communicator> Communicator::create(std::shared_ptr<bootstrap::Store> store,
                                                   int rank, int size,
                                                   const CommunicatorOptions& options) {
  KOLO_CHECK_ARG(store != nullptr, "Communicator::create needs a store");
  KOLO_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "rank ", rank,
                 " is not in [0, size) for size ", size);
  check_timeout(options);
  return build(std::move(store), "w", rank, size, all_ranks(size), options);
}

std::shared_ptr<Communicator> Communicator::build(std::shared_ptr<bootstrap::Store> base,
                                                  std::string tag, int rank, int size,
                                                  std::vector<int> world_ranks,
                                                  const CommunicatorOptions& options) {
  std::shared_ptr<Communicator> comm(new Communicator());
  comm->base_store_ = base;
  comm->tag_ = bounded_tag(tag);
  comm->rank_ = rank;
  comm->size_ = size;
  comm->world_ranks_ = std::move(world_ranks);
  comm->options_ = options;
  auto timeout = options.timeout.value_or(env::timeout());
  auto store = std::make_shared<bootstrap::PrefixStore>(base, comm->tag_);
  comm->store_ = store;

  // Each rank's job size, host identity and, after the last newline, the CPUs it may run on.
  // Two processes with one rank, or ranks told different sizes, would wait for a rank that
  // never comes: each names the fault instead.
  const int64_t claims = store->add("claim/" + std::to_string(rank), 1);
  KOLO_CHECK_ARG(claims == 1, "rank ", rank, " of ", size,
                 " was claimed on this rendezvous store already: by a second process with that "
                 "rank (every process needs a rank of its own: KOLO_RANK / RANK / SLURM_PROCID), "
                 "or by an earlier communicator of this process on the same store");
  // A rank that gives up from here on leaves its reason in the store, where the others'
  // waits for it look (bootstrap::wait_for_key): they fail at once quoting it, instead of
  // waiting out the timeout for a rank that "did not arrive".
  auto connect = [&] {
    auto same_size = [size](int r, const std::string& value) {
      const std::string theirs = value.substr(0, value.find('\n'));
      if (theirs != std::to_string(size))
        KOLO_THROW(ErrorCode::kMismatch, "the job size differs between ranks: this rank was told ",
                   size, ", rank ", r, " was told ", theirs,
                   " (KOLO_SIZE / WORLD_SIZE / SLURM_NTASKS, or kolorun's -np on each host)");
    };
    auto hosts =
        bootstrap::store_allgather(*store, "host", rank, size,
                                   std::to_string(size) + "\n" + bootstrap::host_identity() + "\n" +
                                       bootstrap::cpu_mask_text(),
                                   timeout, same_size);
    std::vector<std::string> cpu_masks;
    for (std::string& host : hosts) {
      host.erase(0, host.find('\n') + 1);
      const size_t cut = host.rfind('\n');
      cpu_masks.push_back(cut == std::string::npos ? "" : host.substr(cut + 1));
      if (cut != std::string::npos) host.resize(cut);
    }
    auto topo = bootstrap::compute_topology(hosts, rank, cpu_masks);
    comm->local_rank_ = topo.local_rank;
    comm->local_size_ = topo.local_size;
    comm->cross_rank_ = topo.cross_rank;
    comm->cross_size_ = topo.cross_size;
    comm->host_of_rank_ = topo.host_of_rank;
    comm->host_cpus_ = topo.host_cpus;
    comm->transport_ = resolve_transport(options, topo.cross_size);
    const std::string algorithm = env::get_or("KOLO_ALGORITHM", "auto");
    comm->env_algorithm_ = parse_algorithm(algorithm, "KOLO_ALGORITHM");
    if (size > 1)
      require_same_choices(*store, rank, size, transport_name(comm->transport_), algorithm,
                           timeout);
    if (size > 1) {
      // Across hosts, tcp must listen on an address the other hosts can reach: the one this rank
      // reaches the store from (the first non-loopback address of the host may be on an
      // interface the others cannot reach), else that first address.
      const bool remote_peers = topo.cross_size > 1 && !options.store_on_loopback;
      std::string bind;
      if (remote_peers && !env::get("KOLO_TCP_ADDR")) {
        bind = store->local_address();
        if (bind.empty() || net::is_loopback(bind)) bind = net::routable_address();
      }
      transport::ContextOptions ctx{store,
                                    comm->tag_,
                                    rank,
                                    size,
                                    comm->world_ranks_,
                                    topo.cross_size > 1 ? hosts : std::vector<std::string>{},
                                    timeout,
                                    bind,
                                    topo.host_cpus,
                                    options.store_on_loopback};
      comm->context_ = transport::create_context(comm->transport_, ctx);
      comm->shared_ = comm->context_->shared_memory();
    }
  };
  try {
    connect();
  } catch (const std::exception& e) {
    const int world = comm->world_ranks_[static_cast<size_t>(rank)];
    bootstrap::leave_setup_reason(
        *store, rank,
        "rank " + std::to_string(rank) +
            (world != rank ? " (world rank " + std::to_string(world) + ")" : std::string()),
        e.what());
    bootstrap::linger_before_verdict(rank);  // rank 0 hosts the store: let the others read it
    throw;
  }
  KOLO_LOG(kDebug, "communicator ", comm->tag_, ": rank ", rank, " of ", size, ", transport ",
           transport_name(comm->transport_), ", ", comm->cross_size_, " host(s)");
  return comm;
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  return split_with(color, key, options_);
}

std::shared_ptr<Communicator> Communicator::split_with(int color, int key,
                                                       const CommunicatorOptions& options) {
  KOLO_CHECK_ARG(color >= 0 || color == kUndefinedColor, "split color ", color,
                 " is invalid; use a color >= 0 or kUndefinedColor");
  int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  CollectiveOptions flat;  // the hierarchical collectives split: they must not be used here
  if (choose_algorithm(Collective::kAllgather, sizeof mine * all.size() / 2) ==
      Algorithm::kHierarchical)
    flat.algorithm = Algorithm::kRing;
  allgather(mine, all.data(), 2, DType::kInt64, flat);
  const int seq = splits_++;
  if (color == kUndefinedColor) return nullptr;
  std::vector<int> members;
  for (int p = 0; p < size_; ++p)
    if (all[2 * static_cast<size_t>(p)] == color) members.push_back(p);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
  });
  int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  std::vector<int> world;
  for (int p : members) world.push_back(world_ranks_[static_cast<size_t>(p)]);
  std::string tag = tag_ + ".s" + std::to_string(seq) + "c" + std::to_string(color);
  return build(base_store_, tag, new_rank, static_cast<int>(members.size()), std::move(world),
               options);
}

std::shared_ptr<Communicator> Communicator::local() {
  if (!local_) local_ = split(cross_rank_, rank_);
  return local_;
}

std::shared_ptr<Communicator> Communicator::cross() {
  if (!cross_) cross_ = split(local_rank_, rank_);
  return cross_;
}

std::vector<std::string> allgather_bytes(Communicator& comm, const std::string& mine) {
  const size_t n = static_cast<size_t>(comm.size());
  int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(n);
  comm.allgather(&my_size, sizes.data(), 1, DType::kInt64);
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  std::string all(std::accumulate(counts.begin(), counts.end(), size_t{0}), '\0');
  comm.allgatherv(mine.data(), mine.size(), all.data(), counts, DType::kUInt8);
  std::vector<std::string> out;
  for (size_t r = 0, at = 0; r < n; at += counts[r++]) out.push_back(all.substr(at, counts[r]));
  return out;
}

}  // namespace kolo
