// How fast a host backend is here, measured: default sizes of CPU runs follow it, so that
// `ragdot run` finishes in seconds on an AMX server and on a machine with scalar kernels alike
// (their rates differ by a factor of several hundred), and on a machine busy with other work.
#pragma once

#include <string>

#include "ragdot/dtype.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cli {

// FLOP/s of `backend` ("" = the automatic choice among host backends) on a square-ish grouped
// GEMM grown until one run takes about 20 ms. Costs well under a second.
Result<double> measure_host_flop_rate(const std::string& backend, DType dtype);

}  // namespace ragdot::cli
