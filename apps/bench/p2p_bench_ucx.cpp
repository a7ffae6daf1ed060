// bench p2p, host memory: the UCX channel's ping-pong (transport/ucx/ucx_ping_pong.hpp,
// host tensors through UcxEndpoint) against the same ping-pong written on the bare UCP
// API: two workers on loopback, preallocated buffers, the same tags and warm-up round.
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench/p2p_bench_parts.hpp"
#include "transport/ucx/ucx_ping_pong.hpp"
#include "transport/ucx/ucx_tag.hpp"

namespace conveyor::p2p {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWaitLimit = std::chrono::seconds(60);

void check(ucs_status_t status, const char* call) {
  if (status != UCS_OK)
    throw std::runtime_error(std::string("bench p2p (raw ucx): ") + call + " failed: " +
                             ucs_status_string(status));
}

// One raw UCP worker with its own context, as the channel has.
class RawWorker {
 public:
  RawWorker() {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    const ucs_status_t init = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    check(init, "ucp_init");
    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    const ucs_status_t created = ucp_worker_create(context_, &wparams, &worker_);
    if (created != UCS_OK) ucp_cleanup(context_);
    check(created, "ucp_worker_create");
  }
  ~RawWorker() {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }
  RawWorker(const RawWorker&) = delete;
  RawWorker& operator=(const RawWorker&) = delete;

  std::vector<char> address() const {
    ucp_address_t* addr = nullptr;
    std::size_t length = 0;
    check(ucp_worker_get_address(worker_, &addr, &length), "ucp_worker_get_address");
    std::vector<char> out(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr) + length);
    ucp_worker_release_address(worker_, addr);
    return out;
  }
  void connect(const std::vector<char>& peer) {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    check(ucp_ep_create(worker_, &params, &ep_), "ucp_ep_create");
  }
  // Starts closing the endpoint; the caller progresses both workers until it is done.
  ucs_status_ptr_t start_close() {
    ucp_request_param_t param{};
    return ucp_ep_close_nbx(ep_, &param);
  }

  ucs_status_ptr_t send(const void* data, std::size_t bytes, std::uint64_t tag) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    return ucp_tag_send_nbx(ep_, data, bytes, tag, &param);
  }
  ucs_status_ptr_t receive(void* data, std::size_t bytes, std::uint64_t tag) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    return ucp_tag_recv_nbx(worker_, data, bytes, tag, ~ucp_tag_t{0}, &param);
  }
  // Progresses until `request` completes (nullptr: it completed at once).
  void wait(ucs_status_ptr_t request) {
    if (request == nullptr) return;
    if (UCS_PTR_IS_ERR(request)) check(UCS_PTR_STATUS(request), "ucp_tag_*_nbx");
    const auto deadline = Clock::now() + kWaitLimit;
    // Same wait policy as the channel (UcxRequest::wait): progress, and yield the core
    // when nothing moved, so that the ratio measures the channel's own work, not a
    // different polling policy (which decides the figures on an oversubscribed machine).
    while (ucp_request_check_status(request) == UCS_INPROGRESS) {
      if (ucp_worker_progress(worker_)) continue;
      if (Clock::now() > deadline) {
        ucp_request_cancel(worker_, request);
        throw std::runtime_error("bench p2p (raw ucx): a message did not arrive within 60 s");
      }
      std::this_thread::yield();
    }
    const ucs_status_t status = ucp_request_check_status(request);
    ucp_request_free(request);
    check(status, "ucp request");
  }
  bool progress() { return ucp_worker_progress(worker_) != 0; }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

std::uint64_t tag_of(int iteration, bool reply) {
  return pack_tag({.edge = 0, .step = iteration, .micro_batch = reply ? 1 : 0, .kind = TagKind::bench});
}

// A connected pair of raw workers and their buffers, reused for every size.
class RawPair {
 public:
  explicit RawPair(std::size_t max_bytes)
      : ping_(max_bytes, 1), pong_(max_bytes, 1), echo_(max_bytes, 1) {
    a_.connect(b_.address());
    b_.connect(a_.address());
  }
  ~RawPair() {
    // Close both endpoints while progressing both workers: a close may need the peer.
    ucs_status_ptr_t closing[2] = {a_.start_close(), b_.start_close()};
    const auto deadline = Clock::now() + kWaitLimit;
    for (ucs_status_ptr_t& c : closing) {
      if (c == nullptr || UCS_PTR_IS_ERR(c)) continue;
      while (ucp_request_check_status(c) == UCS_INPROGRESS && Clock::now() < deadline) {
        a_.progress();
        b_.progress();
      }
      ucp_request_free(c);
    }
  }

  // One-way microseconds per message, as ucx_ping_pong measures it.
  double ping_pong(std::size_t bytes, int iterations) {
    std::exception_ptr responder_error;
    std::thread responder([&] {
      try {
        for (int i = 0; i <= iterations; ++i) {
          b_.wait(b_.receive(echo_.data(), bytes, tag_of(i, false)));
          b_.wait(b_.send(echo_.data(), bytes, tag_of(i, true)));
        }
      } catch (...) {
        responder_error = std::current_exception();
      }
    });
    std::exception_ptr initiator_error;
    double one_way_us = 0;
    try {
      Clock::time_point start;
      for (int i = 0; i <= iterations; ++i) {  // round 0 is the warm-up
        if (i == 1) start = Clock::now();
        ucs_status_ptr_t reply = a_.receive(pong_.data(), bytes, tag_of(i, true));
        a_.wait(a_.send(ping_.data(), bytes, tag_of(i, false)));
        a_.wait(reply);
      }
      one_way_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                   iterations / 2;
    } catch (...) {
      initiator_error = std::current_exception();
    }
    responder.join();
    if (initiator_error) std::rethrow_exception(initiator_error);
    if (responder_error) std::rethrow_exception(responder_error);
    return one_way_us;
  }

 private:
  RawWorker a_, b_;
  std::vector<char> ping_, pong_, echo_;  // touched once here, never in the loop
};

}  // namespace

std::string ucx_transports() {
  const char* tls = std::getenv("UCX_TLS");
  return tls && *tls ? std::string("UCX_TLS=") + tls : "UCX's choice (UCX_TLS unset)";
}

std::vector<Row> bench_ucx(const Plan& plan) {
  RawPair raw(*std::max_element(plan.sizes.begin(), plan.sizes.end()));
  std::vector<Row> rows;
  for (const std::size_t bytes : plan.sizes) {
    Row row{.transport = "ucx", .bytes = bytes, .iterations = ucx_iterations(plan, bytes),
            .channel = {}, .raw = {}};
    row.channel.us = row.raw.us = std::numeric_limits<double>::infinity();
    for (int r = 0; r < plan.repeats; ++r) {
      row.raw.us = std::min(row.raw.us, raw.ping_pong(bytes, row.iterations));
      row.channel.us = std::min(row.channel.us, ucx_ping_pong(bytes, row.iterations).latency_us);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace conveyor::p2p
