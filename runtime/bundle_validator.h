// The bundle validator: every reader of a bundle (the executors, kiln inspect, the
// API) gets a manifest it has checked, so nothing downstream indexes, allocates or
// binds by a field it did not check. Bundle::Load runs it.
//
// Checked: sections (weights and kernels inside theirs, aligned); every dtype names
// a kiln dtype and every shape passes CheckedTensorBytes; the memory plan's arena;
// bindings (ARENA inside the arena with the bytes of their dtype and shape, WEIGHT
// naming a weight of that dtype and shape, inputs bound in the arena); the
// signature (each input and output's binding carries the signature's dtype and
// shape); steps (indices in order, launches naming a module that exists, with three
// non-zero grid and block dims, at most 1024 threads and 227 KiB of shared memory a
// block, arguments naming a present input or an output, tensor maps of rank 1..5
// with rank entries, bounded workspace).
#pragma once

#include "absl/status/status.h"
#include "runtime/bundle.pb.h"

namespace kiln {

// InvalidArgument "corrupt bundle: ..." naming the step, binding or field.
absl::Status ValidateManifest(const bundle::Manifest& m);

}  // namespace kiln
