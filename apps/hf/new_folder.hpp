#pragma once
// A folder that appears whole or not at all, as `hf import` and `hf export` write theirs:
// filled in a hidden sibling (".NAME.tmp-PID"), synced, then renamed to its name. A
// failure while filling removes the sibling; the named folder never exists half-written.
#include <filesystem>
#include <functional>
#include <string>

namespace conveyor {

/// `out` (an --out argument) as a folder to create: normalised ("dir/" is "dir").
/// Throws InputError naming --out when it names no folder, exists, or its parent is not
/// a folder.
std::filesystem::path new_folder_path(const std::string& out);

/// Calls `fill` with the hidden sibling of `out` (created empty), then renames it to `out`.
/// REQUIRES: `out` from new_folder_path. Whatever `fill` throws is rethrown after the
/// sibling is removed.
void write_new_folder(const std::filesystem::path& out, const std::function<void(const std::filesystem::path&)>& fill);

}  // namespace conveyor
