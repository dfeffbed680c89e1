// The full-trace rule, on the native side: a native hook (ProfilerHook)
// asking for a FULL_TRACE of a step. TF merges the hooks' RunOptions by
// taking the larger trace level, and FULL_TRACE (3) is the largest level
// (tests/test_hook_profiler.py pins TF's order), so the step's serialized
// options only need that field set to 3 whatever they held: a scalar field
// given twice in protobuf's wire format takes its last value. The Python
// side of the rule is python_hooked_session.merge_full_trace.
#pragma once

#include <string>

namespace fastmts {

// RunOptions.trace_level (field 1, varint) = FULL_TRACE (3), serialized.
inline constexpr char kFullTraceOption[] = "\x08\x03";

// `serialized_options` (a RunOptions, possibly empty) with trace_level
// FULL_TRACE and every other field as it was.
inline std::string with_full_trace(const std::string& serialized_options) {
  return serialized_options + kFullTraceOption;
}

}  // namespace fastmts
