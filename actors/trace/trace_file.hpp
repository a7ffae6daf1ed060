#pragma once
// The trace file: one per process, DIR/trace/process-<index>.ctrace, written in batches
// while the run goes and readable after a crash up to the last whole batch.
//
// Byte layout (little-endian, the hosts we run on):
//   0   8 bytes  magic "CVYTRACE"
//   8   u32      version (kTraceVersion)
//   12  u32      record size in bytes (64)
//   16  i64      clock offset, ns: add it to this file's times to get the reference
//                host's steady clock (0 on the reference host; the rendezvous measures it)
//   24  u32      process index (node rank)
//   28  u32      host name length n (<= 255)
//   32  n bytes  host name, then zero bytes up to a multiple of 8
//   ... records, each the 64 bytes of trace::Record in declaration order (trace_record.hpp)
// A reader rejects a wrong magic or version, a record size it does not know, and a file
// whose record area is not a whole number of records (truncated).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/trace/trace_record.hpp"

namespace conveyor::trace {

inline constexpr std::uint32_t kTraceVersion = 1;
inline constexpr char kTraceMagic[8] = {'C', 'V', 'Y', 'T', 'R', 'A', 'C', 'E'};
inline constexpr const char* kTraceExtension = ".ctrace";

struct FileHeader {
  std::uint32_t version = kTraceVersion;
  std::int64_t clock_offset_ns = 0;
  std::uint32_t process_index = 0;
  std::string host;
};

/// The header's bytes (a multiple of 8 long). Host names longer than 255 are cut.
std::string encode_header(const FileHeader& header);

struct TraceFile {
  std::filesystem::path path;
  FileHeader header;
  std::vector<Record> records;
};

/// Reads and checks one file. Throws InputError naming the file and what is wrong.
TraceFile read_trace_file(const std::filesystem::path& path);
/// Decodes a whole file from memory; `name` is used in errors.
TraceFile decode_trace_file(const std::string& bytes, const std::string& name);

/// "process-<index>.ctrace".
std::string trace_file_name(std::uint32_t process_index);

}  // namespace conveyor::trace
