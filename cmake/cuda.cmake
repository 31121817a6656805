# The GPU backends need the CUDA toolkit's headers and NVRTC at build time only: the driver,
# NVRTC and cuBLAS are loaded at run time, so the library loads where there is no GPU.
set(RAGDOT_HAVE_CUDA OFF)
if(NOT RAGDOT_ENABLE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(RAGDOT_HAVE_CUDA ON)
    message(STATUS "ragdot: CUDA toolkit ${CUDAToolkit_VERSION} found: building the cuda, cublas and padded GPU backends")
  elseif(RAGDOT_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "RAGDOT_ENABLE_CUDA=ON but no CUDA toolkit was found")
  else()
    message(STATUS "ragdot: no CUDA toolkit: building the CPU backends only")
  endif()
endif()
