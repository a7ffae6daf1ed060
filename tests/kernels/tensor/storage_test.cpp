// Host storage: zero-filled and 64-byte aligned at every size, memset or fresh pages, below
// and above the size from which fresh-page blocks are mappings (storage.cpp); uninitialized
// blocks, and their poisoning for tests.
#include "kernels/tensor/storage.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

namespace conveyor {
namespace {

TEST_CASE("host storage is zero, aligned and writable below and above the mapped size") {
  for (HostZeros zeros : {HostZeros::memset, HostZeros::fresh_pages})
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, (std::size_t{1} << 20) - 1,
                            std::size_t{1} << 20, (std::size_t{3} << 20) + 5}) {
    CAPTURE(bytes);
    CAPTURE(zeros == HostZeros::fresh_pages);
    auto s = allocate_host(bytes, zeros);
    REQUIRE(s->bytes() == bytes);
    auto* p = static_cast<unsigned char*>(s->data());
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    bool zero = true;
    for (std::size_t i = 0; i < bytes; ++i) zero = zero && p[i] == 0;
    CHECK(zero);
    std::memset(p, 0xA5, bytes);
    CHECK(p[bytes - 1] == 0xA5);
  }
  // A freed block's bytes do not reach the next allocation of that size.
  for (HostZeros zeros : {HostZeros::memset, HostZeros::fresh_pages}) {
    { std::memset(allocate_host(std::size_t{2} << 20, zeros)->data(), 0x5A, std::size_t{2} << 20); }
    auto again = allocate_host(std::size_t{2} << 20, zeros);
    CHECK(static_cast<unsigned char*>(again->data())[12345] == 0);
  }
}

TEST_CASE("uninitialized host storage is aligned and writable, poisoned, every byte is 0xFF") {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, (std::size_t{3} << 20) + 5}) {
    CAPTURE(bytes);
    poison_uninitialized_host(true);
    auto poisoned = allocate_host_uninitialized(bytes);
    auto zeroed = allocate_host(bytes);  // zeros are zeros while poisoning is on
    poison_uninitialized_host(false);
    REQUIRE(poisoned->bytes() == bytes);
    auto* p = static_cast<unsigned char*>(poisoned->data());
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    bool all_ff = true, all_zero = true;
    for (std::size_t i = 0; i < bytes; ++i) {
      all_ff = all_ff && p[i] == 0xFF;
      all_zero = all_zero && static_cast<unsigned char*>(zeroed->data())[i] == 0;
    }
    CHECK(all_ff);
    CHECK(all_zero);
    auto plain = allocate_host_uninitialized(bytes);
    std::memset(plain->data(), 0x3C, bytes);
    CHECK(static_cast<unsigned char*>(plain->data())[bytes - 1] == 0x3C);
  }
}

}  // namespace
}  // namespace conveyor
