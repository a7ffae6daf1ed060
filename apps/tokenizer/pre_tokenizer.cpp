#include "apps/tokenizer/pre_tokenizer.hpp"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include <stdexcept>

namespace conveyor::tokenizer {
namespace {

// \s and \S as Oniguruma reads them (the White_Space property); escapes of other
// characters, an escaped backslash among them, are copied as they are.
std::string oniguruma_spaces(std::string_view pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') out += "\\p{White_Space}";
      else if (next == 'S') out += "\\P{White_Space}";
      else (out += '\\') += next;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

struct UTextCloser {
  void operator()(UText* t) const { utext_close(t); }
};
using UTextPtr = std::unique_ptr<UText, UTextCloser>;

UTextPtr open_utf8(std::string_view s) {
  UErrorCode status = U_ZERO_ERROR;
  UTextPtr t(utext_openUTF8(nullptr, s.data(), static_cast<int64_t>(s.size()), &status));
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU utext_openUTF8: ") + u_errorName(status));
  return t;
}

}  // namespace

struct RegexSplitter::Impl {
  std::unique_ptr<icu::RegexPattern> pattern;
};

RegexSplitter::RegexSplitter(std::string_view pattern, bool literal) : impl_(std::make_unique<Impl>()) {
  const std::string p = literal ? std::string(pattern) : oniguruma_spaces(pattern);
  const UTextPtr text = open_utf8(p);
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  impl_->pattern.reset(icu::RegexPattern::compile(text.get(), literal ? UREGEX_LITERAL : 0, where, status));
  if (U_FAILURE(status))
    throw std::invalid_argument("pattern " + std::string(pattern) + ": " + u_errorName(status) + " at offset " +
                                std::to_string(where.offset));
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string> RegexSplitter::split(std::string_view text, bool keep_matches, bool keep_gaps) const {
  std::vector<std::string> out;
  UErrorCode status = U_ZERO_ERROR;
  const UTextPtr input = open_utf8(text);
  std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(status));
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU matcher: ") + u_errorName(status));
  m->reset(input.get());
  std::size_t done = 0;  // bytes of text already in pieces (UTF-8 native indexes are bytes)
  while (m->find(status) && U_SUCCESS(status)) {
    const auto start = static_cast<std::size_t>(m->start64(status));
    const auto end = static_cast<std::size_t>(m->end64(status));
    if (end == start) continue;  // an empty match cuts nothing
    if (start > done && keep_gaps) out.emplace_back(text.substr(done, start - done));
    if (keep_matches) out.emplace_back(text.substr(start, end - start));
    done = end;
  }
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU find: ") + u_errorName(status));
  if (done < text.size() && keep_gaps) out.emplace_back(text.substr(done));
  return out;
}

void PreTokenizer::add_steps(const nlohmann::json& j, std::vector<Step>& out) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : j.at("pretokenizers")) add_steps(s, out);
    return;
  }
  Step step;
  if (type == "ByteLevel") {
    step.add_prefix_space = j.value("add_prefix_space", false);
    if (j.value("use_regex", true)) step.regex = std::make_shared<RegexSplitter>(kGpt2Pattern);
  } else if (type == "Split") {
    const auto& p = j.at("pattern");
    if (p.contains("Regex")) step.regex = std::make_shared<RegexSplitter>(p.at("Regex").get<std::string>());
    else if (p.contains("String")) step.regex = std::make_shared<RegexSplitter>(p.at("String").get<std::string>(), true);
    else throw std::invalid_argument("pre_tokenizer Split: a pattern that is neither Regex nor String");
    // invert swaps what is a delimiter: the gaps between the matches. Isolated keeps both
    // either way; Removed drops the delimiters (GPT-4-style files: Removed, invert true,
    // which keeps the matches only).
    const bool invert = j.value("invert", false);
    const std::string behavior = j.value("behavior", "Isolated");
    if (behavior == "Removed") (invert ? step.keep_gaps : step.keep_matches) = false;
    else if (behavior != "Isolated")
      throw std::invalid_argument("pre_tokenizer Split: behavior " + behavior + " is not supported (Isolated, Removed)");
  } else {
    throw std::invalid_argument("pre_tokenizer " + (type.empty() ? j.dump() : type) +
                                " is not supported (ByteLevel, Split, Sequence of them)");
  }
  out.push_back(std::move(step));
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  add_steps(j, p.steps_);
  return p;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces{std::string(text)};
  for (const Step& s : steps_) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      // tokenizers' ByteLevel adds the space to every piece it is given (the text between
      // added tokens, or an earlier step's cut), before its own cut.
      if (s.add_prefix_space && (piece.empty() || piece[0] != ' '))
        piece.insert(piece.begin(), ' ');
      if (!s.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      for (std::string& cut : s.regex->split(piece, s.keep_matches, s.keep_gaps)) next.push_back(std::move(cut));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace conveyor::tokenizer
