#include "apps/sample/sample_model.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "kernels/common/error.hpp"

namespace conveyor {

SampleModel load_sample_model(const std::string& path, const std::string& tokenizer,
                              const std::string& tokenizer_flag) {
  SampleModel s{load_checkpoint_model(path, "sample")};
  std::string file = tokenizer;
  std::string named_by = tokenizer_flag;
  if (file.empty() && std::filesystem::is_regular_file(std::filesystem::path(path) / "tokenizer.json")) {
    file = (std::filesystem::path(path) / "tokenizer.json").string();
    named_by = path;
  }
  if (file.empty()) {
    s.codec = s.model.model.vocab == 256 ? TextCodec::bytes() : TextCodec::ids();
    return s;
  }
  try {
    tokenizer::BpeTokenizer t = tokenizer::BpeTokenizer::from_file(file);
    if (t.size() > s.model.model.vocab)
      throw InputError(fmt::format("{}: {} has {} tokens, more than the model's vocab of {}", named_by, file,
                                   t.size(), s.model.model.vocab));
    s.codec = TextCodec::bpe(std::move(t), file);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {} (a tokenizer.json of byte-level BPE; --tokenizer names another, "
                                 "or remove it to print token ids)", named_by, e.what()));
  }
  return s;
}

}  // namespace conveyor
