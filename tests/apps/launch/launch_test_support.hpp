#pragma once
// Helpers for the launch tests: a fake environment and message checks.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "apps/launch/launch_spec.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::launch_test {

using Env = std::map<std::string, std::string>;

inline EnvLookup lookup(const Env& env) {
  return [env](const char* name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

// CHECKs that `msg` is one line holding every part.
inline void check_message(const std::string& msg, std::initializer_list<std::string> parts) {
  INFO("message: " << msg);
  CHECK(msg.find('\n') == std::string::npos);
  for (const auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing: " << p);
}

}  // namespace conveyor::launch_test
