#include "core/tf_strings.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/tf_status.h"

namespace fastmts {

namespace {

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

TensorPtr allocate_strings(const std::vector<int64_t>& dims, size_t nbytes) {
  TensorPtr t(tf::AllocateTensor(TF_STRING, dims.data(), static_cast<int>(dims.size()), nbytes));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  return t;
}

// ---- TF 1.15 to 2.3: encoded elements ------------------------------------

bool encoded() { return tf::StringEncode != nullptr && tf::StringInit == nullptr; }

TensorPtr encoded_tensor(const std::vector<int64_t>& dims,
                         const std::vector<std::string_view>& items) {
  const size_t table = sizeof(uint64_t) * items.size();
  size_t nbytes = table;
  for (std::string_view item : items) nbytes += tf::StringEncodedSize(item.size());
  TensorPtr t = allocate_strings(dims, nbytes);
  char* base = static_cast<char*>(tf::TensorData(t.get()));
  auto* offsets = reinterpret_cast<uint64_t*>(base);
  char* data = base + table;
  const size_t capacity = nbytes - table;
  size_t used = 0;
  Status status;
  for (size_t i = 0; i < items.size(); ++i) {
    offsets[i] = used;
    used += tf::StringEncode(items[i].data(), items[i].size(), data + used, capacity - used,
                             status.get());
    status.raise_if_error();
  }
  return t;
}

std::vector<std::string_view> encoded_elements(const TF_Tensor* t, int64_t n) {
  const char* base = static_cast<const char*>(tf::TensorData(t));
  const size_t nbytes = tf::TensorByteSize(t);
  const size_t table = sizeof(uint64_t) * static_cast<size_t>(n);
  if (nbytes < table) throw std::runtime_error("malformed TF_STRING tensor: short offset table");
  const char* data = base + table;
  const char* limit = base + nbytes;
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(n));
  Status status;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t offset;
    std::memcpy(&offset, base + sizeof(uint64_t) * static_cast<size_t>(i), sizeof offset);
    if (offset >= static_cast<uint64_t>(limit - data))
      throw std::runtime_error("malformed TF_STRING tensor: element out of range");
    const char* element = data + offset;
    const char* bytes = nullptr;
    size_t size = 0;
    tf::StringDecode(element, static_cast<size_t>(limit - element), &bytes, &size, status.get());
    status.raise_if_error();
    out.emplace_back(bytes, size);
  }
  return out;
}

// ---- TF 2.4 and later: tstrings --------------------------------------------

// TF's tstring, as TF 2.4 to 2.21 lay it out on little-endian machines: the
// low two bits of the first byte say which member holds the string, and
// each member's size field holds the size shifted left by two.
enum TStringType : uint8_t { kSmall = 0, kLarge = 1, kOffset = 2, kView = 3 };
union TString {
  struct { size_t size; size_t capacity; char* ptr; } large;
  struct { uint32_t size; uint32_t offset; uint32_t count; } offset;
  struct { size_t size; const char* ptr; } view;
  struct { uint8_t size; char str[sizeof(TF_TString) - 1]; } small;
  uint8_t raw[sizeof(TF_TString)];
};
static_assert(sizeof(TString) == sizeof(TF_TString), "TF's tstring is 24 bytes");
constexpr size_t kSmallCapacity = sizeof(TString::small.str) - 1;  // one for the NUL

// What TF_StringInit and TF_StringCopy do: an empty small string, then the
// bytes in place (small) or in a buffer of malloc's, which TF frees with free().
void tstring_assign(TString* s, std::string_view item) {
  std::memset(s, 0, sizeof *s);
  if (item.size() <= kSmallCapacity) {
    s->small.size = static_cast<uint8_t>(item.size() << 2);
    std::memcpy(s->small.str, item.data(), item.size());
    return;
  }
  const size_t capacity = ((item.size() + 1 + 15) & ~size_t{15}) - 1;  // TF's rounding
  char* ptr = static_cast<char*>(std::malloc(capacity + 1));
  if (!ptr) throw std::bad_alloc();
  std::memcpy(ptr, item.data(), item.size());
  ptr[item.size()] = '\0';
  s->large.size = (item.size() << 2) | kLarge;
  s->large.capacity = capacity;
  s->large.ptr = ptr;
}

std::string_view tstring_view(const TString* s) {
  switch (s->raw[0] & 3) {
    case kSmall: return {s->small.str, static_cast<size_t>(s->small.size >> 2)};
    case kLarge: return {s->large.ptr, s->large.size >> 2};
    case kOffset:
      return {reinterpret_cast<const char*>(s) + s->offset.offset,
              static_cast<size_t>(s->offset.size >> 2)};
    default: return {s->view.ptr, s->view.size >> 2};
  }
}

}  // namespace

TensorPtr tensor_from_strings(const std::vector<int64_t>& dims,
                              const std::vector<std::string_view>& items) {
  const int64_t n = product(dims);
  if (n != static_cast<int64_t>(items.size()))
    throw std::invalid_argument("string feed: element count does not match its shape");
  if (encoded()) return encoded_tensor(dims, items);
  TensorPtr t = allocate_strings(dims, sizeof(TF_TString) * static_cast<size_t>(n));
  auto* out = static_cast<TF_TString*>(tf::TensorData(t.get()));
  for (int64_t i = 0; i < n; ++i) {
    if (tf::StringInit != nullptr) {
      tf::StringInit(&out[i]);
      tf::StringCopy(&out[i], items[i].data(), items[i].size());
    } else {
      tstring_assign(reinterpret_cast<TString*>(&out[i]), items[i]);
    }
  }
  return t;
}

std::vector<std::string_view> string_elements(const TF_Tensor* t) {
  const int64_t n = tf::TensorElementCount(t);
  if (encoded()) return encoded_elements(t, n);
  const auto* items = static_cast<const TF_TString*>(tf::TensorData(t));
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (tf::StringGetDataPointer != nullptr)
      out.emplace_back(tf::StringGetDataPointer(&items[i]), tf::StringGetSize(&items[i]));
    else
      out.push_back(tstring_view(reinterpret_cast<const TString*>(&items[i])));
  }
  return out;
}

}  // namespace fastmts
