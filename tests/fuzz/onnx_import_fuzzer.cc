// libFuzzer target for the ONNX importer (tests/fuzz/fuzz_targets.h: ImportOnnx).
// KILN_FUZZ_SKIP_ONNX_CHECKER=1 imports without ONNX's checker, so that kiln's own
// validation is what stands between the bytes and the op code. docs/fuzzing.md.
#include <stdlib.h>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool skip = [] {
    const char* v = getenv("KILN_FUZZ_SKIP_ONNX_CHECKER");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  (void)kiln::fuzz::ImportOnnx(data, size, skip);
  return 0;
}
