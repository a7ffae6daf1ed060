#pragma once
// A bound on the work a config can ask for. YAML aliases share the node they name, so a
// 700-byte file of nested anchors (nine aliases a level, eight levels) stands for 9^8
// nodes: every walk over it (reading a key, printing a value in an error) is exponential.
// The loader counts nodes as aliases expand, stopping at the bound, before anything else
// looks at a document.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

namespace conveyor {

/// Far above any real config: conveyor's has about 70 keys (140 nodes with their names);
/// a fault.inject list of a thousand entries is 1001.
inline constexpr std::size_t kMaxConfigNodes = 10'000;

/// The nodes of `node`, counting a node once for every way it is reached (aliases
/// expanded), mapping keys included; counting stops past `limit`, so the result is at
/// most limit + 1 and the work O(limit).
std::size_t expanded_node_count(const YAML::Node& node, std::size_t limit);

/// THROWS InputError naming `where` (a file, "--set KEY") when `node` expands to more
/// than kMaxConfigNodes nodes.
void refuse_oversized_yaml(const YAML::Node& node, const std::string& where);

}  // namespace conveyor
