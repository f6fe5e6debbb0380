// What kiln's fuzz targets do with one input, as plain functions: the libFuzzer
// mains (tests/fuzz/*_fuzzer.cc, built with clang and ASan/UBSan by
// scripts/fuzz.sh) call them, and the default test run replays every known crash
// through them (tests/hostile_test.cc). Each returns normally on any input; errors
// are expected, crashes and sanitizer reports are what the fuzzers look for.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace kiln::fuzz {

// Bytes -> ONNX ModelProto -> ImportOnnxModel (with ONNX's checker, or without it as
// models newer than the installed ONNX library are imported) -> for graphs holding
// fewer than 10^6 elements in all, a CPU reference run on zero inputs. External-data
// references resolve against an empty folder.
// Returns the import's status (OK also for bytes that are no ModelProto).
absl::Status ImportOnnx(const uint8_t* data, size_t size, bool skip_onnx_checker);

// Bytes -> ONNX ModelProto (its inputs' named dims fixed at 2) -> ImportOnnxModel
// (with ONNX's checker) -> for graphs holding fewer than 2^24 elements, what `kiln
// compile` does short of NVRTC, twice
// (the defaults: fp16, auto; then fp32 with every MatMul and conv group generated):
// the pass pipeline with the graph verified after every pass, the memory plan, and
// each node's kernel choice and generated kernel sources.
// Returns the first error (the import's, else the pipeline's or a generator's).
absl::Status CompileOnnx(const uint8_t* data, size_t size);

// Bytes -> a bundle file -> Bundle::Load (the validator) -> kiln inspect's summary
// -> the CPU program and, when the arena and inputs are under 64 MiB, one CPU
// backend run on zero inputs.
// Returns Bundle::Load's status.
absl::Status LoadBundle(const uint8_t* data, size_t size);

// Bytes -> a .npy file and a TensorProto .pb file -> their readers.
// Returns the .pb reader's status.
absl::Status ReadTensorFiles(const uint8_t* data, size_t size);

}  // namespace kiln::fuzz
