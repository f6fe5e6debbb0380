// libFuzzer target for the bundle reader (tests/fuzz/fuzz_targets.h: LoadBundle): an
// input is a whole bundle file, or a manifest that the target wraps into one with a
// valid checksum (scripts/fuzz.sh seeds both from real bundles), so that mutations
// reach the validator and what runs after it.
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::fuzz::LoadBundle(data, size);
  return 0;
}
