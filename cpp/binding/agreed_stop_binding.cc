#include "binding/agreed_stop_binding.h"

#include <memory>

#include "binding/hook_config_conversion.h"
#include "core/agreed_stop.h"

namespace py = pybind11;

namespace fastmts {

void register_agreed_stop(py::module_& m) {
  py::class_<StopAgreement, std::shared_ptr<StopAgreement>>(m, "StopAgreement")
      .def(py::init([](py::handle wish, py::handle vote, int64_t every_n_steps) {
             StopAgreement::Config config;
             config.wish = FromPython<TF_Output>::convert(wish);
             config.vote = FromPython<TF_Output>::convert(vote);
             config.every_n_steps = every_n_steps;
             return std::make_shared<StopAgreement>(config);
           }),
           py::kw_only(), py::arg("wish"), py::arg("vote"), py::arg("every_n_steps"))
      // Lock-free, so a signal handler may call it.
      .def("wish", &StopAgreement::wish, py::arg("value"))
      .def_property_readonly("wished", &StopAgreement::wished)
      .def_property_readonly("outcome", &StopAgreement::outcome)
      .def_property_readonly("steps", &StopAgreement::steps)
      .def_property_readonly("votes", &StopAgreement::votes)
      .def_property_readonly("every_n_steps", &StopAgreement::every_n_steps);
}

}  // namespace fastmts
