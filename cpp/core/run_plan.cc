#include "core/run_plan.h"

#include "core/tf_status.h"

namespace fastmts {

const std::string kRunInCallerThread("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);

namespace {
struct BufferDeleter {
  void operator()(TF_Buffer* b) const { tf::DeleteBuffer(b); }
};
}  // namespace

void SessionRunner::run(const std::vector<TF_Output>& inputs,
                        const std::vector<TF_Tensor*>& input_values,
                        const std::vector<TF_Output>& fetches,
                        const std::vector<TF_Operation*>& targets,
                        const std::string& run_options, bool want_metadata,
                        RunResult* result, const std::vector<char>* must_own) const {
  result->outputs.clear();
  result->run_metadata.clear();
  // As TF's Session.run: nothing to fetch or run means no run at all.
  if (fetches.empty() && targets.empty()) return;
  // A borrowed view of the options: TF only reads it during the call.
  TF_Buffer options{run_options.data(), run_options.size(), nullptr};
  std::unique_ptr<TF_Buffer, BufferDeleter> metadata(want_metadata ? tf::NewBuffer() : nullptr);
  std::vector<TF_Tensor*> raw_outputs(fetches.size(), nullptr);
  Status status;
  void* token = guard_ ? guard_->release() : nullptr;
  tf::SessionRun(session_, run_options.empty() ? nullptr : &options, inputs.data(),
                input_values.data(), static_cast<int>(inputs.size()), fetches.data(),
                raw_outputs.data(), static_cast<int>(fetches.size()), targets.data(),
                static_cast<int>(targets.size()), metadata.get(), status.get());
  if (guard_) guard_->reacquire(token);
  if (tf::GetCode(status.get()) != TF_OK) {
    for (TF_Tensor* t : raw_outputs)
      if (t) tf::DeleteTensor(t);
    status.raise_if_error();
  }
  result->outputs.reserve(raw_outputs.size());
  for (size_t i = 0; i < raw_outputs.size(); ++i) {
    TF_Tensor* t = raw_outputs[i];
    result->outputs.push_back(!must_own || (*must_own)[i] ? take_exclusive(t)
                                                          : SharedTensor(t, TensorDeleter()));
  }
  if (metadata)
    result->run_metadata.assign(static_cast<const char*>(metadata->data), metadata->length);
}

RunResult SessionRunner::run(const RunRequest& request, bool want_metadata) const {
  RunResult result;
  run(request, want_metadata, &result);
  return result;
}

void SessionRunner::run(const RunRequest& request, bool want_metadata, RunResult* result) const {
  static const std::vector<TF_Output> kNoOutputs;
  static const std::vector<TF_Operation*> kNoTargets;
  std::vector<TF_Tensor*> values;
  values.reserve(request.feed_values.size());
  for (const auto& v : request.feed_values) values.push_back(v.get());
  const std::vector<TF_Output>& inputs = request.feed_plan ? request.feed_plan->keys : kNoOutputs;
  run(inputs, values, request.plan ? request.plan->fetches : kNoOutputs,
      request.plan ? request.plan->targets : kNoTargets, request.run_options, want_metadata,
      result);
}

}  // namespace fastmts
