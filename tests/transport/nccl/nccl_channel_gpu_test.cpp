// The NCCL channel between two ranks (GPU 0 and GPU 1, a thread each, ids through a real
// rendezvous server): bitwise transfers of random tensors, both directions at once, and
// bounded waits that name the edge. Needs two GPUs; prints why it skipped otherwise.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "tests/transport/nccl/nccl_test_support.hpp"
#include "transport/nccl/nccl_rendezvous.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor {
namespace {

using namespace nccl_testing;
using namespace std::chrono_literals;

struct Message {
  Shape shape;
  DType dtype;
};

// Odd sizes (none a multiple of NCCL's chunks or of 16 bytes), bf16 and fp32, one large
// enough to be split over several NCCL steps.
std::vector<Message> odd_messages() {
  return {{{1}, DType::bf16},          {{3, 5}, DType::f32},        {{7, 131}, DType::bf16},
          {{1023, 17}, DType::f32},    {{4099}, DType::bf16},       {{3, 1021, 343}, DType::f32},
          {{1, (1 << 21) + 3}, DType::bf16}};
}

std::size_t bytes_of(const Message& m) { return m.shape.numel() * dtype_size(m.dtype); }

TEST_CASE("gpu: an nccl edge moves random bf16 and fp32 tensors of odd sizes bitwise") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const auto messages = odd_messages();
  std::vector<std::vector<std::uint8_t>> received(messages.size());

  run_ranks(
      [&] {  // stage 0's process: the producer on GPU 0
        RendezvousClient store(testing::client_options(server));
        auto tx = connect_nccl_sender(store, {.name = "act 0->1", .device = 0, .timeout = 30s});
        DeviceStream compute(0);
        for (std::size_t i = 0; i < messages.size(); ++i)
          tx->send(upload(random_bits(bytes_of(messages[i]), 100 + i), messages[i].shape,
                          messages[i].dtype, 0, compute));
        tx->flush();
      },
      [&] {  // stage 1's process: the consumer on GPU 1
        RendezvousClient store(testing::client_options(server));
        auto rx = connect_nccl_receiver(store, {.name = "act 0->1", .device = 1, .timeout = 30s});
        DeviceStream compute(1);
        std::vector<Tensor> arrived;
        for (const auto& m : messages) arrived.push_back(rx->receive(m.shape, m.dtype));
        // The consumer's stream waits on each tensor's ready event: no flush before reading.
        for (std::size_t i = 0; i < arrived.size(); ++i) received[i] = download(arrived[i], compute);
        rx->flush();
      });

  for (std::size_t i = 0; i < messages.size(); ++i) {
    CAPTURE(i);
    const auto expected = random_bits(bytes_of(messages[i]), 100 + i);
    REQUIRE(received[i].size() == expected.size());
    CHECK(std::memcmp(received[i].data(), expected.data(), expected.size()) == 0);
  }
}

TEST_CASE("gpu: an activation edge and a gradient edge run both ways with sends queued first") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  // 1F1B's steady state: stage 0 sends activation k+1 before receiving gradient k, stage 1
  // sends gradient k before receiving activation k+1. With one communicator per direction
  // neither send waits on the other side's receive order.
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  constexpr int kMicroBatches = 6;
  const Shape shape{5, 77};
  std::vector<std::vector<std::uint8_t>> grads(kMicroBatches), acts(kMicroBatches);
  const auto act_bits = [&](int k) { return random_bits(shape.numel() * 2, 1000 + k); };
  const auto grad_bits = [&](int k) { return random_bits(shape.numel() * 4, 2000 + k); };

  run_ranks(
      [&] {
        RendezvousClient store(testing::client_options(server));
        auto act = connect_nccl_sender(store, {.name = "act 0->1", .device = 0, .timeout = 30s});
        auto grad = connect_nccl_receiver(store, {.name = "grad 1->0", .device = 0, .timeout = 30s});
        DeviceStream compute(0);
        act->send(upload(act_bits(0), shape, DType::bf16, 0, compute));
        for (int k = 0; k < kMicroBatches; ++k) {
          if (k + 1 < kMicroBatches) act->send(upload(act_bits(k + 1), shape, DType::bf16, 0, compute));
          grads[k] = download(grad->receive(shape, DType::f32), compute);
        }
        act->flush();
        grad->flush();
      },
      [&] {
        RendezvousClient store(testing::client_options(server));
        auto act = connect_nccl_receiver(store, {.name = "act 0->1", .device = 1, .timeout = 30s});
        auto grad = connect_nccl_sender(store, {.name = "grad 1->0", .device = 1, .timeout = 30s});
        DeviceStream compute(1);
        acts[0] = download(act->receive(shape, DType::bf16), compute);
        for (int k = 0; k < kMicroBatches; ++k) {
          grad->send(upload(grad_bits(k), shape, DType::f32, 1, compute));
          if (k + 1 < kMicroBatches) acts[k + 1] = download(act->receive(shape, DType::bf16), compute);
        }
        act->flush();
        grad->flush();
      });

  for (int k = 0; k < kMicroBatches; ++k) {
    CAPTURE(k);
    CHECK(acts[k] == act_bits(k));
    CHECK(grads[k] == grad_bits(k));
  }
}

TEST_CASE("gpu: a receive with no sender fails within the deadline naming the edge") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  const ncclUniqueId id = NcclCommunicator::new_id();
  const NcclEdge sender_edge{.name = "act 3->4", .device = 0, .timeout = 2s};
  const NcclEdge receiver_edge{.name = "act 3->4", .device = 1, .timeout = 2s};
  std::atomic<bool> receiver_done{false};
  std::string error;
  double seconds = 0;
  bool dead_afterwards = false;

  run_ranks(
      [&] {  // joins, then never sends until the receiver gave up
        NcclSendChannel tx(id, sender_edge);
        while (!receiver_done.load()) std::this_thread::sleep_for(1ms);
      },
      [&] {
        NcclRecvChannel rx(id, receiver_edge);
        (void)rx.receive({3, 1001}, DType::bf16);
        const auto start = std::chrono::steady_clock::now();
        try {
          rx.flush();
        } catch (const NcclTimeout& e) {
          error = e.what();
        }
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        try {
          rx.poll();
        } catch (const NcclError&) {
          dead_afterwards = true;
        }
        receiver_done = true;
      });

  INFO(error);
  CHECK(error.find("edge 'act 3->4'") != std::string::npos);
  CHECK(error.find("receive of bf16 (3, 1001)") != std::string::npos);
  CHECK(error.find("did not complete within 2 s") != std::string::npos);
  CHECK(error.find("aborted") != std::string::npos);
  CHECK(seconds >= 1.9);
  CHECK(seconds < 2.0 + 3.0);  // the deadline plus the abort
  CHECK(dead_afterwards);
}

TEST_CASE("gpu: a tensor from another device is refused naming the edge") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  const ncclUniqueId id = NcclCommunicator::new_id();
  std::string error;
  run_ranks(
      [&] {
        NcclSendChannel tx(id, {.name = "act 0->1", .device = 0, .timeout = 10s});
        DeviceStream other(1);
        try {
          tx.send(upload(random_bits(64, 7), {16}, DType::f32, 1, other));
        } catch (const std::invalid_argument& e) {
          error = e.what();
        }
      },
      [&] { NcclRecvChannel rx(id, {.name = "act 0->1", .device = 1, .timeout = 10s}); });
  INFO(error);
  CHECK(error.find("edge 'act 0->1'") != std::string::npos);
  CHECK(error.find("cuda:1") != std::string::npos);
}

TEST_CASE("gpu: an nccl edge whose peer joins but never connects fails within the deadline") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  // The peer joins the communicator but never makes the edge's first send: the receiver's
  // first receive is stuck connecting, inside NCCL, until the constructor aborts it.
  const ncclUniqueId id = NcclCommunicator::new_id();
  std::atomic<bool> receiver_done{false};
  std::string error;
  double seconds = 0;
  run_ranks(
      [&] {
        NcclCommunicator peer(id, 0, 0, "act 5->6", 10s, [](ncclComm_t) {});
        while (!receiver_done.load()) std::this_thread::sleep_for(1ms);
      },
      [&] {
        const auto start = std::chrono::steady_clock::now();
        try {
          NcclRecvChannel rx(id, {.name = "act 5->6", .device = 1, .timeout = 2s});
        } catch (const NcclTimeout& e) {
          error = e.what();
        }
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        receiver_done = true;
      });
  INFO(error);
  CHECK(error.find("edge 'act 5->6' (rank 1 on cuda:1)") != std::string::npos);
  CHECK(error.find("within 2 s") != std::string::npos);
  CHECK(seconds < 2.0 + 3.0);
}

// Last in the file: it leaves NCCL's bootstrap root of an unused id behind.
TEST_CASE("gpu: an nccl edge whose peer never joins fails setup within the deadline") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  const ncclUniqueId id = NcclCommunicator::new_id();  // rank 0 never uses it
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    NcclRecvChannel rx(id, {.name = "grad 2->1", .device = 1, .timeout = 1500ms});
  } catch (const NcclTimeout& e) {
    error = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(error);
  CHECK(error.find("edge 'grad 2->1' (rank 1 on cuda:1)") != std::string::npos);
  CHECK(error.find("joining the communicator") != std::string::npos);
  CHECK(error.find("the peer rank never joined") != std::string::npos);
  CHECK(seconds < 1.5 + 3.0);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
