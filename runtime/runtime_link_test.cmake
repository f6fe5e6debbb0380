# kiln_runtime_link_test: PROGRAM links kiln_api only (a program that loads and runs
# bundles). It must carry the runtime and none of the compiler: no symbol of the ONNX
# importer, fusion, code generation or the compiler driver, and no NVRTC library.
#   cmake -DPROGRAM=path/to/kiln_example_run_bundle -P runtime_link_test.cmake
if(NOT EXISTS "${PROGRAM}")
  message(FATAL_ERROR "no program at '${PROGRAM}': build kiln_example_run_bundle first")
endif()
execute_process(COMMAND nm -C "${PROGRAM}" OUTPUT_VARIABLE symbols ERROR_VARIABLE nm_error RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -C ${PROGRAM} failed (${rc}): ${nm_error}")
endif()
# The test means something only if the symbols are there: the runtime's must be.
foreach(expected "kiln::Bundle::Load" "kiln::GpuExecutor")
  string(FIND "${symbols}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${PROGRAM} has no symbol '${expected}': stripped, or not the runtime program")
  endif()
endforeach()
set(found "")
foreach(forbidden
    "kiln::ImportOnnx"                 # frontend/
    "kiln::FuseEpilogue"               # fusion/
    "kiln::FusePointwise"
    "kiln::codegen::GenerateNodeKernels"  # codegen/ (NVRTC sources)
    "kiln::codegen::CompileModule"
    "kiln::BuildBundle"                # compiler/
    "kiln::PlanGraphMemory"
    "nvrtcCompileProgram")
  string(FIND "${symbols}" "${forbidden}" at)
  if(NOT at EQUAL -1)
    list(APPEND found "${forbidden}")
  endif()
endforeach()
execute_process(COMMAND readelf -d "${PROGRAM}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${PROGRAM} failed (${rc})")
endif()
if(dynamic MATCHES "libnvrtc")
  list(APPEND found "a NEEDED entry for libnvrtc")
endif()
if(found)
  list(JOIN found ", " found)
  message(FATAL_ERROR "${PROGRAM} links the compiler: ${found}")
endif()
message(STATUS "${PROGRAM}: runtime only (no importer, fusion, code generation or NVRTC)")
