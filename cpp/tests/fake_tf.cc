#include "tests/fake_tf.h"

#include <cstring>
#include <memory>
#include <stdexcept>

namespace fastmts {
namespace testing {

namespace {

struct FakeTensor {
  TF_DataType dtype;
  std::vector<int64_t> dims;
  std::vector<char> bytes;
};

struct FakeStatus {
  TF_Code code = TF_OK;
  std::string message;
};

FakeTensor* as_fake(const TF_Tensor* t) {
  return reinterpret_cast<FakeTensor*>(const_cast<TF_Tensor*>(t));
}
TF_Tensor* as_tf(FakeTensor* t) { return reinterpret_cast<TF_Tensor*>(t); }
FakeStatus* as_fake(const TF_Status* s) {
  return reinterpret_cast<FakeStatus*>(const_cast<TF_Status*>(s));
}

// The state of the one bound FakeTf.
struct State {
  std::mutex mu;
  RunHandler handler;
  std::vector<RunCall> calls;
  std::string run_metadata;
  std::atomic<int> live_tensors{0};
};
State* g_state = nullptr;

size_t dtype_size(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: case TF_INT32: case TF_UINT32: return 4;
    case TF_DOUBLE: case TF_INT64: case TF_UINT64: return 8;
    case TF_HALF: case TF_BFLOAT16: return 2;
    default: return 0;
  }
}

TF_Status* new_status() { return reinterpret_cast<TF_Status*>(new FakeStatus()); }
void delete_status(TF_Status* s) { delete as_fake(s); }
TF_Code get_code(const TF_Status* s) { return as_fake(s)->code; }
const char* message(const TF_Status* s) { return as_fake(s)->message.c_str(); }

TF_Tensor* allocate_tensor(TF_DataType dtype, const int64_t* dims, int num_dims, size_t len) {
  auto* t = new FakeTensor{dtype, std::vector<int64_t>(dims, dims + num_dims),
                           std::vector<char>(len)};
  g_state->live_tensors.fetch_add(1);
  return as_tf(t);
}
void delete_tensor(TF_Tensor* t) {
  if (!t) return;
  g_state->live_tensors.fetch_sub(1);
  delete as_fake(t);
}
TF_Tensor* new_tensor(TF_DataType, const int64_t*, int, void*, size_t,
                      void (*)(void*, size_t, void*), void*) {
  throw std::logic_error("FakeTf: TF_NewTensor is not faked");
}
TF_DataType tensor_type(const TF_Tensor* t) { return as_fake(t)->dtype; }
int num_dims(const TF_Tensor* t) { return static_cast<int>(as_fake(t)->dims.size()); }
int64_t dim(const TF_Tensor* t, int i) { return as_fake(t)->dims.at(static_cast<size_t>(i)); }
size_t tensor_byte_size(const TF_Tensor* t) { return as_fake(t)->bytes.size(); }
void* tensor_data(const TF_Tensor* t) { return as_fake(t)->bytes.data(); }
int64_t tensor_element_count(const TF_Tensor* t) {
  int64_t n = 1;
  for (int64_t d : as_fake(t)->dims) n *= d;
  return n;
}
// Every fake tensor is its caller's alone: moved, never copied.
TF_Tensor* tensor_maybe_move(TF_Tensor* t) { return t; }
size_t data_type_size(TF_DataType dtype) { return dtype_size(dtype); }
TF_Buffer* new_buffer() { return new TF_Buffer{nullptr, 0, nullptr}; }
void delete_buffer(TF_Buffer* b) { delete b; }
const char* operation_name(TF_Operation*) { return "fake_op"; }

void session_run(TF_Session* session, const TF_Buffer* run_options, const TF_Output* inputs,
                 TF_Tensor* const* input_values, int ninputs, const TF_Output* outputs,
                 TF_Tensor** output_values, int noutputs, const TF_Operation* const* targets,
                 int ntargets, TF_Buffer* run_metadata, TF_Status* status) {
  RunCall call;
  call.session = session;
  if (run_options)
    call.run_options.assign(static_cast<const char*>(run_options->data), run_options->length);
  call.want_metadata = run_metadata != nullptr;
  call.inputs.assign(inputs, inputs + ninputs);
  for (int i = 0; i < ninputs; ++i) {
    const TF_Tensor* v = input_values[i];
    int64_t value = 0;
    if (v && num_dims(v) == 0 && tensor_type(v) == TF_INT64) value = FakeTf::as_int64(v);
    if (v && num_dims(v) == 0 && tensor_type(v) == TF_INT32) {
      int32_t narrow;
      std::memcpy(&narrow, tensor_data(v), sizeof narrow);
      value = narrow;
    }
    call.input_scalars.push_back(value);
  }
  call.fetches.assign(outputs, outputs + noutputs);
  for (int i = 0; i < ntargets; ++i)
    call.targets.push_back(const_cast<TF_Operation*>(targets[i]));
  RunHandler handler;
  {
    std::lock_guard<std::mutex> lock(g_state->mu);
    g_state->calls.push_back(call);
    handler = g_state->handler;
    if (run_metadata) {
      // The buffer points into a copy of this thread's own, valid until
      // its next run (the core copies it out right after the call).
      static thread_local std::string metadata;
      metadata = g_state->run_metadata;
      run_metadata->data = metadata.data();
      run_metadata->length = metadata.size();
    }
  }
  if (!handler) {
    FakeTf::fail(status, TF_INTERNAL, "FakeTf: no run handler");
    return;
  }
  handler(call, output_values, status);
}

}  // namespace

TF_Operation* fake_op(int i) {
  static char ops[256];
  return reinterpret_cast<TF_Operation*>(&ops[i]);
}

TF_Session* fake_session() {
  static char session;
  return reinterpret_cast<TF_Session*>(&session);
}

bool RunCall::fetches_output(const TF_Output& o) const {
  for (const TF_Output& f : fetches)
    if (same_output(f, o)) return true;
  return false;
}

bool RunCall::runs_target(TF_Operation* op) const {
  for (TF_Operation* t : targets)
    if (t == op) return true;
  return false;
}

FakeTf::FakeTf() {
  if (g_state) throw std::logic_error("FakeTf: already bound");
  g_state = new State();
  tf::NewStatus = new_status;
  tf::DeleteStatus = delete_status;
  tf::GetCode = get_code;
  tf::Message = message;
  tf::AllocateTensor = allocate_tensor;
  tf::DeleteTensor = delete_tensor;
  tf::NewTensor = new_tensor;
  tf::TensorType = tensor_type;
  tf::NumDims = num_dims;
  tf::Dim = dim;
  tf::TensorByteSize = tensor_byte_size;
  tf::TensorData = tensor_data;
  tf::TensorElementCount = tensor_element_count;
  tf::TensorMaybeMove = tensor_maybe_move;
  tf::DataTypeSize = data_type_size;
  tf::NewBuffer = new_buffer;
  tf::DeleteBuffer = delete_buffer;
  tf::SessionRun = session_run;
  tf::OperationName = operation_name;
}

FakeTf::~FakeTf() {
#define FASTMTS_UNBIND(ret, name, params) tf::name = nullptr;
  FASTMTS_TF_C_API_FUNCTIONS(FASTMTS_UNBIND)
#undef FASTMTS_UNBIND
  delete g_state;
  g_state = nullptr;
}

void FakeTf::set_run(RunHandler handler) {
  std::lock_guard<std::mutex> lock(g_state->mu);
  g_state->handler = std::move(handler);
}

std::vector<RunCall> FakeTf::calls() const {
  std::lock_guard<std::mutex> lock(g_state->mu);
  return g_state->calls;
}

size_t FakeTf::call_count() const {
  std::lock_guard<std::mutex> lock(g_state->mu);
  return g_state->calls.size();
}

void FakeTf::clear_calls() {
  std::lock_guard<std::mutex> lock(g_state->mu);
  g_state->calls.clear();
}

int FakeTf::live_tensors() const { return g_state->live_tensors.load(); }

void FakeTf::set_run_metadata(std::string bytes) {
  std::lock_guard<std::mutex> lock(g_state->mu);
  g_state->run_metadata = std::move(bytes);
}

namespace {
TF_Tensor* scalar(TF_DataType dtype, const void* value, size_t size) {
  TF_Tensor* t = allocate_tensor(dtype, nullptr, 0, size);
  std::memcpy(tensor_data(t), value, size);
  return t;
}
}  // namespace

TF_Tensor* FakeTf::int64_scalar(int64_t value) { return scalar(TF_INT64, &value, sizeof value); }
TF_Tensor* FakeTf::int32_scalar(int32_t value) { return scalar(TF_INT32, &value, sizeof value); }
TF_Tensor* FakeTf::float_scalar(float value) { return scalar(TF_FLOAT, &value, sizeof value); }

int64_t FakeTf::as_int64(const TF_Tensor* t) {
  if (tensor_type(t) != TF_INT64) throw std::logic_error("FakeTf: not an int64 tensor");
  int64_t value;
  std::memcpy(&value, tensor_data(t), sizeof value);
  return value;
}

void FakeTf::fail(TF_Status* status, int code, const std::string& message) {
  as_fake(status)->code = static_cast<TF_Code>(code);
  as_fake(status)->message = message;
}

RunHandler FakeGraph::handler() {
  return [this](const RunCall& call, TF_Tensor** outputs, TF_Status* status) {
    const int64_t step = global_step.load();
    for (size_t i = 0; i < call.fetches.size(); ++i) {
      const TF_Output& f = call.fetches[i];
      if (same_output(f, this->step)) {
        outputs[i] = FakeTf::int64_scalar(step);
        continue;
      }
      std::function<TF_Tensor*()> make;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = values.find(f.oper);
        if (it != values.end()) make = it->second;
      }
      if (!make) {
        for (size_t j = 0; j < i; ++j) delete_tensor(outputs[j]), outputs[j] = nullptr;
        FakeTf::fail(status, 3, "FakeGraph: no such output");  // INVALID_ARGUMENT
        return;
      }
      outputs[i] = make();
    }
    if (call.runs_target(train_op)) global_step.fetch_add(step_increment.load());
  };
}

RunRequest train_step(const FakeGraph& graph) {
  RunRequest request;
  request.plan = make_plan({}, {graph.train_op});
  return request;
}

RunRequest idle_step() {
  RunRequest request;
  request.plan = make_plan({}, {fake_op(3)});
  return request;
}

PlanPtr make_plan(std::vector<TF_Output> fetches, std::vector<TF_Operation*> targets) {
  auto plan = std::make_shared<RunPlan>();
  plan->fetches = std::move(fetches);
  plan->targets = std::move(targets);
  return plan;
}

}  // namespace testing
}  // namespace fastmts
