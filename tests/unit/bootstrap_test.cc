// Bootstrap pieces: environment parsing, launcher detection, the stores, the handshake and
// host topology.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "comm/base/dtype.h"
#include "comm/base/env.h"
#include "comm/base/error.h"
#include "comm/base/reduce_op.h"
#include "comm/base/transport_kind.h"
#include "comm/bootstrap/host.h"
#include "comm/bootstrap/launch_env.h"
#include "comm/bootstrap/store.h"
#include "comm/bootstrap/store_protocol.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/net/acceptor.h"
#include "comm/net/auth.h"
#include "comm/net/socket.h"
#include "tests/common/scoped_env.h"
#include "tests/unit/expect_error.h"

namespace kolo {
namespace {

using namespace std::chrono_literals;
using testing::error_of;

using testing::ScopedEnv;

// Every launcher variable unset, so each test sets only what it means.
ScopedEnv clean_launch_env() {
  return ScopedEnv{{"KOLO_RANK", nullptr},
                   {"KOLO_SIZE", nullptr},
                   {"KOLO_ADDR", nullptr},
                   {"KOLO_PORT", nullptr},
                   {"KOLO_LOCAL_RANK", nullptr},
                   {"RANK", nullptr},
                   {"WORLD_SIZE", nullptr},
                   {"LOCAL_RANK", nullptr},
                   {"MASTER_ADDR", nullptr},
                   {"MASTER_PORT", nullptr},
                   {"SLURM_PROCID", nullptr},
                   {"SLURM_NTASKS", nullptr},
                   {"SLURM_LOCALID", nullptr},
                   {"OMPI_COMM_WORLD_RANK", nullptr},
                   {"OMPI_COMM_WORLD_SIZE", nullptr},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
                   {"PMI_RANK", nullptr},
                   {"PMI_SIZE", nullptr}};
}

TEST(Env, InvalidValuesNameTheSettingAndTheRange) {
  ScopedEnv env{{"KOLO_TIMEOUT_SECONDS", "soon"}};
  std::string message = error_of([] { env::timeout(); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("KOLO_TIMEOUT_SECONDS='soon'"), std::string::npos) << message;
  EXPECT_NE(message.find("expected a number in"), std::string::npos) << message;
  ScopedEnv negative{{"KOLO_TIMEOUT_SECONDS", "-1"}};
  error_of([] { env::timeout(); }, ErrorCode::kInvalidArgument);
  ScopedEnv good{{"KOLO_TIMEOUT_SECONDS", "2.5"}};
  EXPECT_EQ(env::timeout(), 2500ms);
  // Plain decimal text only: a leading blank and hex were taken, a trailing blank refused.
  for (const char* odd : {" 10", "10 ", "0x10", "inf", "nan", "1e1x"}) {
    ScopedEnv bad{{"KOLO_TIMEOUT_SECONDS", odd}, {"KOLO_CACHE_CAPACITY", odd}};
    error_of([] { env::timeout(); }, ErrorCode::kInvalidArgument);
    error_of([] { env::get_int("KOLO_CACHE_CAPACITY", 1, 0, 100); }, ErrorCode::kInvalidArgument);
  }
  ScopedEnv exponent{{"KOLO_TIMEOUT_SECONDS", "1e1"}};
  EXPECT_EQ(env::timeout(), 10000ms);
  ScopedEnv upper{{"KOLO_SHM_DIRECT", "TRUE"}};
  EXPECT_TRUE(env::get_bool("KOLO_SHM_DIRECT", false));
}

TEST(Env, NamesParseWithAliasesAndRefuseUnknownOnes) {
  EXPECT_EQ(parse_dtype("bf16", "x"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("FP16", "x"), DType::kFloat16);
  EXPECT_EQ(parse_op("mean", "x"), ReduceOp::kAverage);
  EXPECT_EQ(parse_transport("tcp", "x"), TransportKind::kTcp);
  std::string message = error_of([] { parse_transport("carrier-pigeon", "KOLO_TRANSPORT"); },
                                 ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("KOLO_TRANSPORT='carrier-pigeon'"), std::string::npos) << message;
  EXPECT_NE(message.find("auto, shm, tcp, mpi"), std::string::npos) << message;
}

TEST(LaunchEnv, EachLauncherIsRecognised) {
  auto clean = clean_launch_env();
  EXPECT_EQ(bootstrap::detect_launch().launcher, "single");
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_RANK", "3"},
                  {"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
    auto info = bootstrap::detect_launch();
    EXPECT_EQ(info.launcher, "mpi");
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.size, 8);
    EXPECT_EQ(info.local_rank, 1);
    EXPECT_TRUE(info.addr.empty());
  }
  {
    ScopedEnv env{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}};
    auto info = bootstrap::detect_launch();
    EXPECT_EQ(info.launcher, "slurm");
    EXPECT_EQ(info.rank, 2);
  }
  {
    ScopedEnv env{{"RANK", "1"},           {"WORLD_SIZE", "2"},   {"MASTER_ADDR", "10.1.2.3"},
                  {"MASTER_PORT", "1234"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "9"}};
    auto info = bootstrap::detect_launch();  // torchrun's variables win over Slurm's
    EXPECT_EQ(info.launcher, "torchrun");
    EXPECT_EQ(info.rank, 1);
    EXPECT_EQ(info.size, 2);
    EXPECT_EQ(info.addr, "10.1.2.3");
    EXPECT_EQ(info.port, 1234);
  }
  {
    ScopedEnv env{{"KOLO_RANK", "0"},
                  {"KOLO_SIZE", "3"},
                  {"KOLO_ADDR", "127.0.0.1"},
                  {"RANK", "5"},
                  {"WORLD_SIZE", "6"}};
    auto info = bootstrap::detect_launch();  // explicit KOLO_* wins over everything
    EXPECT_EQ(info.launcher, "kolo");
    EXPECT_EQ(info.size, 3);
    EXPECT_EQ(info.port, bootstrap::kDefaultStorePort);
  }
}

TEST(LaunchEnv, InconsistentVariablesAreRefused) {
  auto clean = clean_launch_env();
  {
    ScopedEnv env{{"RANK", "1"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("WORLD_SIZE"), std::string::npos) << message;
  }
  {
    ScopedEnv env{{"KOLO_RANK", "4"}, {"KOLO_SIZE", "4"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("KOLO_RANK=4"), std::string::npos) << message;
  }
  {
    ScopedEnv env{{"KOLO_RANK", "0"}, {"KOLO_SIZE", "2"}, {"KOLO_PORT", "99999"}};
    error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
  }
  // A job size without the rank (unset or empty) ran every process as a job of one, rc 0.
  for (const char* rank : {static_cast<const char*>(""), static_cast<const char*>(nullptr)}) {
    ScopedEnv env{{"KOLO_SIZE", "2"}, {"KOLO_RANK", rank}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("KOLO_SIZE=2 is set but KOLO_RANK is not"), std::string::npos)
        << message;
  }
  {
    ScopedEnv env{{"WORLD_SIZE", "4"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("but RANK is not"), std::string::npos) << message;
  }
  {
    ScopedEnv env{{"WORLD_SIZE", "1"}, {"SLURM_NTASKS", "4"}};  // alone by design
    EXPECT_EQ(bootstrap::detect_launch().launcher, "single");
  }
  {
    ScopedEnv env{{"KOLO_RANK", "0"}, {"KOLO_SIZE", "2"}, {"KOLO_LOCAL_RANK", "5"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("KOLO_LOCAL_RANK=5 is not below KOLO_SIZE=2"), std::string::npos)
        << message;
  }
  {
    // Slurm with a store address and no port takes the default port, as the others do.
    ScopedEnv env{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"KOLO_ADDR", "10.0.0.1"}};
    EXPECT_EQ(bootstrap::detect_launch().port, bootstrap::kDefaultStorePort);
  }
}

// Variables left from another launcher made every process of an mpirun job a job of one
// (rc 0); a batch script's MASTER_ADDR was ignored under srun while the error asked for it.
TEST(LaunchEnv, LeftoverVariablesAndMasterAddr) {
  auto clean = clean_launch_env();
  {
    ScopedEnv env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("SLURM_NTASKS=1 makes this process a job of one, but "
                           "OMPI_COMM_WORLD_SIZE=2"),
              std::string::npos)
        << message;
  }
  {
    ScopedEnv env{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"PMI_SIZE", "4"}};
    auto message = error_of([] { bootstrap::detect_launch(); }, ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("WORLD_SIZE=1"), std::string::npos) << message;
  }
  {
    ScopedEnv env{{"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "2"},
                  {"MASTER_ADDR", "10.0.0.5"},
                  {"MASTER_PORT", "1234"}};
    auto info = bootstrap::detect_launch();
    EXPECT_EQ(info.addr, "10.0.0.5");
    EXPECT_EQ(info.port, 1234);
    EXPECT_EQ(info.addr_var, "MASTER_ADDR");
    ScopedEnv kolo{{"KOLO_ADDR", "10.0.0.6"}};
    info = bootstrap::detect_launch();
    EXPECT_EQ(info.addr, "10.0.0.6");
    EXPECT_EQ(info.addr_var, "KOLO_ADDR");
    EXPECT_EQ(info.port, bootstrap::kDefaultStorePort);  // KOLO_ADDR's port, not MASTER_PORT
  }
  {
    ScopedEnv env{
        {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}};
    EXPECT_TRUE(bootstrap::detect_launch().addr.empty());  // mpirun shares rank 0's over MPI
  }
  auto message =
      error_of([] { net::require_ipv4_host("::1", "MASTER_ADDR"); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("MASTER_ADDR='::1'"), std::string::npos) << message;
  EXPECT_NE(message.find("no IPv6 address"), std::string::npos) << message;
  net::require_ipv4_host("127.0.0.1", "KOLO_ADDR");
}

// The secret file's first line is the secret (the rest may be comments), as documented.
TEST(Auth, TheSecretIsTheSecretFilesFirstLine) {
  char path[] = "/tmp/kolo-secret-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto write = [&](const std::string& text) {
    FILE* f = std::fopen(path, "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  ScopedEnv env{{"KOLO_SECRET", nullptr}, {"KOLO_SECRET_FILE", path}};
  write("abc\n# rotated 2026-12-01\n");
  EXPECT_EQ(net::job_secret(), "abc");
  write("abc\r\n");
  EXPECT_EQ(net::job_secret(), "abc");
  write("\n\nfoo");
  auto message = error_of([] { net::job_secret(); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("its first line is empty"), std::string::npos) << message;
  ::unlink(path);
  // A FIFO is refused at once: open() waited for a writer, past every deadline (found by a sweep).
  ASSERT_EQ(::mkfifo(path, 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  message = error_of([] { net::job_secret(); }, ErrorCode::kInvalidArgument);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(message.find("is not a readable regular file"), std::string::npos) << message;
  ::unlink(path);
}

void exercise_store(bootstrap::Store& a, bootstrap::Store& b) {
  // get() waits for a set from another client.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    a.set("late", std::string("bin\0ary", 7));
  });
  EXPECT_EQ(b.get("late", 5s), std::string("bin\0ary", 7));
  setter.join();
  // add() is atomic across clients.
  std::thread t1([&] {
    for (int i = 0; i < 100; ++i) a.add("n", 1);
  });
  std::thread t2([&] {
    for (int i = 0; i < 100; ++i) b.add("n", 2);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(a.add("n", 0), 300);
  auto message = error_of([&] { b.get("never", 100ms); }, ErrorCode::kTimeout);
  EXPECT_NE(message.find("never"), std::string::npos) << message;
  // The client recovers after a timed-out get.
  a.set("after", "x");
  EXPECT_EQ(b.get("after", 1s), "x");
}

TEST(Store, MemoryStore) {
  bootstrap::MemoryStore store;
  exercise_store(store, store);
}

TEST(Store, TcpStoreAcrossClients) {
  bootstrap::TcpStoreServer server("127.0.0.1", 0);
  bootstrap::TcpStore a("127.0.0.1", server.port(), 0, 5s);
  bootstrap::TcpStore b("127.0.0.1", server.port(), 1, 5s);
  exercise_store(a, b);
}

// A client of the next init (generation 2) is refused by a store of the earlier one, which
// still holds that init's keys, and waits for the store of its own generation on that port.
TEST(Store, AClientJoinsOnlyTheStoreOfItsGeneration) {
  auto old_server = std::make_unique<bootstrap::TcpStoreServer>("127.0.0.1", 0, 1);
  const int port = old_server->port();
  bootstrap::TcpStore old_client("127.0.0.1", port, 0, 5s, 1);
  old_client.set("w/key", "earlier");
  const auto start = std::chrono::steady_clock::now();
  std::thread replace([&] {
    std::this_thread::sleep_for(300ms);
    old_server.reset();  // rank 0 closes its earlier store and opens the next one
    bootstrap::TcpStoreServer next("127.0.0.1", port, 2);
    bootstrap::TcpStore host("127.0.0.1", port, 0, 5s, 2);
    host.set("w/key", "later");
    std::this_thread::sleep_for(500ms);
  });
  bootstrap::TcpStore client("127.0.0.1", port, 1, 5s, 2);
  EXPECT_EQ(client.get("w/key", 5s), "later");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  replace.join();
  // With no store of its generation ever coming, it fails at its deadline saying why.
  bootstrap::TcpStoreServer earlier("127.0.0.1", 0, 1);
  auto message = error_of([&] { bootstrap::TcpStore("127.0.0.1", earlier.port(), 1, 300ms, 2); },
                          ErrorCode::kTimeout);
  EXPECT_NE(message.find("is rank 0 in another init?"), std::string::npos) << message;
}

// A connection whose peer has gone names the peer's address (getpeername fails by then: the
// message said "connection to ?"), on the connecting and on the accepting side.
// A flood of strangers is logged in a bounded number of lines: each refusal was a warning line
// (2000 connect-and-garbage attempts wrote 2000 lines around the job's own output).
TEST(Acceptor, AFloodOfRefusalsIsCountedNotLoggedLineByLine) {
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  net::Acceptor acceptor(listener, "flood test", 5s,
                         [](const net::Hello&) { return net::HelloVerdict{}; });
  const std::vector<char> junk(1024, 'x');  // no hello: refused as soon as it is read
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 100; ++i) {
    net::Socket stranger =
        net::Socket::connect("127.0.0.1", listener.local_port(), net::deadline_after(5s));
    stranger.send_all(junk.data(), junk.size(), net::deadline_after(5s));
    EXPECT_FALSE(acceptor.wait(net::deadline_after(30ms)).has_value());
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("flood test: refused", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_GE(lines, 20u) << log;
  EXPECT_LE(lines, 25u) << log;  // 20, then one a second
  EXPECT_NE(log.find("later refusals are counted"), std::string::npos) << log;
}

TEST(Socket, APeerThatHasGoneIsNamedByItsAddress) {
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  const std::string port = std::to_string(listener.local_port());
  net::Socket client =
      net::Socket::connect("127.0.0.1", listener.local_port(), net::deadline_after(5s));
  net::Socket served = listener.accept(net::deadline_after(5s));
  ASSERT_TRUE(served.valid());
  served.close();
  char byte = 0;
  const std::string m =
      error_of([&] { client.recv_all(&byte, 1, net::deadline_after(5s)); }, ErrorCode::kPeerLost);
  EXPECT_NE(m.find("connection to 127.0.0.1:" + port + " closed while receiving"),
            std::string::npos)
      << m;
  net::Socket again =
      net::Socket::connect("127.0.0.1", listener.local_port(), net::deadline_after(5s));
  net::Socket accepted = listener.accept(net::deadline_after(5s));
  const std::string peer = accepted.peer_name();
  again.close();
  EXPECT_EQ(accepted.peer_name(), peer);
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
}

TEST(Store, BadAddsCloseOnlyTheirConnection) {
  // Found by the hardening issue: add on a non-number (std::stoll) ended the server thread,
  // and with it rank 0; + delta could overflow.
  bootstrap::TcpStoreServer server("127.0.0.1", 0);
  bootstrap::TcpStore a("127.0.0.1", server.port(), 0, 5s);
  a.set("word", "abc");
  a.set("big", "9223372036854775807");
  {
    bootstrap::TcpStore b("127.0.0.1", server.port(), 1, 2s);
    EXPECT_THROW(b.add("word", 1), Error);
  }
  {
    bootstrap::TcpStore c("127.0.0.1", server.port(), 2, 2s);
    EXPECT_THROW(c.add("big", 1), Error);
  }
  EXPECT_EQ(a.get("word", 1s), "abc");
  EXPECT_EQ(a.add("n", 5), 5);
  bootstrap::MemoryStore memory;
  memory.set("word", "abc");
  EXPECT_THROW(memory.add("word", 1), Error);
}

TEST(Store, IdleStrangersCannotKeepAClientOut) {
  // 100 connections that never send the handshake (more than the server keeps waiting), then
  // a real client: the oldest strangers are evicted and the client is served.
  bootstrap::TcpStoreServer server("127.0.0.1", 0);
  std::vector<int> strangers;
  for (int i = 0; i < 100; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    strangers.push_back(fd);
  }
  std::this_thread::sleep_for(200ms);  // the server accepts them all
  bootstrap::TcpStore client("127.0.0.1", server.port(), 0, 5s);
  client.set("k", "v");
  EXPECT_EQ(client.get("k", 1s), "v");
  for (int fd : strangers) ::close(fd);
}

// A client that sends gets and never reads the replies: before, every reply was queued (a few
// hundred 64 MiB replies from one 64 KiB read). Now answering stops at kMaxQueuedReply.
TEST(Store, RepliesNobodyReadsStayBounded) {
  bootstrap::StoreState state;
  state.values["big"] = std::string(bootstrap::kMaxValue, 'x');
  std::string frame(bootstrap::kHeaderBytes, '\0');
  frame[0] = static_cast<char>(bootstrap::kGet);
  uint32_t key_len = 3;
  std::memcpy(frame.data() + 1, &key_len, 4);
  frame += "big";
  std::string in, out, why;
  for (int i = 0; i < 10; ++i) in += frame;
  ASSERT_TRUE(bootstrap::handle_requests(state, 7, in, out, why)) << why;
  EXPECT_GE(out.size(), bootstrap::kMaxQueuedReply);
  EXPECT_LT(out.size(), bootstrap::kMaxQueuedReply + bootstrap::kMaxValue + 9);
  EXPECT_EQ(in.size(), 8 * frame.size()) << "the unanswered requests wait";
  out.clear();  // the client read its replies
  ASSERT_TRUE(bootstrap::handle_requests(state, 7, in, out, why)) << why;
  EXPECT_EQ(in.size(), 6 * frame.size());
}

TEST(Store, BarrierAndAllgather) {
  auto store = std::make_shared<bootstrap::MemoryStore>();
  std::vector<std::vector<std::string>> got(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      bootstrap::PrefixStore prefixed(store, "p");
      bootstrap::store_barrier(prefixed, "b", 4, 5s);
      got[r] = bootstrap::store_allgather(prefixed, "g", r, 4, std::to_string(r * r), 5s);
    });
  for (auto& t : threads) t.join();
  for (auto& g : got) EXPECT_EQ(g, (std::vector<std::string>{"0", "1", "4", "9"}));
}

// A rank that never comes is named (the message named a store key); `check` sees each value as
// it arrives, so a bad one fails before later ranks are waited for.
TEST(Store, AllgatherNamesTheMissingRankAndChecksEachValue) {
  bootstrap::MemoryStore store;
  auto message = error_of([&] { bootstrap::store_allgather(store, "a", 0, 3, "x", 100ms); },
                          ErrorCode::kTimeout);
  EXPECT_NE(message.find("rank 1 of 3 did not arrive within 100 ms"), std::string::npos) << message;
  store.set("b/0", "bad");
  auto refuse = [](int r, const std::string& value) {
    if (value == "bad") KOLO_THROW(ErrorCode::kMismatch, "rank ", r, " said ", value);
  };
  message = error_of([&] { bootstrap::store_allgather(store, "b", 1, 3, "ok", 5s, refuse); },
                     ErrorCode::kMismatch);
  EXPECT_NE(message.find("rank 0 said bad"), std::string::npos) << message;
}

// A rank that gave up while setting up left its reason: the others' waits for its values end at
// once quoting it (they waited out the timeout and said it "did not arrive"), on either store.
TEST(Store, AWaitForARankThatGaveUpEndsQuotingItsReason) {
  bootstrap::TcpStoreServer server("127.0.0.1", 0);
  bootstrap::TcpStore tcp("127.0.0.1", server.port(), 0, 5s);
  bootstrap::MemoryStore memory;
  for (bootstrap::Store* store :
       {static_cast<bootstrap::Store*>(&memory), static_cast<bootstrap::Store*>(&tcp)}) {
    EXPECT_FALSE(store->check("k", 5s).has_value());
    store->set("k", "");
    EXPECT_EQ(store->check("k", 5s), std::optional<std::string>(""));  // set, and empty
    bootstrap::leave_setup_reason(*store, 1, "rank 1", "ucx transport setup: ucp_init failed");
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_of(
        [&] { bootstrap::store_allgather(*store, "a", 0, 2, "x", 30s); }, ErrorCode::kPeerLost);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_NE(message.find("rank 1 gave up while setting up; it had failed with: ucx transport "
                           "setup: ucp_init failed"),
              std::string::npos)
        << message;
    // Any wait of the setup ends so (a barrier too), whichever rank it waits for; a reason
    // that quotes another rank's is cut to the innermost one.
    bootstrap::MemoryStore fresh;
    bootstrap::leave_setup_reason(fresh, 2, "rank 2 (world rank 5)",
                                  "lost: rank 2 gave up; it had failed with: bad value");
    const std::string barrier =
        error_of([&] { bootstrap::store_barrier(fresh, "b", 3, 30s); }, ErrorCode::kPeerLost);
    EXPECT_NE(barrier.find("rank 2 (world rank 5) gave up while setting up; it had failed with: "
                           "bad value"),
              std::string::npos)
        << barrier;
  }
  // A value of the largest size the store takes comes back through a check too (its reply is
  // one byte longer: it was refused as malformed).
  const std::string big(bootstrap::kMaxValue, 'v');
  tcp.set("big", big);
  EXPECT_EQ(tcp.check("big", 30s), std::optional<std::string>(big));
  EXPECT_EQ(bootstrap::wait_for_key(tcp, "big", 30s), big);
}

TEST(Auth, HelloVerifiesOnlyWithTheSameSecretAndNonce) {
  auto challenge = net::make_challenge();
  net::Hello hello{net::Role::kTransportPeer, 5, "w.s0c1"};
  auto bytes = net::make_hello(challenge, hello, "secret");
  auto back = net::verify_hello(bytes.data(), challenge, "secret");
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.tag, "w.s0c1");
  error_of([&] { net::verify_hello(bytes.data(), challenge, "other"); }, ErrorCode::kAuth);
  error_of([&] { net::verify_hello(bytes.data(), net::make_challenge(), "secret"); },
           ErrorCode::kAuth);  // a replay against a new nonce
  bytes[12] ^= 1;              // tampered rank
  error_of([&] { net::verify_hello(bytes.data(), challenge, "secret"); }, ErrorCode::kAuth);
  bytes[0] = 'X';
  auto message =
      error_of([&] { net::verify_hello(bytes.data(), challenge, "secret"); }, ErrorCode::kAuth);
  EXPECT_NE(message.find("magic"), std::string::npos) << message;
}

TEST(Topology, LocalAndCrossRanksFollowHostIdentity) {
  std::vector<std::string> hosts{"a", "b", "a", "c", "b", "a"};
  auto t = bootstrap::compute_topology(hosts, 4);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 2);
  EXPECT_EQ(t.cross_rank, 1);
  EXPECT_EQ(t.cross_size, 3);
  EXPECT_EQ(t.host_of_rank, (std::vector<int>{0, 1, 0, 2, 1, 0}));
}

TEST(Topology, HostCpusAreTheUnionOfTheHostsRanksMasks) {
  std::vector<std::string> hosts{"a", "b", "a", "a"};
  // On a: ranks bound to CPU 0, CPU 1 and CPU 1 again; on b: CPUs 0-63.
  std::vector<std::string> masks{"0000000000000001", "ffffffffffffffff", "0000000000000002",
                                 "0000000000000002"};
  EXPECT_EQ(bootstrap::compute_topology(hosts, 0, masks).host_cpus, 2);
  EXPECT_EQ(bootstrap::compute_topology(hosts, 1, masks).host_cpus, 64);
  // CPU 127 is in the second word; text that is not whole hex words counts as unknown.
  EXPECT_EQ(bootstrap::cpus_in_union({"00000000000000018000000000000000", "zz", "123"}), 2);
  EXPECT_EQ(bootstrap::cpus_in_union({}), bootstrap::usable_cpus());
  EXPECT_EQ(bootstrap::cpus_in_union({bootstrap::cpu_mask_text()}), bootstrap::usable_cpus());
  EXPECT_EQ(bootstrap::compute_topology(hosts, 0).host_cpus, bootstrap::usable_cpus());
  // A rank's share: the host's CPUs over its ranks, at most its own CPUs, at least 1.
  EXPECT_EQ(bootstrap::cpu_share(1, 8), 1);
  EXPECT_EQ(bootstrap::cpu_share(1 << 20, 1), bootstrap::usable_cpus());
}

}  // namespace
}  // namespace kolo
