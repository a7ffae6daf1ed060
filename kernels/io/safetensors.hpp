#pragma once
// The safetensors format (as the Python `safetensors` package reads it):
//   u64 little-endian N | N bytes of JSON header | raw data
// The header maps each tensor name to {"dtype": "F32"|"BF16"|"I32", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data section, tensors packed
// in the order written) and may hold "__metadata__": {string: string}. The header is
// padded with spaces to a multiple of 8 bytes.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // host tensor
};

/// Writes atomically: a temporary file beside `path`, fsync, rename, fsync of the folder.
/// Throws std::runtime_error naming the file on any I/O failure (and leaves no file).
/// REQUIRES: distinct non-empty names other than "__metadata__", defined host tensors
/// (std::invalid_argument otherwise).
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Everything of a safetensors file before the tensor bytes (the u64 length and the padded
/// JSON header) for `tensors` written in order: for writers with their own file handling
/// (checkpoint shards). Same REQUIREs and errors as write_safetensors.
std::string encode_safetensors_header(const std::vector<NamedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

/// Reads a whole file. Throws InputError naming the file when it is not valid safetensors
/// (header length past the end, bad JSON, an unsupported dtype, offsets outside the data,
/// not matching shape * dtype size, or overlapping). Tensors come back in file order.
std::vector<NamedTensor> read_safetensors(const std::string& path);

/// read_safetensors plus the header's "__metadata__" map.
struct SafetensorsContents {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsContents read_safetensors_with_metadata(const std::string& path);

/// A tensor's entry in a header: what it is, without its bytes.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};
struct SafetensorsIndex {
  std::vector<SafetensorsEntry> tensors;  // file order
  std::map<std::string, std::string> metadata;
};

/// The header alone, checked as read_safetensors checks it (the file's size included), no
/// tensor bytes read: names, dtypes and shapes of a file too large to load for a look.
SafetensorsIndex read_safetensors_index(const std::string& path);

/// A tensor's entry as stored, of any dtype the format defines (F16, F64, U8, ... as well
/// as conveyor's three), and where its bytes are: `offset` from the start of the file,
/// `bytes` long. For readers that convert other dtypes themselves (Hugging Face folders).
struct SafetensorsStoredEntry {
  std::string name;
  std::string dtype;  // the header's name: "F16", "BF16", "F32", ...
  Shape shape;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// The header checked as read_safetensors checks it, but any dtype of the format allowed;
/// file order. No tensor bytes read.
std::vector<SafetensorsStoredEntry> read_safetensors_stored_index(const std::string& path);

/// read_safetensors of the tensors named in `names` only, in file order; the others' bytes
/// are not read. The whole header is checked; a name the file lacks is an InputError.
std::vector<NamedTensor> read_safetensors_subset(const std::string& path, const std::set<std::string>& names);

}  // namespace conveyor
