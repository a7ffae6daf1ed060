#pragma once

namespace conveyor {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

}  // namespace conveyor
