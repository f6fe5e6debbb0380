// libFuzzer target for the tensor-file readers (.npy, TensorProto .pb;
// tests/fuzz/fuzz_targets.h: ReadTensorFiles).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::fuzz::ReadTensorFiles(data, size);
  return 0;
}
