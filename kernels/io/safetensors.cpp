#include "kernels/io/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "kernels/common/error.hpp"
#include "kernels/io/input_file.hpp"

namespace conveyor {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian; a big-endian host needs byte swaps here");

// The Python package refuses headers above 100 MB; so do we, before allocating.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::string_view safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
  }
  return "?";
}

bool parse_safetensors_dtype(std::string_view s, DType* out) {
  if (s == "F32") *out = DType::f32;
  else if (s == "BF16") *out = DType::bf16;
  else if (s == "I32") *out = DType::i32;
  else return false;
  return true;
}

// ---- writing ----

class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_errno(const std::string& path, const std::string& step) {
  throw WriteError("write_safetensors: " + path + ": " + step + " failed: " + std::strerror(errno));
}

void write_all(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "write");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// ---- reading ----

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw InputError(path + ": not a valid safetensors file: " + what);
}

struct Entry {
  std::string name;
  DType dtype = DType::f32;  // meaningful only when `stored` is one conveyor has (F32, BF16, I32)
  std::string stored;        // the header's dtype name
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::uint64_t json_unsigned(const nlohmann::json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned() ||
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    bad_file(path, what + " must be non-negative integers, got " + v.dump());
  return v.get<std::uint64_t>();
}

// Element bytes of every dtype the format defines; 0 for a name it does not.
std::uint64_t stored_dtype_size(std::string_view s) {
  if (s == "F64" || s == "I64" || s == "U64") return 8;
  if (s == "F32" || s == "I32" || s == "U32") return 4;
  if (s == "F16" || s == "BF16" || s == "I16" || s == "U16") return 2;
  if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
  return 0;
}

// any_dtype: accept every dtype the format defines (the bytes are read raw, not as a
// Tensor), else only those conveyor's tensors have.
Entry parse_entry(const std::string& name, const nlohmann::json& v, std::uint64_t data_bytes,
                  const std::string& path, bool any_dtype) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) bad_file(path, where + " is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) bad_file(path, where + " has no \"" + field + "\"");
  Entry e;
  e.name = name;
  const auto& dtype = v["dtype"];
  const bool known = dtype.is_string() && parse_safetensors_dtype(dtype.get<std::string>(), &e.dtype);
  if (!known && !(any_dtype && dtype.is_string() && stored_dtype_size(dtype.get<std::string>()) > 0))
    bad_file(path, where + ": dtype " + dtype.dump() + " is not supported (F32, BF16, I32)");
  e.stored = dtype.get<std::string>();
  const auto& shape = v["shape"];
  if (!shape.is_array()) bad_file(path, where + ": shape must be a list, got " + shape.dump());
  std::uint64_t bytes = stored_dtype_size(e.stored);
  bool overflow = false;
  for (const auto& d : shape) {
    std::uint64_t dim = json_unsigned(d, path, where + ": shape dimensions");
    e.shape.push_back(static_cast<std::int64_t>(dim));
    if (dim != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / dim) overflow = true;
    bytes *= dim;
  }
  const auto& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    bad_file(path, where + ": data_offsets must be [begin, end], got " + offsets.dump());
  e.begin = json_unsigned(offsets[0], path, where + ": data_offsets");
  e.end = json_unsigned(offsets[1], path, where + ": data_offsets");
  if (e.begin > e.end || e.end > data_bytes)
    bad_file(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] are outside the data section of " +
                       std::to_string(data_bytes) + " bytes");
  if (overflow || e.end - e.begin != bytes)
    bad_file(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin) +
                       " bytes, but shape " + shape.dump() + " of " + dtype.get<std::string>() +
                       " needs " + (overflow ? std::string("more than 2^64") : std::to_string(bytes)));
  return e;
}

}  // namespace

std::string encode_safetensors_header(const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      throw std::invalid_argument("write_safetensors: invalid tensor name '" + name + "'");
    if (!seen.insert(name).second)
      throw std::invalid_argument("write_safetensors: tensor name '" + name + "' given twice");
    if (!t.defined() || !t.device().is_cpu())
      throw std::invalid_argument("write_safetensors: tensor '" + name +
                                  "' must be a defined host tensor, is " + t.describe());
    header[name] = {{"dtype", std::string(safetensors_dtype(t.dtype()))},
                    {"shape", t.shape().dims()},
                    {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t n = text.size();  // little-endian: checked where the file is read
  std::string out(sizeof n, '\0');
  std::memcpy(out.data(), &n, sizeof n);
  return out + text;
}


void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = encode_safetensors_header(tensors, metadata);

  // A unique temporary name in the target's folder, so the final rename is atomic.
  static std::atomic<std::uint64_t> counter{0};
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string tmp_name = ".";  // appended piecewise: GCC 12 warns falsely on "." + str
  tmp_name += target.filename().string();
  tmp_name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const std::string tmp = (dir / tmp_name).string();

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno(path, "creating the temporary file " + tmp);
  try {
    write_all(fd, header.data(), header.size(), path);
    for (const auto& nt : tensors) write_all(fd, nt.tensor.raw(), nt.tensor.bytes(), path);
    if (::fsync(fd) != 0) throw_errno(path, "fsync");
    const int rc = ::close(fd);
    fd = -1;
    if (rc != 0) throw_errno(path, "close");
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(path, "rename");
  } catch (...) {
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    throw;
  }
  // Make the rename itself durable. A failure here leaves a complete file in place, so it
  // is not worth failing the write over.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

// A checked header: entries in file order (by offset), every data byte covered once.
struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;
};

Header read_header(const InputFile& file, bool any_dtype = false) {
  const std::string& path = file.path();
  if (file.size() < 8)
    bad_file(path, "file is " + std::to_string(file.size()) +
                       " bytes, too short for the 8-byte header length");
  std::uint64_t n = 0;
  file.read_at(&n, sizeof(n), 0);
  if (n > file.size() - 8)
    bad_file(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(file.size()) + " bytes)");
  if (n > kMaxHeaderBytes)
    bad_file(path, "header length " + std::to_string(n) + " is over the 100 MB limit");
  std::string text(n, '\0');
  file.read_at(text.data(), text.size(), 8);
  Header out;
  out.data_start = 8 + n;
  const std::uint64_t data_bytes = file.size() - out.data_start;

  nlohmann::json header;
  // JSON parsers keep the last of a repeated key: a tensor named twice would silently be
  // the second. The callback sees every top-level key.
  std::set<std::string> names;
  std::string repeated;
  const nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                           nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && repeated.empty() &&
        !names.insert(parsed.get<std::string>()).second)
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    header = nlohmann::json::parse(text, note_keys);
  } catch (const nlohmann::json::parse_error& e) {
    bad_file(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad_file(path, "header is not a JSON object");
  if (!repeated.empty()) bad_file(path, "the header names '" + repeated + "' twice");

  auto& entries = out.entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad_file(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad_file(path, "__metadata__ value of '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, value, data_bytes, path, any_dtype));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const Entry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin == e.end) continue;  // empty tensors occupy no bytes
    if (prev && e.begin < prev->end)
      bad_file(path, "tensors '" + prev->name + "' and '" + e.name + "' overlap (data_offsets [" +
                         std::to_string(prev->begin) + ", " + std::to_string(prev->end) + "] and [" +
                         std::to_string(e.begin) + ", " + std::to_string(e.end) + "])");
    prev = &e;
  }
  // The format allows no holes: every data byte belongs to exactly one tensor.
  std::uint64_t covered = 0;
  for (const auto& e : entries) {
    if (e.begin == e.end) continue;
    if (e.begin != covered)
      bad_file(path, "data bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                         ") belong to no tensor (the format allows no holes)");
    covered = e.end;
  }
  if (covered != data_bytes)
    bad_file(path, std::to_string(data_bytes - covered) + " data bytes after the last tensor belong to none "
                                                          "(the format allows no trailing bytes)");
  return out;
}

NamedTensor read_entry(const InputFile& file, const Header& header, const Entry& e) {
  // Every byte is overwritten by the read: no zero fill first (a checkpoint's shards are
  // gigabytes).
  Tensor t = Tensor::uninitialized(Shape(e.shape), e.dtype);
  if (t.bytes() > 0) file.read_at(t.raw(), t.bytes(), header.data_start + e.begin);
  return {e.name, std::move(t)};
}

}  // namespace

SafetensorsContents read_safetensors_with_metadata(const std::string& path) {
  const InputFile file(path, "safetensors file");
  const Header header = read_header(file);
  SafetensorsContents out;
  out.metadata = header.metadata;
  out.tensors.reserve(header.entries.size());
  for (const auto& e : header.entries) out.tensors.push_back(read_entry(file, header, e));
  return out;
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
  const InputFile file(path, "safetensors file");
  const Header header = read_header(file);
  SafetensorsIndex out;
  out.metadata = header.metadata;
  for (const auto& e : header.entries) out.tensors.push_back({e.name, e.dtype, Shape(e.shape)});
  return out;
}

std::vector<SafetensorsStoredEntry> read_safetensors_stored_index(const std::string& path) {
  const InputFile file(path, "safetensors file");
  const Header header = read_header(file, /*any_dtype=*/true);
  std::vector<SafetensorsStoredEntry> out;
  for (const auto& e : header.entries)
    out.push_back({e.name, e.stored, Shape(e.shape), header.data_start + e.begin, e.end - e.begin});
  return out;
}

std::vector<NamedTensor> read_safetensors_subset(const std::string& path, const std::set<std::string>& names) {
  const InputFile file(path, "safetensors file");
  const Header header = read_header(file);
  std::vector<NamedTensor> out;
  std::set<std::string> found;
  for (const auto& e : header.entries)
    if (names.count(e.name)) {
      out.push_back(read_entry(file, header, e));
      found.insert(e.name);
    }
  for (const auto& name : names)
    if (!found.count(name)) throw InputError(path + ": holds no tensor '" + name + "'");
  return out;
}

std::vector<NamedTensor> read_safetensors(const std::string& path) {
  return read_safetensors_with_metadata(path).tensors;
}

}  // namespace conveyor
