// TF_Status handling: every failed TF C API call becomes a TFError carrying
// TF's error code and message; the Python boundary turns it into the
// matching tf.errors class, exactly as TF's own Session.run does.
#pragma once

#include <stdexcept>
#include <string>

#include "core/tf_c_api.h"

namespace fastmts {

class TFError : public std::runtime_error {
 public:
  TFError(int code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Owns a TF_Status for the duration of one call.
class Status {
 public:
  Status() : status_(tf::NewStatus()) {}
  ~Status() { tf::DeleteStatus(status_); }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;

  TF_Status* get() { return status_; }
  // Throws TFError when the last call through get() failed.
  void raise_if_error() const;

 private:
  TF_Status* status_;
};

}  // namespace fastmts
