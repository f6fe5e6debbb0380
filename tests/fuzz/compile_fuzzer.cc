// libFuzzer target for `kiln compile` short of NVRTC (tests/fuzz/fuzz_targets.h:
// CompileOnnx): the importer, the pass pipeline, the memory plan and the kernel
// generators on arbitrary ModelProto bytes. docs/fuzzing.md.
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::fuzz::CompileOnnx(data, size);
  return 0;
}
