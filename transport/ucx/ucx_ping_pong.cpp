#include "transport/ucx/ucx_ping_pong.hpp"

#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace conveyor {
namespace {

std::uint64_t bench_tag(int iteration, bool reply) {
  return pack_tag({.edge = 0, .step = iteration, .micro_batch = reply ? 1 : 0, .kind = TagKind::bench});
}

void check_arguments(std::size_t bytes, int iterations) {
  if (bytes < 4 || bytes % 4 != 0 || iterations < 1)
    throw std::invalid_argument(
        "ucx_ping_pong: bytes must be a positive multiple of 4 and iterations at least 1, got " +
        std::to_string(bytes) + " bytes, " + std::to_string(iterations) + " iterations");
}

}  // namespace

PingPongResult ucx_ping_pong(UcxEndpoint& peer, bool initiator, std::size_t bytes, int iterations) {
  check_arguments(bytes, iterations);
  const Shape shape{static_cast<std::int64_t>(bytes / 4)};
  const Tensor payload = Tensor::zeros(shape, DType::f32);
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  for (int i = 0; i <= iterations; ++i) {  // round 0 is the warm-up
    if (i == 1) start = Clock::now();
    if (initiator) {
      UcxRequest reply = peer.post_receive(bench_tag(i, true), shape, DType::f32);
      peer.send(bench_tag(i, false), payload);
      reply.wait();
    } else {
      const Tensor got = peer.receive(bench_tag(i, false), shape, DType::f32);
      peer.send(bench_tag(i, true), got);
    }
  }
  PingPongResult r;
  r.bytes = bytes;
  r.iterations = iterations;
  if (initiator) {
    const double total_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    r.round_trip_us = total_us / iterations;
    r.latency_us = r.round_trip_us / 2;
    r.bandwidth_gbs = static_cast<double>(bytes) / (r.latency_us * 1e3);
  }
  return r;
}

PingPongResult ucx_ping_pong(std::size_t bytes, int iterations, const UcxOptions& options) {
  check_arguments(bytes, iterations);
  UcxOptions a_options = options;
  a_options.name = "ping-pong initiator";
  UcxOptions b_options = options;
  b_options.name = "ping-pong responder";
  UcxWorker a(a_options);
  UcxWorker b(b_options);
  UcxEndpoint& a_to_b = a.connect(b.address(), b_options.name);
  UcxEndpoint& b_to_a = b.connect(a.address(), a_options.name);

  std::exception_ptr responder_error;
  std::thread responder([&] {
    try {
      ucx_ping_pong(b_to_a, false, bytes, iterations);
    } catch (...) {
      responder_error = std::current_exception();
    }
  });
  PingPongResult result;
  std::exception_ptr initiator_error;
  try {
    result = ucx_ping_pong(a_to_b, true, bytes, iterations);
  } catch (...) {
    initiator_error = std::current_exception();
  }
  responder.join();  // bounded: the responder's waits have deadlines too
  if (initiator_error) std::rethrow_exception(initiator_error);
  if (responder_error) std::rethrow_exception(responder_error);
  return result;
}

}  // namespace conveyor
