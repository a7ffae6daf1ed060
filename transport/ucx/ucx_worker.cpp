#include "transport/ucx/ucx_worker.hpp"

#include "transport/ucx/worker_address.hpp"

#include <ucp/api/ucp.h>

#include <poll.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

// A request cancelled at its deadline gets this long to report back before the worker
// adopts it.
constexpr auto kCancelGrace = std::chrono::milliseconds(1000);

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

void check(ucs_status_t status, const char* call, const std::string& context) {
  if (status != UCS_OK)
    throw UcxError(std::string("ucx: ") + call + " failed for " + context + ": " +
                   status_text(status));
}

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// UCX calls this (inside ucp_worker_progress) when the connection to the peer fails.
void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  *static_cast<int*>(arg) = static_cast<int>(status);
}

}  // namespace

// ---- UcxRequest ----

UcxRequest::UcxRequest(UcxRequest&& o) noexcept { *this = std::move(o); }

UcxRequest& UcxRequest::operator=(UcxRequest&& o) noexcept {
  if (this != &o) {
    release();
    worker_ = std::exchange(o.worker_, nullptr);
    endpoint_ = std::exchange(o.endpoint_, nullptr);
    request_ = std::exchange(o.request_, nullptr);
    kind_ = o.kind_;
    tag_ = o.tag_;
    tensor_ = std::move(o.tensor_);
    peer_ = std::move(o.peer_);
  }
  return *this;
}

UcxRequest::~UcxRequest() { release(); }

void UcxRequest::release() {
  if (!request_) return;
  if (ucp_request_check_status(request_) != UCS_INPROGRESS) {
    ucp_request_free(request_);
  } else {
    if (kind_ == Kind::receive) ucp_request_cancel(worker_->worker_, request_);
    worker_->adopt(request_, std::move(tensor_));
  }
  request_ = nullptr;
}

bool UcxRequest::done() const {
  return !request_ || ucp_request_check_status(request_) != UCS_INPROGRESS;
}

std::string UcxRequest::what() const {
  return (kind_ == Kind::send ? "send of " : "receive of ") + describe_tag(tag_) +
         (kind_ == Kind::send ? " to " : " from ") + peer_ + " (" + tensor_.describe() + ")";
}

Tensor UcxRequest::wait(std::optional<std::chrono::milliseconds> timeout) {
  if (!worker_) throw std::logic_error("ucx: wait on an empty request");
  const auto limit = timeout.value_or(worker_->options_.timeout);
  const auto deadline = Clock::now() + limit;
  ucs_status_t status = UCS_OK;
  std::size_t length = 0;
  if (request_) {
    while (ucp_request_check_status(request_) == UCS_INPROGRESS) {
      if (endpoint_ && endpoint_->failure_ != 0) {
        const std::string reason = status_text(static_cast<ucs_status_t>(endpoint_->failure_));
        const std::string op = what();
        release();
        throw UcxError("ucx: " + op + " failed: the connection to " + peer_ + " broke (" + reason + ")");
      }
      if (worker_->progress()) continue;
      if (Clock::now() < deadline) {
        std::this_thread::yield();
        continue;
      }
      // Deadline: cancel a receive and give it a moment to report; a send cannot be
      // cancelled, so the worker keeps its buffer until UCX is done with it.
      if (kind_ == Kind::receive) {
        ucp_request_cancel(worker_->worker_, request_);
        const auto grace = Clock::now() + kCancelGrace;
        while (ucp_request_check_status(request_) == UCS_INPROGRESS && Clock::now() < grace)
          if (!worker_->progress()) std::this_thread::yield();
        if (ucp_request_check_status(request_) == UCS_OK) break;  // it made it after all
      }
      const std::string op = what();
      release();
      throw UcxTimeout("ucx: " + op + " did not complete within " + ms_text(limit) + " on " +
                       worker_->options_.name);
    }
    if (kind_ == Kind::receive) {
      ucp_tag_recv_info_t info{};
      status = ucp_tag_recv_request_test(request_, &info);
      length = info.length;
    } else {
      status = ucp_request_check_status(request_);
    }
    ucp_request_free(request_);
    request_ = nullptr;
  }
  if (status == UCS_ERR_MESSAGE_TRUNCATED)
    throw UcxError("ucx: " + what() + ": the message is longer than the " +
                   std::to_string(tensor_.bytes()) + " bytes expected");
  if (status != UCS_OK) throw UcxError("ucx: " + what() + " failed: " + status_text(status));
  if (kind_ == Kind::receive && length != tensor_.bytes())
    throw UcxError("ucx: " + what() + ": received " + std::to_string(length) + " bytes, expected " +
                   std::to_string(tensor_.bytes()));
  return tensor_;
}

// ---- UcxEndpoint ----

UcxRequest UcxEndpoint::post_send(std::uint64_t tag, const Tensor& tensor) {
  if (!tensor.defined() || !tensor.device().is_cpu())
    throw std::invalid_argument("ucx: send of " + describe_tag(tag) + " to " + peer_ +
                                ": only host tensors can be sent, got " +
                                (tensor.defined() ? tensor.describe() : "an empty tensor"));
  UcxRequest r;
  r.worker_ = worker_;
  r.endpoint_ = this;
  r.kind_ = UcxRequest::Kind::send;
  r.tag_ = tag;
  r.tensor_ = tensor;
  r.peer_ = peer_;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  const ucs_status_ptr_t p = ucp_tag_send_nbx(ep_, tensor.raw(), tensor.bytes(), tag, &param);
  if (UCS_PTR_IS_ERR(p))
    throw UcxError("ucx: ucp_tag_send_nbx failed for " + r.what() + ": " +
                   status_text(UCS_PTR_STATUS(p)));
  r.request_ = p;
  return r;
}

UcxRequest UcxEndpoint::post_receive(std::uint64_t tag, const Shape& shape, DType dtype) {
  UcxRequest r;
  r.worker_ = worker_;
  r.endpoint_ = this;
  r.kind_ = UcxRequest::Kind::receive;
  r.tag_ = tag;
  r.tensor_ = worker_->receive_buffers_->take(shape, dtype);  // UCX overwrites every byte
  r.peer_ = peer_;
  // No immediate completion: the length of what arrived is read from the request.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  const ucs_status_ptr_t p = ucp_tag_recv_nbx(worker_->worker_, r.tensor_.raw(), r.tensor_.bytes(),
                                              tag, ~ucp_tag_t{0}, &param);
  if (UCS_PTR_IS_ERR(p))
    throw UcxError("ucx: ucp_tag_recv_nbx failed for " + r.what() + ": " +
                   status_text(UCS_PTR_STATUS(p)));
  if (p == nullptr) throw std::logic_error("ucx: ucp_tag_recv_nbx completed immediately");
  r.request_ = p;
  return r;
}

void UcxEndpoint::send(std::uint64_t tag, const Tensor& tensor,
                       std::optional<std::chrono::milliseconds> timeout) {
  post_send(tag, tensor).wait(timeout);
}

Tensor UcxEndpoint::receive(std::uint64_t tag, const Shape& shape, DType dtype,
                            std::optional<std::chrono::milliseconds> timeout) {
  return post_receive(tag, shape, dtype).wait(timeout);
}

std::string UcxEndpoint::transport_info() const {
  char* buf = nullptr;
  std::size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  if (!f) return "";
  ucp_ep_print_info(ep_, f);
  std::fclose(f);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

// ---- UcxWorker ----

UcxWorker::UcxWorker(UcxOptions options) : options_(std::move(options)) {
  const std::string self = "worker " + options_.name;
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read", self);
  if (!options_.transports.empty()) {
    const ucs_status_t s = ucp_config_modify(config, "TLS", options_.transports.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      check(s, "ucp_config_modify", self + " with TLS=" + options_.transports);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | (options_.wakeup ? UCP_FEATURE_WAKEUP : 0);
  const ucs_status_t init = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(init, "ucp_init",
        self + (options_.transports.empty() ? "" : " with TLS=" + options_.transports));

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  const ucs_status_t created = ucp_worker_create(context_, &wparams, &worker_);
  if (created != UCS_OK) {
    ucp_cleanup(context_);
    check(created, "ucp_worker_create", self);
  }
  if (options_.wakeup && ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;
}

UcxWorker::~UcxWorker() {
  const auto deadline = Clock::now() + close_timeout_;
  // Flush first: a send completes locally before the peer has it, and a forced close
  // would drop what is still on the wire.
  flush(deadline);
  for (auto& ep : endpoints_) {
    // A forced close is defined only with peer failure detection on both sides; else
    // the close flushes and waits for the peer (at most until the deadline).
    ucp_request_param_t param{};
    if (options_.detect_peer_failure) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    const ucs_status_ptr_t p = ucp_ep_close_nbx(ep->ep_, &param);
    if (p != nullptr && !UCS_PTR_IS_ERR(p)) {
      while (ucp_request_check_status(p) == UCS_INPROGRESS && Clock::now() < deadline)
        if (!ucp_worker_progress(worker_)) std::this_thread::yield();
      ucp_request_free(p);
    }
  }
  reap_orphans();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  orphans_.clear();  // UCX is gone: their buffers can go too
}

void UcxWorker::flush(Clock::time_point deadline) {
  ucp_request_param_t param{};
  const ucs_status_ptr_t p = ucp_worker_flush_nbx(worker_, &param);
  if (p == nullptr || UCS_PTR_IS_ERR(p)) return;
  while (ucp_request_check_status(p) == UCS_INPROGRESS && Clock::now() < deadline)
    if (!ucp_worker_progress(worker_)) std::this_thread::yield();
  ucp_request_free(p);
}

std::vector<std::byte> UcxWorker::address() const {
  ucp_address_t* addr = nullptr;
  std::size_t length = 0;
  check(ucp_worker_get_address(worker_, &addr, &length), "ucp_worker_get_address",
        "worker " + options_.name);
  const auto* bytes = reinterpret_cast<const std::byte*>(addr);
  std::vector<std::byte> raw(bytes, bytes + length);
  ucp_worker_release_address(worker_, addr);
  return seal_worker_address(raw);
}

UcxEndpoint& UcxWorker::connect(std::span<const std::byte> sealed_address, std::string peer) {
  const std::span<const std::byte> peer_address = open_worker_address(sealed_address, peer);
  auto endpoint = std::unique_ptr<UcxEndpoint>(new UcxEndpoint(*this, nullptr, std::move(peer)));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  if (options_.detect_peer_failure) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = on_endpoint_error;
    params.err_handler.arg = &endpoint->failure_;
  }
  ucp_ep_h ep = nullptr;
  check(ucp_ep_create(worker_, &params, &ep), "ucp_ep_create",
        "a connection from " + options_.name + " to " + endpoint->peer_);
  endpoint->ep_ = ep;
  endpoints_.push_back(std::move(endpoint));
  return *endpoints_.back();
}

bool UcxWorker::progress() {
  const bool any = ucp_worker_progress(worker_) != 0;
  if (!orphans_.empty()) reap_orphans();
  return any;
}

bool UcxWorker::wait_for_event(std::chrono::microseconds timeout, int other_fd) {
  if (event_fd_ < 0) return false;
  // Armed only once progress() drained everything: an event that came before the arm
  // makes it answer BUSY, so none is slept through.
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return true;
  if (armed != UCS_OK) return false;
  pollfd fds[2] = {{event_fd_, POLLIN, 0}, {other_fd, POLLIN, 0}};
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
  ::poll(fds, other_fd >= 0 ? 2 : 1, static_cast<int>(ms));
  return true;
}

void UcxWorker::adopt(void* request, Tensor keep_alive) {
  orphans_.push_back({request, std::move(keep_alive)});
}

void UcxWorker::reap_orphans() {
  std::erase_if(orphans_, [](const Orphan& o) {
    if (ucp_request_check_status(o.request) == UCS_INPROGRESS) return false;
    ucp_request_free(o.request);
    return true;
  });
}

}  // namespace conveyor
