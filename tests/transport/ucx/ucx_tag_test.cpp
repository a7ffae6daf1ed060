// The tag packs (edge, step, micro-batch, kind) into 64 bits without overlap, unpacks
// to the same fields, and refuses fields that do not fit.
#include "transport/ucx/ucx_tag.hpp"

#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>

using namespace conveyor;

TEST_CASE("a UCX tag unpacks to the fields it was packed from") {
  const TagFields cases[] = {
      {0, 0, 0, TagKind::activation},
      {3, 12, 5, TagKind::gradient},
      {kMaxTagEdge, kMaxTagStep, kMaxTagMicroBatch, TagKind::bench},
      {1, kMaxTagStep, 0, TagKind::control},
      {kMaxTagEdge, 0, kMaxTagMicroBatch, TagKind::activation},
      {7, 3, 41, TagKind::restore},
  };
  for (const TagFields& f : cases) {
    CAPTURE(describe_tag(pack_tag(f)));
    CHECK(unpack_tag(pack_tag(f)) == f);
  }
  CHECK(pack_tag({3, 12, 5, TagKind::activation}) == 0x000300050000000cULL);
  CHECK(pack_tag({0, 0, 0, TagKind::gradient}) == 0x1000000000000000ULL);
}

TEST_CASE("UCX tags of different messages differ in every field") {
  std::set<std::uint64_t> seen;
  int n = 0;
  for (int edge : {0, 1, 4095})
    for (std::int64_t step : {std::int64_t{0}, std::int64_t{1}, kMaxTagStep})
      for (int mb : {0, 1, 65535})
        for (TagKind kind : {TagKind::activation, TagKind::gradient, TagKind::control, TagKind::bench,
                              TagKind::restore}) {
          seen.insert(pack_tag({edge, step, mb, kind}));
          ++n;
        }
  CHECK(seen.size() == static_cast<std::size_t>(n));
}

TEST_CASE("a UCX tag field that does not fit is refused with its name") {
  const auto error = [](const TagFields& f) {
    try {
      pack_tag(f);
    } catch (const std::out_of_range& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  CHECK(error({kMaxTagEdge + 1, 0, 0, TagKind::activation}).find("edge 4096") != std::string::npos);
  CHECK(error({-1, 0, 0, TagKind::activation}).find("edge -1") != std::string::npos);
  CHECK(error({0, kMaxTagStep + 1, 0, TagKind::activation}).find("step 4294967296") != std::string::npos);
  CHECK(error({0, 0, kMaxTagMicroBatch + 1, TagKind::activation}).find("micro-batch 65536") != std::string::npos);
  CHECK(error({0, 0, 0, static_cast<TagKind>(9)}).find("kind 9") != std::string::npos);
  CHECK_THROWS_AS(unpack_tag(0xf000000000000000ULL), std::out_of_range);
}

TEST_CASE("a UCX tag describes itself by its fields") {
  CHECK(describe_tag(pack_tag({3, 12, 5, TagKind::activation})) ==
        "activation edge 3 step 12 mb 5 (tag 0x000300050000000c)");
  CHECK(describe_tag(pack_tag({3, 12, 5, TagKind::restore})).starts_with("restore edge 3 step 12 mb 5"));
  CHECK(describe_tag(0xf000000000000001ULL) == "tag 0xf000000000000001");
}
