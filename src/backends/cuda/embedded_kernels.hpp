// The kernel headers under kernels/ragdot/, embedded into the library at build time so that
// NVRTC compiles exactly the sources this build was made with, wherever the library is installed.
#pragma once

#include <vector>

#include "backends/cuda/nvrtc_compiler.hpp"

namespace ragdot::cuda {

// Names as kernels include them ("ragdot/mma_sync.cuh"), with their text.
const std::vector<SourceFile>& embedded_kernel_headers();

}  // namespace ragdot::cuda
