#pragma once
// The command a user runs to continue a stopped run, printed after SIGTERM: the same
// config and overrides, the same run folder, `--resume latest`. Arguments are quoted for
// a POSIX shell where needed, so the line can be pasted as it is.
#include <string>
#include <vector>

namespace conveyor {

/// `word` as one POSIX shell word: unchanged when it holds only safe characters
/// (letters, digits, and @%+=:,./_-), else in single quotes.
std::string shell_quote(const std::string& word);

/// "conveyor train CONFIG --set K=V ... --out RUN_DIR --resume latest" plus `extra`.
std::string resume_command(const std::string& config, const std::vector<std::string>& overrides,
                           const std::string& run_dir, const std::vector<std::string>& extra = {});

}  // namespace conveyor
