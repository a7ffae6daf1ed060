// The NCCL RemoteChannel (GPU 0 and GPU 1 of this process standing for two processes):
// pipeline tags of its edges go over NCCL and complete on its thread once the bytes have
// moved, other tags go to the host channel, and a receive that never gets its message
// fails through its callback within its timeout. Needs two GPUs; prints why it skipped.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/nccl/nccl_test_support.hpp"
#include "transport/nccl/nccl_remote_channel.hpp"
#include "transport/nccl/nccl_rendezvous.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor {
namespace {

using namespace nccl_testing;
using namespace std::chrono_literals;

// Records what reaches the host channel and completes it at once.
class HostRecorder final : public RemoteChannel {
 public:
  void send(std::uint64_t tag, const Tensor& t, std::chrono::milliseconds, Done done) override {
    {
      std::lock_guard lock(mutex);
      tags.push_back(tag);
    }
    done(t, nullptr);
  }
  void receive(std::uint64_t tag, const Shape& shape, DType dtype, std::chrono::milliseconds,
               Done done) override {
    {
      std::lock_guard lock(mutex);
      tags.push_back(tag);
    }
    done(Tensor::zeros(shape, dtype), nullptr);
  }
  std::string name() const override { return "host recorder"; }
  std::mutex mutex;
  std::vector<std::uint64_t> tags;
};

std::uint64_t act_tag(int mb) {
  return pack_tag({.edge = 0, .step = 1, .micro_batch = mb, .kind = TagKind::activation});
}

// The result of one channel operation, waited for with a bound.
struct Outcome {
  std::promise<std::pair<Tensor, std::string>> promise;
  std::future<std::pair<Tensor, std::string>> future = promise.get_future();
  RemoteChannel::Done done() {
    return [this](Tensor t, std::exception_ptr e) {
      std::string error;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          error = x.what();
        }
      }
      promise.set_value({std::move(t), error});
    };
  }
  std::pair<Tensor, std::string> get() {
    REQUIRE(future.wait_for(30s) == std::future_status::ready);
    return future.get();
  }
};

TEST_CASE("gpu: an nccl remote channel moves its edges' tensors bitwise and the rest over the host channel") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  constexpr int kMessages = 5;
  const Shape shape{3, 257};
  const auto bits = [&](int k) { return random_bits(shape.numel() * 2, 500 + k); };
  std::vector<std::vector<std::uint8_t>> received(kMessages);
  auto host0 = std::make_shared<HostRecorder>();
  auto host1 = std::make_shared<HostRecorder>();

  run_ranks(
      [&] {
        RendezvousClient store(testing::client_options(server));
        NcclRemoteChannel ch(host0, "node 1");
        ch.add_sender(TagKind::activation, 0,
                      connect_nccl_sender(store, {.name = "act 0->1", .device = 0, .timeout = 30s}));
        DeviceStream compute(0);
        std::vector<Outcome> sent(kMessages);
        for (int k = 0; k < kMessages; ++k)
          ch.send(act_tag(k), upload(bits(k), shape, DType::bf16, 0, compute), 30s, sent[k].done());
        for (auto& o : sent) CHECK(o.get().second == "");
        Outcome weight;
        ch.send(pack_tag({.edge = 0, .step = 0, .micro_batch = 3, .kind = TagKind::control}),
                Tensor::zeros(Shape{4}), 30s, weight.done());
        CHECK(weight.get().second == "");
      },
      [&] {
        RendezvousClient store(testing::client_options(server));
        NcclRemoteChannel ch(host1, "node 0");
        ch.add_receiver(TagKind::activation, 0,
                        connect_nccl_receiver(store, {.name = "act 0->1", .device = 1, .timeout = 30s}));
        DeviceStream compute(1);
        std::vector<Outcome> got(kMessages);
        for (int k = 0; k < kMessages; ++k) ch.receive(act_tag(k), shape, DType::bf16, 30s, got[k].done());
        for (int k = 0; k < kMessages; ++k) {
          auto [t, error] = got[k].get();
          REQUIRE(error == "");
          CHECK(t.device() == Device::cuda(1));
          received[k] = download(t, compute);
        }
      });

  for (int k = 0; k < kMessages; ++k) CHECK(received[k] == bits(k));
  CHECK(host0->tags.size() == 1);  // the weight, not the activations
  CHECK(host1->tags.empty());
}

TEST_CASE("gpu: an nccl remote channel fails a receive that never arrives within its timeout") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  std::atomic<bool> receiver_done{false};
  std::string error, later_error;
  double seconds = 0;

  run_ranks(
      [&] {  // joins, never sends
        RendezvousClient store(testing::client_options(server));
        auto tx = connect_nccl_sender(store, {.name = "act 2->3", .device = 0, .timeout = 2s});
        while (!receiver_done.load()) std::this_thread::sleep_for(1ms);
      },
      [&] {
        RendezvousClient store(testing::client_options(server));
        NcclRemoteChannel ch(std::make_shared<HostRecorder>(), "node 0");
        ch.add_receiver(TagKind::activation, 2,
                        connect_nccl_receiver(store, {.name = "act 2->3", .device = 1, .timeout = 2s}));
        const auto start = std::chrono::steady_clock::now();
        Outcome first;
        ch.receive(pack_tag({.edge = 2, .step = 7, .micro_batch = 1, .kind = TagKind::activation}),
                   Shape{3, 1001}, DType::bf16, 2s, first.done());
        error = first.get().second;
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        Outcome second;  // the edge is dead now: fails at once
        ch.receive(pack_tag({.edge = 2, .step = 7, .micro_batch = 2, .kind = TagKind::activation}),
                   Shape{3, 1001}, DType::bf16, 2s, second.done());
        later_error = second.get().second;
        receiver_done = true;
      });

  INFO(error);
  CHECK(error.find("act 2->3") != std::string::npos);
  CHECK(error.find("did not complete within 2 s") != std::string::npos);
  CHECK(seconds >= 1.9);
  CHECK(seconds < 2.0 + 3.0);
  CHECK(later_error.find("aborted") != std::string::npos);
}

}  // namespace
}  // namespace conveyor
#endif
