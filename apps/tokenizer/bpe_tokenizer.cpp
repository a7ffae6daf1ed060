#include "apps/tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "apps/tokenizer/byte_level.hpp"

namespace conveyor::tokenizer {
namespace {

// The symbols of a string of the byte alphabet: one UTF-8 code point each.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// A merge as tokenizers writes it: "a b", or ["a", "b"] (tokenizers 0.20 and later).
std::pair<std::string, std::string> merge_pair(const nlohmann::json& m) {
  if (m.is_array() && m.size() == 2) return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const auto space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  throw std::invalid_argument("model.merges: " + m.dump() + " is not a pair \"a b\" or [\"a\", \"b\"]");
}

// The special tokens before $A in a TemplateProcessing's "single" template.
void template_prefix(const nlohmann::json& post, const std::unordered_map<std::string, std::int32_t>& ids,
                     std::vector<std::int32_t>& out) {
  if (post.is_null()) return;
  const std::string type = post.value("type", "");
  if (type == "Sequence") {
    for (const auto& p : post.at("processors")) template_prefix(p, ids, out);
    return;
  }
  if (type != "TemplateProcessing") return;  // ByteLevel and the others add no token
  for (const auto& piece : post.at("single")) {
    if (piece.contains("Sequence")) break;
    if (!piece.contains("SpecialToken")) continue;
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    const auto& st = post.at("special_tokens").at(name);
    for (const auto& id : st.at("ids")) out.push_back(id.get<std::int32_t>());
    (void)ids;
  }
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(const nlohmann::json& j) {
  BpeTokenizer t;
  const auto& model = j.at("model");
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") throw std::invalid_argument("model.type " + type + " is not supported (byte-level BPE only)");
  if (model.value("byte_fallback", false))
    throw std::invalid_argument("model.byte_fallback is true: a SentencePiece-style BPE, not byte-level (not supported)");
  if (j.contains("normalizer") && !j.at("normalizer").is_null())
    throw std::invalid_argument("normalizer " + j.at("normalizer").value("type", std::string("?")) +
                                " is not supported (byte-level BPE tokenizers have none)");
  if (j.contains("decoder") && !j.at("decoder").is_null() && j.at("decoder").value("type", "") != "ByteLevel")
    throw std::invalid_argument("decoder " + j.at("decoder").value("type", std::string("?")) +
                                " is not supported (ByteLevel only)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model.at(affix).is_null() && model.at(affix) != "")
      throw std::invalid_argument(std::string("model.") + affix + " is set: not a byte-level BPE (not supported)");
  t.ignore_merges_ = model.value("ignore_merges", false);
  for (const auto& [token, id] : model.at("vocab").items()) {
    const auto i = id.get<std::int32_t>();
    t.vocab_[token] = i;
    t.id_to_token_[i] = token;
    t.size_ = std::max<std::int64_t>(t.size_, i + 1);
  }
  std::int32_t rank = 0;
  for (const auto& m : model.at("merges")) {
    auto pair = merge_pair(m);
    if (!t.vocab_.count(pair.first + pair.second))
      throw std::invalid_argument("model.merges: " + m.dump() + " makes a token that is not in model.vocab");
    t.merge_rank_.emplace(std::move(pair), rank++);
  }
  if (j.contains("added_tokens"))
    for (const auto& a : j.at("added_tokens")) {
      const auto id = a.at("id").get<std::int32_t>();
      const std::string content = a.at("content").get<std::string>();
      if (content.empty()) continue;
      t.added_.emplace_back(content, id);
      t.added_by_id_[id] = content;
      t.size_ = std::max<std::int64_t>(t.size_, id + 1);
    }
  std::stable_sort(t.added_.begin(), t.added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t.pre_ = PreTokenizer::from_json(j.contains("pre_tokenizer") ? j.at("pre_tokenizer") : nlohmann::json());
  template_prefix(j.contains("post_processor") ? j.at("post_processor") : nlohmann::json(), t.vocab_, t.bos_);
  return t;
}

BpeTokenizer BpeTokenizer::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  try {
    return from_json(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

std::optional<std::int32_t> BpeTokenizer::id_of(const std::string& token) const {
  if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  for (const auto& [content, id] : added_)
    if (content == token) return id;
  return std::nullopt;
}

std::vector<std::int32_t> BpeTokenizer::encode_piece(const std::string& piece) const {
  const std::string symbols = bytes_to_symbols(piece);
  if (ignore_merges_)
    if (const auto it = vocab_.find(symbols); it != vocab_.end()) return {it->second};
  std::vector<std::string> word = code_points(symbols);
  while (word.size() > 1) {
    std::int32_t best = std::numeric_limits<std::int32_t>::max();
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = merge_rank_.find({word[i], word[i + 1]});
      if (it != merge_rank_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == std::numeric_limits<std::int32_t>::max()) break;
    word[at] += word[at + 1];
    word.erase(word.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<std::int32_t> ids;
  for (const std::string& s : word) {
    const auto it = vocab_.find(s);
    if (it == vocab_.end())  // a byte the vocabulary lacks: byte-level vocabularies have all 256
      throw std::invalid_argument("the tokenizer's vocab has no token " + s + " (a byte-level BPE vocab holds every byte)");
    ids.push_back(it->second);
  }
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  const auto plain = [&](std::string_view segment) {
    if (segment.empty()) return;
    for (const std::string& piece : pre_.split(segment))
      for (std::int32_t id : encode_piece(piece)) ids.push_back(id);
  };
  std::size_t done = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::pair<std::string, std::int32_t>* hit = nullptr;
    for (const auto& a : added_)  // longest first
      if (text.compare(i, a.first.size(), a.first) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    plain(text.substr(done, i - done));
    ids.push_back(hit->second);
    i += hit->first.size();
    done = i;
  }
  plain(text.substr(done));
  return ids;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    if (const auto a = added_by_id_.find(id); a != added_by_id_.end()) {
      // tokenizers' ByteLevel decoder: a token all of whose characters are in the byte
      // alphabet is those bytes; any other is its own UTF-8.
      out += symbols_to_bytes(a->second).value_or(a->second);
      continue;
    }
    const auto it = id_to_token_.find(id);
    if (it == id_to_token_.end()) throw std::invalid_argument("token id " + std::to_string(id) + " is not in the tokenizer");
    const auto bytes = symbols_to_bytes(it->second);
    if (!bytes) throw std::invalid_argument("token " + it->second + " is not in the byte alphabet");
    out += *bytes;
  }
  return out;
}

}  // namespace conveyor::tokenizer
