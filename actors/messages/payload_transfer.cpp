#include "actors/messages/payload_transfer.hpp"

#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <stdexcept>

#include "actors/messages/pending_payload.hpp"
#include "actors/messages/error_text.hpp"

namespace conveyor {
void log_transfer_error(const std::string& line) { fmt::print(stderr, "conveyor: {}\n", line); }

void send_payloads(RemoteChannel& channel, const std::vector<NamedTensor>& tensors,
                   const std::function<std::uint64_t(int)>& tag_of, std::chrono::milliseconds timeout,
                   std::string what, std::function<void(const std::string&)> on_error) {
  // One report for the whole list: the first failure says enough.
  auto reported = std::make_shared<std::once_flag>();
  for (std::size_t i = 0; i < tensors.size(); ++i)
    channel.send(tag_of(static_cast<int>(i)), tensors[i].tensor, timeout,
                 [=, name = tensors[i].name, channel_name = channel.name()](Tensor, std::exception_ptr e) {
                   if (!e) return;
                   std::call_once(*reported, [&] {
                     on_error(fmt::format("{}: sending {} over {} failed: {}", what, name,
                                          channel_name, exception_text(e)));
                   });
                 });
}

void receive_payloads(
    RemoteChannel& channel, std::vector<NamedTensor> tensors, std::chrono::milliseconds timeout,
    std::function<void(std::vector<NamedTensor>, std::exception_ptr)> done) {
  struct Pending {
    std::mutex mutex;
    std::vector<NamedTensor> tensors;
    std::size_t left = 0;
    bool failed = false;
    std::function<void(std::vector<NamedTensor>, std::exception_ptr)> done;
  };
  auto p = std::make_shared<Pending>();
  p->tensors = std::move(tensors);
  p->done = std::move(done);
  std::vector<std::size_t> to_receive;
  for (std::size_t i = 0; i < p->tensors.size(); ++i)
    if (pending_payload(p->tensors[i].tensor)) to_receive.push_back(i);
  p->left = to_receive.size();
  if (to_receive.empty()) {
    p->done(std::move(p->tensors), nullptr);
    return;
  }
  // Every shape and tag is read before the first receive is posted: a receive may
  // complete (and touch p->tensors) at once.
  struct Post {
    std::size_t index;
    std::uint64_t tag;
    Shape shape;
    DType dtype;
  };
  std::vector<Post> posts;
  for (auto i : to_receive) {
    const Tensor& t = p->tensors[i].tensor;
    posts.push_back({i, pending_payload(t)->tag(), t.shape(), t.dtype()});
  }
  for (const auto& post : posts)
    channel.receive(post.tag, post.shape, post.dtype, timeout,
                    [p, i = post.index, channel_name = channel.name()](Tensor t, std::exception_ptr e) {
                      std::unique_lock lock(p->mutex);
                      if (p->failed) return;
                      if (e) {
                        p->failed = true;
                        auto error = std::make_exception_ptr(std::runtime_error(fmt::format(
                            "{} over {}: {}", p->tensors[i].name, channel_name, exception_text(e))));
                        lock.unlock();
                        p->done({}, error);
                        return;
                      }
                      p->tensors[i].tensor = std::move(t);
                      if (--p->left > 0) return;
                      auto filled = std::move(p->tensors);
                      lock.unlock();
                      p->done(std::move(filled), nullptr);
                    });
}

}  // namespace conveyor
