#pragma once
// What `conveyor --version` prints: the version, and what this binary was built with,
// which is what a bug report needs first (a CPU-only build runs no GPU config).
#include <string>

namespace conveyor {

/// One line per item, the first "conveyor X.Y.Z"; no newline after the last (CLI11 ends it).
std::string version_text();

}  // namespace conveyor
