// UcxContext: a UCP worker per communicator whose address every member publishes in the store,
// an endpoint per peer (with peer error handling, so a lost peer fails the waits on it), and
// tagged non-blocking sends and receives. A tag is the sender's rank and the message's number
// on its lane (sender to receiver), so every receive matches exactly the message posted for it
// and transfers complete in posting order per direction, as the Context rules require.
#include "comm/transport/ucx/context.h"

#include <poll.h>
#include <sched.h>
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "comm/base/error.h"
#include "comm/base/transport_kind.h"
#include "comm/bootstrap/store.h"

namespace kolo::transport::ucx {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSeqBits = 40;
constexpr uint64_t kFullMask = ~uint64_t{0};
// An abort notice's tag: this bit and the sender's rank (data tags never set it: ranks < 2^23).
constexpr uint64_t kAbortBit = uint64_t{1} << 63;
// How long a failing rank progresses its abort notices before it lets them go.
constexpr auto kNoticeGrace = std::chrono::milliseconds(100);

// Parameters of a send or receive of contiguous bytes.
ucp_request_param_t contiguous_bytes() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(1);
  return param;
}

uint64_t make_tag(int sender, uint64_t seq) {
  return uint64_t(static_cast<uint32_t>(sender)) << kSeqBits |
         (seq & ((uint64_t{1} << kSeqBits) - 1));
}

void check_setup(ucs_status_t status, const char* what) {
  if (status != UCS_OK)
    KOLO_THROW(ErrorCode::kIo, "ucx transport setup: ", what,
               " failed: ", ucs_status_string(status));
}

class UcxContext final : public Context {
 public:
  explicit UcxContext(const ContextOptions& options);
  ~UcxContext() override;
  TransportKind kind() const override { return TransportKind::kUcx; }

 protected:
  void do_post(Transfer* t) override;
  void do_wait(Transfer* t) override;
  void do_abort() noexcept override;

 private:
  struct Op {
    Transfer* t = nullptr;
    void* request = nullptr;  // null: completed when posted
    ucs_status_t status = UCS_OK;
  };
  struct Lane {
    std::deque<Op> ops;  // posting order
    uint64_t next_seq = 0;
  };
  struct Peer {
    UcxContext* owner = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    Lane sends, recvs;
    ucs_status_t error = UCS_OK;  // set by the endpoint's error handler
  };

  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  // A transfer that ended with `status`: kMismatch for a message larger than the receive (its
  // header would have said so), else the peer is lost.
  [[noreturn]] void throw_failed(const Transfer& t, ucs_status_t status, const char* what) const;
  // Completes the finished operations at the front of every lane; true when any did. One that
  // failed stays at its lane's front, in failed_, until a wait reports it: a receive that a
  // larger message truncated is reported after its header (posted before it), which names the
  // call the sender was in.
  bool progress();
  bool progress_lane(Lane& lane);
  void release(Lane& lane) noexcept;
  // The receive for any peer's abort notice (so that a peer waiting on this rank fails at once,
  // not at its deadline), and the rank whose notice came, or -1.
  void post_notice_receive();
  int take_notice();
  void send_notices() noexcept;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // readable when the worker has events (ucp_worker_arm)
  std::vector<Peer> peers_;
  const Op* failed_ = nullptr;
  void* notice_request_ = nullptr;
  uint64_t notice_word_ = 0;       // what a notice carries (nothing: the tag says who)
  int notice_from_ = -1;           // the peer whose notice arrived
  const uint64_t abort_word_ = 0;  // what this rank's notices carry
};

// UCX logs at "warn" by default: a failed job printed dozens of warnings (requests and
// unexpected messages left behind by the lost peer) around kolo's one error line naming the
// cause. kolo reports every failure itself, so UCX logs only errors unless the user set
// UCX_LOG_LEVEL (UCX read it when it was loaded; the global option is set here).
void quiet_ucx_log() {
  if (std::getenv("UCX_LOG_LEVEL") == nullptr)
    (void)ucs_global_opts_set_value("LOG_LEVEL", "error");
}

UcxContext::UcxContext(const ContextOptions& options) : Context(options) {
  KOLO_CHECK_ARG(options.store != nullptr, "the ucx transport needs a rendezvous store");
  quiet_ucx_log();
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucp_config_t* config = nullptr;
  check_setup(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read (UCX_* variables)");
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check_setup(status, "ucp_init");
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread at a time per communicator
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) ucp_cleanup(context_);
  check_setup(status, "ucp_worker_create");
  check_setup(ucp_worker_get_efd(worker_, &event_fd_), "ucp_worker_get_efd");

  ucp_address_t* address = nullptr;
  size_t length = 0;
  check_setup(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
  std::string mine(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  auto addresses = bootstrap::store_allgather(*options.store, "ucx", rank_, size_, mine, timeout_);

  peers_.resize(static_cast<size_t>(size_));
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    peer.owner = this;
    peer.rank = p;
    if (p == rank_) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[static_cast<size_t>(p)].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &UcxContext::on_endpoint_error;
    ep.err_handler.arg = &peer;
    check_setup(ucp_ep_create(worker_, &ep, &peer.ep), "ucp_ep_create");
  }
  post_notice_receive();
}

void UcxContext::post_notice_receive() {
  ucp_request_param_t param = contiguous_bytes();
  void* request =
      ucp_tag_recv_nbx(worker_, &notice_word_, sizeof notice_word_, kAbortBit, kAbortBit, &param);
  if (UCS_PTR_IS_ERR(request))
    check_setup(UCS_PTR_STATUS(request), "ucp_tag_recv_nbx (abort notices)");
  notice_request_ = request;  // a receive posted before any notice cannot have completed
}

int UcxContext::take_notice() {
  if (notice_request_ == nullptr) return notice_from_;
  ucp_tag_recv_info_t info{};
  const ucs_status_t status = ucp_tag_recv_request_test(notice_request_, &info);
  if (status == UCS_INPROGRESS) return -1;
  ucp_request_free(notice_request_);
  notice_request_ = nullptr;
  if (status == UCS_OK) notice_from_ = static_cast<int>(info.sender_tag & ~kAbortBit);
  return notice_from_;
}

void UcxContext::send_notices() noexcept {
  std::vector<void*> sent;
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr || peer.rank == notice_from_ || peer.error != UCS_OK) continue;
    ucp_request_param_t param = contiguous_bytes();
    void* request = ucp_tag_send_nbx(peer.ep, &abort_word_, sizeof abort_word_,
                                     kAbortBit | static_cast<uint64_t>(rank_), &param);
    if (UCS_PTR_IS_PTR(request)) sent.push_back(request);
  }
  const auto deadline = Clock::now() + kNoticeGrace;
  for (void* request : sent) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline)
      ucp_worker_progress(worker_);
    ucp_request_free(request);  // one still in flight goes on without us
  }
}

UcxContext::~UcxContext() {
  if (notice_request_ != nullptr) {
    ucp_request_cancel(worker_, notice_request_);
    ucp_request_free(notice_request_);
  }
  for (Peer& peer : peers_) {
    release(peer.sends);
    release(peer.recvs);
    if (peer.ep != nullptr) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = ucp_ep_close_nbx(peer.ep, &param);
      if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker_);
        ucp_request_free(request);
      }
    }
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxContext::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->error == UCS_OK) peer->error = status;
}

void UcxContext::do_post(Transfer* t) {
  Peer& peer = peers_[static_cast<size_t>(t->peer)];
  const bool send = t->kind == Transfer::Kind::kSend;
  Lane& lane = send ? peer.sends : peer.recvs;
  const uint64_t tag = make_tag(send ? rank_ : t->peer, lane.next_seq++);
  ucp_request_param_t param = contiguous_bytes();
  void* request = send ? ucp_tag_send_nbx(peer.ep, t->data, t->bytes, tag, &param)
                       : ucp_tag_recv_nbx(worker_, t->data, t->bytes, tag, kFullMask, &param);
  if (UCS_PTR_IS_ERR(request)) {
    try {
      throw_failed(*t, UCS_PTR_STATUS(request), send ? "ucp_tag_send_nbx" : "ucp_tag_recv_nbx");
    } catch (const Error& e) {
      fail(e.what());
      throw;
    }
  }
  lane.ops.push_back({t, request});
}

void UcxContext::throw_failed(const Transfer& t, ucs_status_t status, const char* what) const {
  if (status == UCS_ERR_MESSAGE_TRUNCATED) throw_larger_message(t.peer, t.bytes);
  throw_peer_lost(t.peer, std::string(what) + " failed: " + ucs_status_string(status));
}

// Progresses the worker without pause while it has work; when idle, a short spell of yields,
// then sleeps on the worker's event fd (armed first) for at most 1 ms at a time: a plain sleep
// would leave UCX's own protocols (its TCP transport's socket buffers) unserved.
void UcxContext::do_wait(Transfer* t) {
  constexpr int kTightPasses = 16;
  constexpr auto kYieldWindow = std::chrono::microseconds(200);
  auto last_progress = Clock::now();
  int idle = 0;
  while (!t->complete()) {
    const bool worked = ucp_worker_progress(worker_) != 0;
    const bool moved = progress() || worked;
    if (t->complete()) break;
    if (failed_ != nullptr) throw_failed(*failed_->t, failed_->status, "a transfer");
    if (moved) {
      last_progress = Clock::now();
      idle = 0;
      continue;
    }
    if (const int aborted = take_notice(); aborted >= 0) throw_peer_lost(aborted, "it aborted");
    const Peer& peer = peers_[static_cast<size_t>(t->peer)];
    if (peer.error != UCS_OK)
      throw_peer_lost(t->peer,
                      std::string("its endpoint failed: ") + ucs_status_string(peer.error));
    const auto now = Clock::now();
    check_wait(now - last_progress, t->peer);
    if (++idle <= kTightPasses) continue;
    if (now - last_progress < kYieldWindow) {
      sched_yield();
      continue;
    }
    if (ucp_worker_arm(worker_) == UCS_OK) {  // UCS_ERR_BUSY: events pending, progress again
      pollfd fd{event_fd_, POLLIN, 0};
      ::poll(&fd, 1, 1);
    }
  }
}

bool UcxContext::progress() {
  bool moved = false;
  for (Peer& peer : peers_) {
    if (peer.rank == rank_) continue;
    moved = progress_lane(peer.sends) || moved;
    moved = progress_lane(peer.recvs) || moved;
  }
  return moved;
}

bool UcxContext::progress_lane(Lane& lane) {
  bool moved = false;
  while (!lane.ops.empty()) {
    Op& op = lane.ops.front();
    if (op.request != nullptr) {
      const ucs_status_t status = ucp_request_check_status(op.request);
      if (status == UCS_INPROGRESS) break;
      ucp_request_free(op.request);
      op.request = nullptr;
      op.status = status;
    }
    if (op.status != UCS_OK) {
      failed_ = &op;
      break;
    }
    op.t->done = op.t->bytes;
    lane.ops.pop_front();
    moved = true;
  }
  return moved;
}

// Cancels what is still in flight (receives) and lets go of the requests; best effort.
void UcxContext::release(Lane& lane) noexcept {
  for (Op& op : lane.ops) {
    if (op.request == nullptr) continue;
    if (ucp_request_check_status(op.request) == UCS_INPROGRESS)
      ucp_request_cancel(worker_, op.request);
    ucp_request_free(op.request);
  }
  lane.ops.clear();
  failed_ = nullptr;
}

void UcxContext::do_abort() noexcept {
  // What is in flight is let go; every peer gets a notice (the reason is in the store, from
  // Context::fail), so that one waiting on this rank fails now instead of at its deadline.
  for (Peer& peer : peers_) {
    release(peer.sends);
    release(peer.recvs);
  }
  send_notices();
}

}  // namespace

std::unique_ptr<Context> create(const ContextOptions& options) {
  return std::make_unique<UcxContext>(options);
}

}  // namespace kolo::transport::ucx
