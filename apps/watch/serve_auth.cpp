#include "apps/watch/serve_auth.hpp"

#include <cctype>

namespace conveyor::watch {
namespace {

bool same_token(std::string_view given, std::string_view token) {
  // Every byte is compared whatever the first difference: the time says nothing of it.
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ token[i % (token.empty() ? 1 : token.size())]);
  return diff == 0 && !token.empty();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && hex_digit(text[i + 1]) >= 0 && hex_digit(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const auto end = header.find(';');
    std::string_view pair = header.substr(0, end);
    header = end == std::string_view::npos ? std::string_view{} : header.substr(end + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=')
      return percent_decode(pair.substr(name.size() + 1));
  }
  return std::nullopt;
}

}  // namespace

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> query_parameter(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const auto end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view{} : query.substr(end + 1);
    if (pair.starts_with(name) && pair.size() >= name.size() && (pair.size() == name.size() || pair[name.size()] == '='))
      return percent_decode(pair.substr(std::min(pair.size(), name.size() + 1)));
  }
  return std::nullopt;
}

std::string percent_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

AuthResult authorize(std::string_view token, std::string_view target, std::string_view authorization,
                     std::string_view cookie) {
  if (token.empty()) return {true, std::nullopt};
  constexpr std::string_view bearer = "Bearer ";
  if (authorization.starts_with(bearer) && same_token(authorization.substr(bearer.size()), token))
    return {true, std::nullopt};
  if (auto given = cookie_value(cookie, kTokenCookie); given && same_token(*given, token)) return {true, std::nullopt};
  if (auto given = query_parameter(target, "token"); given && same_token(*given, token))
    return {true, std::string(kTokenCookie) + "=" + percent_encode(token) + "; Path=/; HttpOnly; SameSite=Strict"};
  return {false, std::nullopt};
}

}  // namespace conveyor::watch
