#include "actors/checkpoint/partition_check.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/tensor_names.hpp"
#include "actors/plan/schedule/partitioner.hpp"
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::checkpoint {
namespace {

// Where a tensor of the model lives.
struct Place {
  enum Kind { half_block, embedding, head } kind = half_block;
  std::int64_t half = 0;  // with half_block: 2B (attention) or 2B + 1 (MLP) of block B
};

// Blocks beyond this are not a model's (the manifest's partition entries stop at 1e15
// half blocks too); their half index would overflow.
constexpr std::int64_t kMaxBlock = std::int64_t{1} << 50;

std::optional<Place> place_of(std::string_view name) {
  for (auto prefix : kStatePrefixes)
    if (name.starts_with(prefix)) {
      name.remove_prefix(prefix.size());
      break;
    }
  if (name.starts_with("wte.") || name.starts_with("wpe.")) return Place{Place::embedding};
  if (name.starts_with("ln_f.") || name.starts_with("norm_f.") || name.starts_with("lm_head."))
    return Place{Place::head};
  constexpr std::string_view kBlocks = "blocks.";
  if (!name.starts_with(kBlocks)) return std::nullopt;
  name.remove_prefix(kBlocks.size());
  const auto dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  std::int64_t block = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, block);
  if (ec != std::errc{} || end != name.data() + dot || block < 0 || block > kMaxBlock) return std::nullopt;
  const std::string_view part = name.substr(dot + 1);
  if (part.starts_with("ln1.") || part.starts_with("attn_norm.") || part.starts_with("attn."))
    return Place{Place::half_block, 2 * block};
  if (part.starts_with("ln2.") || part.starts_with("mlp_norm.") || part.starts_with("mlp."))
    return Place{Place::half_block, 2 * block + 1};
  return std::nullopt;
}

std::string blocks(std::int64_t halves) { return sched::format_half_blocks(halves); }

std::string describe(const Place& p) {
  if (p.kind == Place::embedding) return "the embedding";
  if (p.kind == Place::head) return "the LM head";
  return "block " + std::to_string(p.half / 2) + "'s " + (p.half % 2 == 0 ? "attention" : "MLP") + " half";
}

}  // namespace

void check_partition_against_shards(const Manifest& m, const std::string& path) {
  const auto& halves = m.partition_halves;
  const int stages = m.stages;
  const int chunks = static_cast<int>(halves.size()) / stages;  // parse_manifest: a multiple
  std::string partition;
  for (auto h : halves) partition += (partition.empty() ? "" : ", ") + blocks(h);
  partition = "partition [" + partition + "]";
  if (const auto expected = sched::schedule_chunks(m.schedule, chunks); expected != chunks)
    throw CheckpointError(path, partition + " has " + std::to_string(halves.size()) + " entries for " +
                                    std::to_string(stages) + " stages, but " + m.schedule + " runs " +
                                    std::to_string(expected) + " chunks per stage (" +
                                    std::to_string(expected * stages) + " entries)");
  sched::Schedule placement;  // only its rank and chunk → model stage mapping is used
  placement.spec = sched::ScheduleSpec{m.schedule, stages, 1, chunks};
  std::vector<std::int64_t> first(halves.size() + 1, 0);  // model stage k: [first[k], first[k + 1])
  for (std::size_t k = 0; k < halves.size(); ++k) first[k + 1] = first[k] + halves[k];
  const int last_model_stage = static_cast<int>(halves.size()) - 1;

  std::int64_t highest_half = -1;
  for (const auto& shard : m.shards) {
    std::vector<int> held;  // the model stages of this shard's stage, chunk by chunk
    for (int c = 0; c < chunks; ++c) held.push_back(placement.model_stage(shard.stage, c));
    const auto holds = [&](int model_stage) { return std::find(held.begin(), held.end(), model_stage) != held.end(); };
    std::string given;
    for (int k : held)
      given += (given.empty() ? "" : " and ") + ("[" + blocks(first[k]) + ", " + blocks(first[k + 1]) + ")");
    for (const auto& name : shard.tensors) {
      const auto place = place_of(name);
      if (!place) continue;
      bool ok = false;
      if (place->kind == Place::embedding) ok = holds(0);
      else if (place->kind == Place::head) ok = holds(last_model_stage);
      else {
        highest_half = std::max(highest_half, place->half);
        ok = std::any_of(held.begin(), held.end(),
                         [&](int k) { return place->half >= first[k] && place->half < first[k + 1]; });
      }
      if (!ok)
        throw CheckpointError(
            path, partition + " (blocks per model stage) does not match the shards: stage " +
                      std::to_string(shard.stage) + "'s shard " + shard.file + " holds " + name + " (" +
                      describe(*place) + "), but the partition gives stage " + std::to_string(shard.stage) +
                      " blocks " + given + (holds(0) ? " and the embedding" : "") +
                      (holds(last_model_stage) ? " and the LM head" : ""));
    }
  }
  const std::int64_t total = first.back();
  if (highest_half >= 0 && total != 2 * (highest_half / 2 + 1))
    throw CheckpointError(path, partition + " (blocks per model stage) does not match the shards: it counts " +
                                    blocks(total) + " blocks, the shards hold blocks 0 to " +
                                    std::to_string(highest_half / 2) + " (" + std::to_string(highest_half / 2 + 1) +
                                    ")");
}

}  // namespace conveyor::checkpoint
