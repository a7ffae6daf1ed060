#include "apps/sample/text_codec.hpp"

#include <stdexcept>

namespace conveyor {

const char* TextCodec::name() const {
  switch (kind_) {
    case Kind::bytes: return "bytes";
    case Kind::bpe: return "bpe";
    case Kind::ids: return "ids";
  }
  return "?";
}

std::optional<std::vector<std::int32_t>> TextCodec::encode(const std::string& prompt) const {
  switch (kind_) {
    case Kind::bytes: {
      std::vector<std::int32_t> ids;
      for (char c : prompt) ids.push_back(static_cast<unsigned char>(c));
      return ids;
    }
    case Kind::bpe: {
      std::vector<std::int32_t> ids = bpe_->bos_ids();
      for (std::int32_t id : bpe_->encode(prompt)) ids.push_back(id);
      return ids;
    }
    case Kind::ids: return std::nullopt;
  }
  return std::nullopt;
}

std::string TextCodec::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  switch (kind_) {
    case Kind::bytes:  // a vocab above 256 (data.format text allows one) has ids that are no byte
      for (std::int32_t id : ids) out += id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
      return out;
    case Kind::bpe:  // a model's vocab may be padded past the tokenizer's ids (GPT-2's 50304)
      for (std::int32_t id : ids) {
        const std::int32_t one[] = {id};
        try {
          out += bpe_->decode(one);
        } catch (const std::invalid_argument&) {
          out += "\xEF\xBF\xBD";
        }
      }
      return out;
    case Kind::ids:
      for (std::int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
      return out;
  }
  return out;
}

}  // namespace conveyor
