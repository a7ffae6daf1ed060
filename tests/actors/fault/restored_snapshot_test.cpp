// The snapshot a stage keeps of the state it was restored to from a copy
// (actors/fault/restored_snapshot.hpp): the copy's own tensors, not a second capture, where
// that is bit for bit the capture; a stage of several chunks or on a GPU captures again.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <string>

#include "actors/fault/restored_snapshot.hpp"
#include "kernels/model/stage_model.hpp"
#include "tests/actors/fault/small_gpt.hpp"

using namespace conveyor;
using conveyor::fault_test::small_model;

namespace {

StageSlice whole_model() {
  StageSlice s;
  s.first_block = 0;
  s.num_blocks = small_model().layers;
  s.has_embedding = true;
  s.has_head = true;
  return s;
}

RankPlacement one_chunk(Device device = Device::cpu()) {
  RankPlacement p;
  p.device = device;
  p.chunks.push_back(ChunkPlacement{0, 0, 0, whole_model()});
  return p;
}

std::map<std::string, std::string> bytes_by_name(const std::vector<NamedTensor>& tensors) {
  std::map<std::string, std::string> out;
  for (const auto& t : tensors)
    out[t.name] = std::string(static_cast<const char*>(t.tensor.raw()), t.tensor.bytes());
  return out;
}

}  // namespace

TEST_CASE("a one-chunk CPU stage keeps the copy it was restored from, bit for bit its capture, without a copy") {
  // The copy: a model's state after an optimizer step (so AdamW's moments are in it).
  auto source = make_cpu_stage_model(small_model(), whole_model(), 1);
  source->optimizer_step(AdamWConfig{}, 1e-2, 1.0f);
  const auto copy = source->capture_state();
  // The stage restored from it: a model of another seed.
  auto restored = make_cpu_stage_model(small_model(), whole_model(), 2);
  restored->restore_state(copy, source->optimizer_steps());

  const auto kept = restored_snapshot(one_chunk(), 7, copy, source->optimizer_steps());
  REQUIRE(kept.has_value());
  CHECK(kept->steps_done == 7);
  REQUIRE(kept->chunks.size() == 1);
  CHECK(kept->optimizer_steps() == restored->optimizer_steps());
  const auto tensors = kept->tensors();
  CHECK(bytes_by_name(tensors) == bytes_by_name(restored->snapshot()->tensors()));
  int moments = 0;
  for (const auto& t : tensors) moments += t.name.starts_with("opt.m.") || t.name.starts_with("opt.v.");
  CHECK(moments > 0);
  REQUIRE(tensors.size() == copy.size());
  for (std::size_t i = 0; i < copy.size(); ++i) CHECK(tensors[i].tensor.raw() == copy[i].tensor.raw());
}

TEST_CASE("a stage of several chunks or on a GPU captures its restored state again") {
  auto model = make_cpu_stage_model(small_model(), whole_model(), 1);
  const auto copy = model->capture_state();
  RankPlacement two = one_chunk();
  two.chunks.push_back(ChunkPlacement{1, 0, 1, whole_model()});
  CHECK_FALSE(restored_snapshot(two, 3, copy, 0).has_value());
  CHECK_FALSE(restored_snapshot(one_chunk(Device::cuda(0)), 3, copy, 0).has_value());
  CHECK(restored_snapshot(one_chunk(), 3, copy, 0).has_value());
}
