#pragma once
// The 64-bit UCX tag of one tensor message. A receive matches on all 64 bits, so a tag
// must be unique among the messages in flight into one worker; (edge, step,
// micro-batch, kind) is, because the schedule sends each at most once per step.
//
//   bits 63..60  kind         4 bits   activation, gradient, control, bench, restore
//   bits 59..48  edge id     12 bits   0 .. 4095   (a pipeline edge between two processes)
//   bits 47..32  micro-batch 16 bits   0 .. 65535
//   bits 31..0   step        32 bits   0 .. 4294967295
#include <cstdint>
#include <string>

namespace conveyor {

enum class TagKind : std::uint8_t { activation = 0, gradient = 1, control = 2, bench = 3, restore = 4 };

struct TagFields {
  std::int64_t edge = 0;
  std::int64_t step = 0;
  std::int64_t micro_batch = 0;
  TagKind kind = TagKind::activation;
  bool operator==(const TagFields&) const = default;
};

inline constexpr std::int64_t kMaxTagEdge = (1 << 12) - 1;
inline constexpr std::int64_t kMaxTagMicroBatch = (1 << 16) - 1;
inline constexpr std::int64_t kMaxTagStep = (std::int64_t{1} << 32) - 1;

/// Packs the fields as above; throws std::out_of_range naming the field that does not fit.
std::uint64_t pack_tag(const TagFields& fields);
/// The inverse of pack_tag; throws std::out_of_range for an unknown kind.
TagFields unpack_tag(std::uint64_t tag);
/// "activation edge 3 step 12 mb 5 (tag 0x000300050000000c)" for error messages; a tag
/// that does not unpack prints as its hex value alone.
std::string describe_tag(std::uint64_t tag);

}  // namespace conveyor
