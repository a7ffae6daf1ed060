#pragma once
// A test that drives an installed program (Chromium, promtool) says so and passes when the
// program is absent, as the GPU tests do without a GPU: "skipped: no NAME".
#include <unistd.h>

#include <initializer_list>
#include <iostream>
#include <optional>
#include <string>

namespace conveyor::testing {

/// The first of `paths` that is an executable, or none.
inline std::optional<std::string> installed_tool(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return std::string(p);
  return std::nullopt;
}

}  // namespace conveyor::testing

/// Declares `const std::string var`, the first executable of the paths given, or returns
/// from the test case with "skipped: no NAME (install Debian's PACKAGE package)".
#define CONVEYOR_REQUIRE_TOOL(var, name, package, ...)                                      \
  const auto var##_found = ::conveyor::testing::installed_tool({__VA_ARGS__});              \
  if (!var##_found) {                                                                        \
    std::cout << "skipped: no " name " (install Debian's " package " package)\n";         \
    MESSAGE("skipped: no " name);                                                            \
    return;                                                                                  \
  }                                                                                          \
  const std::string var = *var##_found
