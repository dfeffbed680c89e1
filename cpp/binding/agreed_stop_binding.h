// register_agreed_stop: the StopAgreement of an agreed stop between ranks
// (fastmts.AgreedStop), which a HookedSession takes by set_agreement.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

void register_agreed_stop(pybind11::module_& m);

}  // namespace fastmts
