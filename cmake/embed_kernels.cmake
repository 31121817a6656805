# Writes a C++ file that holds the text of every kernel header (script mode: cmake -P).
# Inputs: KERNEL_DIR (the folder that holds ragdot/*.cuh and ragdot/*.h), OUTPUT, FILES (;-list
# of paths relative to KERNEL_DIR).
set(body "")
foreach(rel ${FILES})
  file(READ "${KERNEL_DIR}/${rel}" text)
  string(FIND "${text}" ")ragdot_src\"" bad)
  if(NOT bad EQUAL -1)
    message(FATAL_ERROR "${rel} contains the raw-string delimiter")
  endif()
  string(APPEND body "    {\"${rel}\", R\"ragdot_src(${text})ragdot_src\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from kernels/ at build time. Do not edit.\n#include \"backends/cuda/embedded_kernels.hpp\"\n\nnamespace ragdot::cuda {\n\nconst std::vector<SourceFile>& embedded_kernel_headers() {\n  static const std::vector<SourceFile> files = {\n${body}  };\n  return files;\n}\n\n}  // namespace ragdot::cuda\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
