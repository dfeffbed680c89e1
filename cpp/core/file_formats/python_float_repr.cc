#include "core/file_formats/python_float_repr.h"

#include <charconv>
#include <cmath>

namespace fastmts {

void append_python_double(std::string& out, double v) {
  if (std::isnan(v)) {  // Python prints every NaN, whatever its sign, as "nan"
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  // Shortest round-trip digits, as Python's repr (both are correctly rounded
  // shortest representations, so the digits agree); only the layout differs.
  char buf[40];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const char* p = buf;
  if (*p == '-') {
    out += '-';
    ++p;
  }
  char digits[24];
  int n = 0;
  for (; p < r.ptr && *p != 'e'; ++p)
    if (*p != '.') digits[n++] = *p;
  // "e+05" -> 5, "e-300" -> -300 (to_chars writes no terminating NUL)
  int exponent = 0;
  std::from_chars(p + 2, r.ptr, exponent);
  if (p[1] == '-') exponent = -exponent;
  const int decpt = exponent + 1;  // digits are 0.d1d2... * 10**decpt
  if (decpt <= -4 || decpt > 16) {  // Python's float_repr_style 'short' rule
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits + 1, n - 1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const int mag = exponent < 0 ? -exponent : exponent;
    if (mag < 10) out += '0';  // at least two exponent digits: 1e-05
    out += std::to_string(mag);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(-decpt, '0');
    out.append(digits, n);
  } else if (decpt >= n) {
    out.append(digits, n);
    out.append(decpt - n, '0');
    out += ".0";
  } else {
    out.append(digits, decpt);
    out += '.';
    out.append(digits + decpt, n - decpt);
  }
}

void append_python_float32(std::string& out, float v) {
  const double x = v;
  if (std::isnan(x) || std::isinf(x)) {
    append_python_double(out, x);
    return;
  }
  // type_checkers.ToShortestFloat: the first precision from 6 up whose
  // '%.{p}g' rounding, read back as a double, narrows to the same float32.
  // That is not always the shortest float32 round-trip (the check goes
  // through a double, and starts at 6 digits), so it is followed exactly.
  // 17 digits give the double x itself, which always narrows back.
  for (int precision = 6; precision <= 17; ++precision) {
    char buf[48];
    const std::to_chars_result r =
        std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general, precision);
    double rounded = 0;
    std::from_chars(buf, r.ptr, rounded);
    if (static_cast<float>(rounded) == v) {
      append_python_double(out, rounded);
      return;
    }
  }
  append_python_double(out, x);
}

}  // namespace fastmts
