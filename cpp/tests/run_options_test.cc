// The native side of the full-trace rule (core/run_options.h): the bytes a
// ProfilerHook's request appends to a step's serialized RunOptions.
#include "core/run_options.h"

#include <gtest/gtest.h>

#include <string>

namespace fastmts {
namespace {

TEST(WithFullTrace, SetsTraceLevelFieldToFullTrace) {
  // Field 1 (trace_level), wire type 0 (varint): tag 0x08; FULL_TRACE = 3.
  EXPECT_EQ(with_full_trace(""), std::string("\x08\x03", 2));
}

TEST(WithFullTrace, KeepsEveryOtherFieldAndComesLast) {
  // timeout_in_ms (field 2) = 5, then trace_level = SOFTWARE_TRACE (1):
  // the appended field is read last, so it wins over the earlier level.
  const std::string options("\x10\x05\x08\x01", 4);
  const std::string traced = with_full_trace(options);
  ASSERT_EQ(traced.size(), options.size() + 2);
  EXPECT_EQ(traced.substr(0, options.size()), options);
  EXPECT_EQ(traced.substr(options.size()), std::string("\x08\x03", 2));
}

}  // namespace
}  // namespace fastmts
