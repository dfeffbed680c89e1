// TF_STRING tensors on every supported TensorFlow release. Their elements are
// laid out one of three ways, picked once from what the bound TF exports:
//   - TF 1.15 to 2.3: encoded (an offset table, then each element as a
//     varint length and its bytes), through TF_StringEncode / TF_StringDecode;
//   - TF 2.5 and later: 24-byte tstrings, through TF_StringInit & co.;
//   - TF 2.4: tstrings too, but it exports no function for them, so
//     tf_strings.cc reads and writes the layout itself.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tensor_convert.h"

namespace fastmts {

// A TF_STRING tensor of shape `dims` holding copies of `items`.
TensorPtr tensor_from_strings(const std::vector<int64_t>& dims,
                              const std::vector<std::string_view>& items);
// Views into a TF_STRING tensor's elements, valid while the tensor lives.
std::vector<std::string_view> string_elements(const TF_Tensor* t);

}  // namespace fastmts
