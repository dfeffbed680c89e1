// A file that appears whole or not at all, as TF's
// atomic_write_string_to_file makes it (a temporary name in the same
// directory, renamed over the file's name), written from any thread.
//
// The contents go first to an unnamed file in the directory (Linux's
// O_TMPFILE), so a process killed while writing leaves nothing behind; at
// commit() the file gets a temporary name (TF's: `<name>.tmp<32 hex>`) and
// is renamed to its own at once. Where the file system has no unnamed
// files, it is written under the temporary name from the start, as TF
// writes it.
#pragma once

#include <string>
#include <string_view>

#include "core/file_formats/text_format.h"

namespace fastmts {

class AtomicFile : public text_format::Sink {
 public:
  // Opens the file's temporary; throws std::system_error (the errno of the
  // failed call) when it cannot be made, as at once as TF's write would fail.
  explicit AtomicFile(std::string path);
  ~AtomicFile() override;  // not committed: the temporary is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends; throws std::system_error (a full disk, say).
  void write(std::string_view data) override;
  // The contents under the file's name (replacing any file of that name);
  // throws std::system_error. Once only.
  void commit();
  // Gives the temporary up: nothing is left of it.
  void abort();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temp_name_;  // empty while the temporary is unnamed
  int fd_ = -1;
};

}  // namespace fastmts
