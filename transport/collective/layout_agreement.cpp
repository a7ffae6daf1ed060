#include "transport/collective/layout_agreement.hpp"

#include <sstream>

#include "transport/collective/collective_error.hpp"
#include "transport/collective/store_polling.hpp"
#include "transport/rendezvous/error.hpp"

namespace conveyor {
namespace {

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// "bucket 1 is f32x8 on rank 1 but f32x7 here": the first word that differs. The record
// is "<reduction> | <bucket 0> <bucket 1> ...", so word i ≥ 2 is bucket i - 2.
std::string first_difference(const std::string& mine, const std::string& theirs, int rank) {
  const auto a = words(mine);
  const auto b = words(theirs);
  std::string what;
  std::string here;
  std::string there;
  if (a.size() < 2 || b.size() < 2 || a[0] != b[0]) {
    what = "the reduction is ";
    there = b.empty() ? "?" : b[0];
    here = a.empty() ? "?" : a[0];
  } else {
    std::size_t i = 2;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    if (i < a.size() && i < b.size()) {
      what = "bucket " + std::to_string(i - 2) + " is ";
      there = b[i];
      here = a[i];
    } else {
      what = "the number of buckets is ";
      there = std::to_string(b.size() - 2);
      here = std::to_string(a.size() - 2);
    }
  }
  what += there;
  what += " on rank ";
  what += std::to_string(rank);
  what += " but ";
  what += here;
  what += " here";
  return what;
}

std::string seconds(std::chrono::milliseconds t) { return rendezvous::describe_duration(t); }

}  // namespace

std::string layout_record(const BucketLayout& layout, Reduction reduction) {
  std::string record = reduction == Reduction::average ? "average |" : "sum |";
  for (const auto& shape : layout) {
    record += ' ';
    record += dtype_name(shape.dtype);
    record += 'x';
    record += std::to_string(shape.elements);
  }
  return record;
}

void agree_on_layout(RendezvousClient& store, const StageGroup& group,
                     const BucketLayout& layout, Reduction reduction,
                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string mine = layout_record(layout, reduction);
  const std::string prefix = group.store_prefix() + "layout/";
  store.set(prefix + std::to_string(group.rank), mine);

  std::vector<std::string> keys;
  for (int r = 0; r < group.size; ++r) keys.push_back(prefix + std::to_string(r));
  const auto records = poll_keys(store, keys, deadline);

  std::vector<std::uint32_t> missing;
  for (int r = 0; r < group.size; ++r)
    if (!records[r]) missing.push_back(static_cast<std::uint32_t>(r));
  if (!missing.empty())
    throw CollectiveTimeout(group.describe() + ": " + rendezvous::describe_ranks(missing) +
                            " did not join within " +
                            seconds(timeout) + " (no layout under '" + prefix + "<rank>')");
  for (int r = 0; r < group.size; ++r) {
    const std::string theirs = rendezvous::to_text(*records[r]);
    if (theirs != mine)
      throw CollectiveError(group.describe() + ": the ranks bucket their gradients "
                            "differently: " + first_difference(mine, theirs, r) +
                            " (every replica of a stage must declare the same layout)");
  }
}

}  // namespace conveyor
