// Authentication over real sockets (the hardening issue): the connector checks the acceptor's
// proof of the secret, the acceptor refuses a connection it does not expect inside the
// handshake (not after accepting it), silent connections do not delay a real peer, and the
// secret file must be private.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "comm/base/error.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/net/acceptor.h"
#include "comm/net/auth.h"
#include "tests/common/scoped_env.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::ScopedEnv;

std::string error_message(const std::function<void()>& body, ErrorCode expected) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// A stranger in the store's place: it sends a well-formed challenge and says "accepted" without
// knowing the secret. Before mutual authentication, clients believed it and sent their data.
TEST(Auth, AClientRefusesAnAcceptorThatCannotProveTheSecret) {
  ScopedEnv secret("KOLO_SECRET", "the-job-secret");
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  std::thread impostor([&] {
    auto deadline = net::deadline_after(seconds(20));
    net::Socket sock = listener.accept(deadline);
    if (!sock.valid()) return;
    net::Challenge challenge = net::make_challenge();
    sock.send_all(challenge.data(), challenge.size(), deadline);
    net::HelloBytes hello{};
    sock.recv_all(hello.data(), hello.size(), deadline);
    net::Reply reply = net::make_reply(net::Status::kAccepted, hello.data(), challenge, "guess");
    sock.send_all(reply.data(), reply.size(), deadline);
    char byte;
    try {
      sock.recv_all(&byte, 1, deadline);  // the client hangs up instead of sending a request
    } catch (const Error&) {
    }
  });
  std::string message = error_message(
      [&] { bootstrap::TcpStore("127.0.0.1", listener.local_port(), 1, seconds(10)); },
      ErrorCode::kAuth);
  EXPECT_NE(message.find("could not prove the job secret"), std::string::npos) << message;
  impostor.join();
}

// A store that passes the handshake and then answers with a length no store would send: the
// client refused to believe it only once it checked replies (before, it allocated 2^40 bytes).
TEST(Auth, AStoreClientChecksTheRepliesItGets) {
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  std::thread server([&] {
    net::Acceptor acceptor(listener, "fake store", seconds(5), nullptr);
    auto accepted = acceptor.wait(net::deadline_after(seconds(20)));
    if (!accepted) return;
    auto deadline = net::deadline_after(seconds(20));
    char request[13 + 3];  // set of key "key" and an empty value
    accepted->sock.recv_all(request, sizeof request, deadline);
    char reply[9] = {0};
    const uint64_t huge = uint64_t{1} << 40;
    std::memcpy(reply + 1, &huge, 8);
    accepted->sock.send_all(reply, sizeof reply, deadline);
    char byte;
    try {
      accepted->sock.recv_all(&byte, 1, deadline);  // until the client hangs up
    } catch (const Error&) {
    }
  });
  bootstrap::TcpStore store("127.0.0.1", listener.local_port(), 1, seconds(10));
  std::string message = error_message([&] { store.set("key", ""); }, ErrorCode::kIo);
  EXPECT_NE(message.find("malformed reply (status 0, length 1099511627776)"), std::string::npos)
      << message;
  server.join();
}

// The tcp transport's acceptor checks the communicator and rank before it answers, so the
// connector hears the refusal in the handshake (before, it heard "ok" and was then dropped).
TEST(Auth, AnUnexpectedPeerIsRefusedInsideTheHandshake) {
  ScopedEnv secret("KOLO_SECRET", "the-job-secret");
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  net::Acceptor acceptor(listener, "test acceptor", seconds(5), [](const net::Hello& hello) {
    return net::HelloVerdict{hello.tag == "w" ? std::string()
                                              : "belongs to communicator '" + hello.tag + "'"};
  });
  std::thread client([&] {
    auto deadline = net::deadline_after(seconds(20));
    net::Socket stray = net::Socket::connect("127.0.0.1", listener.local_port(), deadline);
    std::string message = error_message(
        [&] {
          net::client_handshake(stray, {net::Role::kTransportPeer, 1, "other"}, net::job_secret(),
                                deadline);
        },
        ErrorCode::kAuth);
    EXPECT_NE(message.find("does not expect rank 1 of communicator 'other'"), std::string::npos)
        << message;
    net::Socket peer = net::Socket::connect("127.0.0.1", listener.local_port(), deadline);
    net::client_handshake(peer, {net::Role::kTransportPeer, 1, "w"}, net::job_secret(), deadline);
  });
  auto accepted = acceptor.wait(net::deadline_after(seconds(20)));
  ASSERT_TRUE(accepted.has_value());
  EXPECT_EQ(accepted->hello.tag, "w");
  client.join();
}

// Before, the tcp transport handshook one connection at a time with 5 s for each: about sixty
// silent connections pushed setup past its deadline. Now they wait side by side.
TEST(Auth, SilentConnectionsDoNotDelayARealPeer) {
  net::Socket listener = net::Socket::listen("127.0.0.1", 0);
  net::Acceptor acceptor(listener, "test acceptor", seconds(5), nullptr);
  auto deadline = net::deadline_after(seconds(30));
  std::vector<net::Socket> silent;
  for (int i = 0; i < 40; ++i)  // fewer than kMaxPending: none is evicted
    silent.push_back(net::Socket::connect("127.0.0.1", listener.local_port(), deadline));
  std::thread peer([&] {
    std::this_thread::sleep_for(milliseconds(200));  // behind every silent one
    net::Socket sock = net::Socket::connect("127.0.0.1", listener.local_port(), deadline);
    net::client_handshake(sock, {net::Role::kTransportPeer, 3, "w"}, net::job_secret(), deadline);
  });
  auto start = net::Clock::now();
  // Well under one handshake timeout: sequential handshakes would need 40 x 5 s.
  auto accepted = acceptor.wait(net::deadline_after(seconds(4)));
  ASSERT_TRUE(accepted.has_value()) << "the real peer waited behind silent connections";
  EXPECT_EQ(accepted->hello.rank, 3);
  EXPECT_LT(net::Clock::now() - start, seconds(4));
  EXPECT_LE(acceptor.pending(), net::Acceptor::kMaxPending);
  peer.join();
}

TEST(Auth, TheSecretFileMustBeReadableByItsOwnerOnly) {
  ScopedEnv no_secret("KOLO_SECRET", nullptr);
  std::string path = ::testing::TempDir() + "kolo_secret_" + std::to_string(::getpid());
  std::ofstream(path) << "from-a-file\n";
  ScopedEnv file("KOLO_SECRET_FILE", path.c_str());
  ::chmod(path.c_str(), 0644);
  std::string message = error_message([] { net::job_secret(); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("has mode 0644"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(net::job_secret(), "from-a-file");
  std::ofstream(path, std::ios::trunc) << "\n";
  message = error_message([] { net::job_secret(); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("is empty"), std::string::npos) << message;
  ::unlink(path.c_str());
}

TEST(Auth, NoSecretMeansLoopbackOnly) {
  ScopedEnv no_secret("KOLO_SECRET", nullptr);
  ScopedEnv no_file("KOLO_SECRET_FILE", nullptr);
  ScopedEnv secure("KOLO_INSECURE", nullptr);
  net::require_secret_for("127.0.0.1", "a loopback store");  // allowed
  std::string message =
      error_message([] { bootstrap::TcpStoreServer("0.0.0.0", 0); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("KOLO_SECRET"), std::string::npos) << message;
  EXPECT_NE(message.find("KOLO_INSECURE=1"), std::string::npos) << message;
  ScopedEnv insecure("KOLO_INSECURE", "1");
  net::require_secret_for("192.0.2.1", "an exposed store");  // allowed when asked for
}

}  // namespace
}  // namespace kolo
