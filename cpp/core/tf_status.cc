#include "core/tf_status.h"

namespace fastmts {

void Status::raise_if_error() const {
  TF_Code code = tf::GetCode(status_);
  if (code != TF_OK) throw TFError(static_cast<int>(code), tf::Message(status_));
}

}  // namespace fastmts
