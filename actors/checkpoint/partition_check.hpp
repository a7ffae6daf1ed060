#pragma once
// A manifest's "partition" against the tensors its shards list. The partition says which
// half blocks each model stage held (prefix sums of its entries, model stages in order:
// the embedding on the first, the final LayerNorm and LM head on the last); a shard is
// one pipeline stage's, which holds model stage chunk·P + stage of each of its chunks
// (zbv: stage and 2P−1−stage; actors/plan/schedule/schedule.hpp). What must hold:
// - every block tensor a shard lists (blocks.B.ln1|attn_norm|attn.* is block B's
//   attention half 2B, blocks.B.ln2|mlp_norm|mlp.* its MLP half 2B+1; with or without an
//   opt.m., opt.v. or master. prefix) lies in a half block the partition gives that
//   shard's stage;
// - wte.* and wpe.* lie on the stage holding model stage 0, ln_f.*, norm_f.* and lm_head.*
//   on the one holding the last;
// - the partition counts the blocks the shards hold: its halves sum to twice the highest
//   block listed + 1.
// Other names are not the partition's business (resharding refuses tensors no stage
// takes). The shards' files hold exactly the lists (load_checkpoint checks it, and each
// file's sha256 is the manifest's).
#include <string>

#include "actors/checkpoint/manifest.hpp"

namespace conveyor::checkpoint {

/// Throws CheckpointError(`manifest_path`, ...) naming the stage, its shard, the tensor
/// and the blocks the partition gives that stage, for the first violation above.
void check_partition_against_shards(const Manifest& manifest, const std::string& manifest_path);

}  // namespace conveyor::checkpoint
