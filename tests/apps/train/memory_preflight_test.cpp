// The host-memory preflight refuses only what cannot fit, naming the keys to change.
#include <doctest/doctest.h>

#include "apps/config/config_loader.hpp"
#include "apps/train/memory_preflight.hpp"

using namespace conveyor;

TEST_CASE("memory preflight: a stage too large for the machine is refused naming its keys") {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  const RunConfig tiny = load_run_config("configs/tiny.yaml", {});
  CHECK_FALSE(host_memory_problem(tiny, 1.0 * GiB));
  // 8192 layers (the most model.layers takes) of d_model 1024: 12·1024²·8192 parameters,
  // 16 bytes each on the CPU, over 4 stages.
  const RunConfig deep =
      load_run_config("configs/tiny.yaml", {"model.layers=8192", "model.d_model=1024", "pipeline.stages=4"});
  const auto e = largest_stage_memory(deep);
  CHECK(e.state_bytes >= 12.0 * 1024 * 1024 * 8192 * 16 / 4);
  const auto why = host_memory_problem(deep, 24.0 * GiB);
  REQUIRE(why);
  for (const char* part : {"model.layers 8192", "pipeline.stages 4", "this machine has 24.0 GiB"})
    CHECK_MESSAGE(why->find(part) != std::string::npos, *why);
  // A mistyped d_model must not overflow into something that fits.
  const RunConfig wide = load_run_config("", {"model.d_model=1000000000", "model.heads=1"});
  CHECK(host_memory_problem(wide, 1e15));
  // Micro-batches: the activations one micro-batch leaves.
  const RunConfig big_batch = load_run_config("configs/tiny.yaml", {"pipeline.micro_batch_size=1000000000"});
  const auto act = host_memory_problem(big_batch, 24.0 * GiB);
  REQUIRE(act);
  CHECK(act->find("pipeline.micro_batch_size 1000000000") != std::string::npos);
  // The schedule's peak, not one micro-batch: 65536 x 64 tokens keep ~20 GiB a micro-batch
  // in tiny's one-block stages, which fit 24 GiB alone; 1F1B keeps 4 in flight on the
  // first stage, 10 over the 4 stages of one process (it was OOM-killed before).
  const RunConfig wide_batch = load_run_config("configs/tiny.yaml", {"pipeline.micro_batch_size=65536"});
  const auto first = largest_stage_memory(wide_batch);
  CHECK(first.in_flight == 4);
  CHECK(first.activation_bytes >= 4 * 4.0 * 65536 * 64 * (15 * 64 + 4 * 64));
  CHECK(process_memory(wide_batch, 1).activation_bytes >= 10 * 4.0 * 65536 * 64 * (15 * 64 + 4 * 64));
  CHECK(process_memory(wide_batch, 2).total() < process_memory(wide_batch, 1).total());
  const auto peak = host_memory_problem(wide_batch, 24.0 * GiB);
  REQUIRE(peak);
  for (const char* part : {"in one process", "up to 4 micro-batch(es) in flight", "pipeline.schedule 1f1b"})
    CHECK_MESSAGE(peak->find(part) != std::string::npos, *peak);
  // GPipe keeps every micro-batch in flight.
  CHECK(largest_stage_memory(load_run_config("configs/tiny.yaml", {"pipeline.schedule=gpipe"})).in_flight == 8);
  // GPU stages build their parameters on the host: 4 bytes each, no activations.
  const RunConfig gpu = load_run_config("configs/gpt-1b-2gpu.yaml", {});
  const auto g = largest_stage_memory(gpu);
  CHECK(g.activation_bytes == 0);
  CHECK(g.state_bytes < 4.0 * GiB);
  CHECK(host_memory_bytes().value_or(1) > 0);
}
