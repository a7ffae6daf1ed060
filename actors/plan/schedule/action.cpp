#include "actors/plan/schedule/action.hpp"

#include <array>
#include <utility>

#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

// Longest names first, so "SEND_F" is not read as something shorter.
constexpr std::array<std::pair<std::string_view, ActionKind>, 8> kKinds{{
    {"SEND_F", ActionKind::SEND_F},
    {"RECV_F", ActionKind::RECV_F},
    {"SEND_B", ActionKind::SEND_B},
    {"RECV_B", ActionKind::RECV_B},
    {"F", ActionKind::F},
    {"B", ActionKind::B},
    {"I", ActionKind::I},
    {"W", ActionKind::W},
}};

[[noreturn]] void bad_action(std::string_view text, std::string_view why) {
  throw InputError("bad action \"" + std::string(text) + "\": " + std::string(why) +
                   " (expected <rank><KIND><micro-batch>[c<chunk>], e.g. 2F5, 1SEND_B3, 0F3c1)");
}

// Reads a non-negative decimal number at text[pos...]; advances pos. At most 9 digits, so
// the value fits an int.
int read_number(std::string_view whole, std::string_view text, std::size_t& pos,
                std::string_view what) {
  const std::size_t begin = pos;
  int value = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (pos - begin == 9) bad_action(whole, std::string(what) + " is too large");
    value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  if (pos == begin) bad_action(whole, "missing " + std::string(what));
  return value;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view kind_name(ActionKind kind) {
  for (const auto& [name, k] : kKinds) {
    if (k == kind) return name;
  }
  return "?";
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::F || kind == ActionKind::B || kind == ActionKind::I ||
         kind == ActionKind::W;
}

bool is_send(ActionKind kind) { return kind == ActionKind::SEND_F || kind == ActionKind::SEND_B; }

bool is_recv(ActionKind kind) { return kind == ActionKind::RECV_F || kind == ActionKind::RECV_B; }

bool is_input_backward(ActionKind kind) { return kind == ActionKind::B || kind == ActionKind::I; }

std::string Action::str() const { return str(false); }

std::string Action::str(bool show_chunk) const {
  std::string s = std::to_string(stage);
  s += kind_name(kind);
  s += std::to_string(micro_batch);
  if (show_chunk || chunk != 0) {
    s += 'c';
    s += std::to_string(chunk);
  }
  return s;
}

Action Action::parse(std::string_view whole) {
  const std::string_view text = trim(whole);
  if (text.empty()) bad_action(whole, "empty");
  Action a;
  std::size_t pos = 0;
  a.stage = read_number(whole, text, pos, "rank");
  bool found = false;
  for (const auto& [name, kind] : kKinds) {
    if (text.substr(pos, name.size()) == name) {
      a.kind = kind;
      pos += name.size();
      found = true;
      break;
    }
  }
  if (!found) bad_action(whole, "unknown kind (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)");
  a.micro_batch = read_number(whole, text, pos, "micro-batch");
  if (pos < text.size() && text[pos] == 'c') {
    ++pos;
    a.chunk = read_number(whole, text, pos, "chunk");
  }
  if (pos != text.size()) bad_action(whole, "unexpected text after the action");
  return a;
}

}  // namespace conveyor::sched
