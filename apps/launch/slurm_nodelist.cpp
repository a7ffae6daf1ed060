#include "apps/launch/slurm_nodelist.hpp"

#include <cctype>
#include <cstdint>
#include <string>
#include <variant>

#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  // digits of the lower bound, zero padding included
};
// One piece of an item: literal text, or the numbers of one bracket group.
using Part = std::variant<std::string, std::vector<Range>>;
using Item = std::vector<Part>;

// What is wrong with a list; the public functions name the variable and the list.
struct BadList {
  std::string why;
};

[[noreturn]] void fail(const std::string& why) { throw BadList{why}; }

template <class F>
auto naming(std::string_view variable, std::string_view nodelist, F&& f) {
  try {
    return f();
  } catch (const BadList& e) {
    throw InputError(std::string(variable) + "='" + std::string(nodelist) + "': " + e.why);
  }
}

std::string padded(std::uint64_t v, std::size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// REQUIRES: `text` is what stood between one '[' and its ']'.
std::vector<Range> parse_ranges(std::string_view nodelist, std::string_view text) {
  std::vector<Range> ranges;
  std::size_t pos = 0;
  auto number = [&](std::size_t& width) {
    const std::size_t start = pos;
    std::uint64_t v = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (pos - start >= 18) fail("number too long in '[" + std::string(text) + "]'");
      v = v * 10 + static_cast<std::uint64_t>(text[pos] - '0');
      ++pos;
    }
    if (pos == start) fail("expected a number in '[" + std::string(text) + "]'");
    width = pos - start;
    return v;
  };
  while (true) {
    Range r;
    r.lo = number(r.width);
    r.hi = r.lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      std::size_t hi_width = 0;
      r.hi = number(hi_width);
      if (r.hi < r.lo)
        fail("range " + padded(r.lo, r.width) + "-" + padded(r.hi, hi_width) +
                           " runs backwards");
    }
    ranges.push_back(r);
    if (pos == text.size()) return ranges;
    if (text[pos] != ',')
      fail("unexpected '" + std::string(1, text[pos]) + "' in '[" + std::string(text) +
                         "]'");
    ++pos;
  }
}

std::vector<Item> parse(std::string_view nodelist) {
  if (nodelist.empty()) fail("the list is empty");
  std::vector<Item> items(1);
  std::string text;
  auto end_text = [&] {
    if (!text.empty()) items.back().emplace_back(std::move(text));
    text.clear();
  };
  for (std::size_t pos = 0; pos < nodelist.size(); ++pos) {
    const char c = nodelist[pos];
    if (c == '[') {
      const std::size_t close = nodelist.find_first_of("[]", pos + 1);
      if (close == std::string_view::npos || nodelist[close] != ']')
        fail("'[' at position " + std::to_string(pos) + " is not closed");
      end_text();
      items.back().emplace_back(parse_ranges(nodelist, nodelist.substr(pos + 1, close - pos - 1)));
      pos = close;
    } else if (c == ']') {
      fail("']' at position " + std::to_string(pos) + " has no '['");
    } else if (c == ',') {
      end_text();
      if (items.back().empty()) fail("empty host name before position " + std::to_string(pos));
      items.emplace_back();
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      fail("space at position " + std::to_string(pos));
    } else {
      text += c;
    }
  }
  end_text();
  if (items.back().empty()) fail("the list ends with ','");
  return items;
}

// Appends every host of `item` from part `i` on, each prefixed by `prefix`.
void expand(std::string_view nodelist, const Item& item, std::size_t i, const std::string& prefix,
            std::vector<std::string>& out, std::size_t max_hosts) {
  if (i == item.size()) {
    if (out.size() == max_hosts)
      fail("expands to more than " + std::to_string(max_hosts) + " hosts");
    out.push_back(prefix);
    return;
  }
  if (const auto* text = std::get_if<std::string>(&item[i])) {
    expand(nodelist, item, i + 1, prefix + *text, out, max_hosts);
    return;
  }
  for (const Range& r : std::get<std::vector<Range>>(item[i]))
    for (std::uint64_t v = r.lo; v <= r.hi; ++v)
      expand(nodelist, item, i + 1, prefix + padded(v, r.width), out, max_hosts);
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist, std::size_t max_hosts,
                                               std::string_view variable) {
  return naming(variable, nodelist, [&] {
    std::vector<std::string> hosts;
    for (const Item& item : parse(nodelist)) expand(nodelist, item, 0, "", hosts, max_hosts);
    return hosts;
  });
}

std::string first_slurm_host(std::string_view nodelist, std::string_view variable) {
  const std::vector<Item> items = naming(variable, nodelist, [&] { return parse(nodelist); });
  std::string host;
  for (const Part& part : items.front()) {
    if (const auto* text = std::get_if<std::string>(&part)) {
      host += *text;
    } else {
      const Range& r = std::get<std::vector<Range>>(part).front();
      host += padded(r.lo, r.width);
    }
  }
  return host;
}

}  // namespace conveyor
