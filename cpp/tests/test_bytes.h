// Helpers the core's unit tests share: byte strings written as hex, as the
// golden values below were read from files TF wrote; a file's bytes.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace fastmts {
namespace testing {

// "0a16" -> "\x0a\x16".
inline std::string from_hex(std::string_view hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return bytes;
}

// The whole content of the file at `path` (empty if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace testing
}  // namespace fastmts
