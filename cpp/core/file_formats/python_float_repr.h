// Python's text for floating-point values, as protobuf's text_format prints
// them: a double as `str(value)` (Python's repr: shortest round-trip digits,
// exponent form outside 1e-4 <= |v| < 1e16), a float32 as
// `str(type_checkers.ToShortestFloat(value))`.
#pragma once

#include <string>

namespace fastmts {

// Appends Python's str(v) for a double: "1.5", "3.0", "-0.0", "1e-05",
// "1e+16", "nan", "inf", "-inf".
void append_python_double(std::string& out, double v);

// Appends what text_format prints for a float field: NaN as "nan", else
// str(ToShortestFloat(v)) -- the double nearest the first %.{6,7,...}g
// rounding of v that converts back to v, in Python's repr.
void append_python_float32(std::string& out, float v);

}  // namespace fastmts
