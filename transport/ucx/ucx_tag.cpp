#include "transport/ucx/ucx_tag.hpp"

#include <cstdio>
#include <stdexcept>

namespace conveyor {
namespace {

constexpr int kStepShift = 0;
constexpr int kMicroBatchShift = 32;
constexpr int kEdgeShift = 48;
constexpr int kKindShift = 60;
constexpr std::uint64_t kKindCount = 5;

void check_field(const char* name, std::int64_t value, std::int64_t max) {
  if (value < 0 || value > max)
    throw std::out_of_range(std::string("ucx tag: ") + name + " " + std::to_string(value) +
                            " does not fit (0 .. " + std::to_string(max) + ")");
}

const char* kind_name(TagKind kind) {
  switch (kind) {
    case TagKind::activation: return "activation";
    case TagKind::gradient: return "gradient";
    case TagKind::control: return "control";
    case TagKind::bench: return "bench";
    case TagKind::restore: return "restore";
  }
  return "?";
}

std::string hex(std::uint64_t tag) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(tag));
  return buf;
}

}  // namespace

std::uint64_t pack_tag(const TagFields& f) {
  check_field("edge", f.edge, kMaxTagEdge);
  check_field("step", f.step, kMaxTagStep);
  check_field("micro-batch", f.micro_batch, kMaxTagMicroBatch);
  if (static_cast<std::uint64_t>(f.kind) >= kKindCount)
    throw std::out_of_range("ucx tag: kind " + std::to_string(static_cast<int>(f.kind)) +
                            " is unknown");
  return static_cast<std::uint64_t>(f.kind) << kKindShift |
         static_cast<std::uint64_t>(f.edge) << kEdgeShift |
         static_cast<std::uint64_t>(f.micro_batch) << kMicroBatchShift |
         static_cast<std::uint64_t>(f.step) << kStepShift;
}

TagFields unpack_tag(std::uint64_t tag) {
  const std::uint64_t kind = tag >> kKindShift;
  if (kind >= kKindCount)
    throw std::out_of_range("ucx tag: " + hex(tag) + " has unknown kind " + std::to_string(kind));
  TagFields f;
  f.kind = static_cast<TagKind>(kind);
  f.edge = static_cast<std::int64_t>(tag >> kEdgeShift & kMaxTagEdge);
  f.micro_batch = static_cast<std::int64_t>(tag >> kMicroBatchShift & kMaxTagMicroBatch);
  f.step = static_cast<std::int64_t>(tag >> kStepShift & kMaxTagStep);
  return f;
}

std::string describe_tag(std::uint64_t tag) {
  if (tag >> kKindShift >= kKindCount) return "tag " + hex(tag);
  const TagFields f = unpack_tag(tag);
  return std::string(kind_name(f.kind)) + " edge " + std::to_string(f.edge) + " step " +
         std::to_string(f.step) + " mb " + std::to_string(f.micro_batch) + " (tag " + hex(tag) + ")";
}

}  // namespace conveyor
