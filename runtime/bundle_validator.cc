// The bundle validator (runtime/bundle_validator.h).
#include "runtime/bundle_validator.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/dtype.h"
#include "runtime/bundle.h"

namespace kiln {
namespace {

constexpr uint64_t kMaxSharedBytes = 227 * 1024;
constexpr uint64_t kMaxThreadsPerBlock = 1024;

absl::Status Corrupt(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("corrupt bundle: ", where, ": ", what));
}

// The bytes of a dtype name and shape, checked.
absl::StatusOr<int64_t> Bytes(const std::string& where, const std::string& dtype,
                              const google::protobuf::RepeatedField<int64_t>& shape) {
  absl::StatusOr<DType> d = ParseDType(dtype);
  if (!d.ok()) return Corrupt(where, d.status().message());
  absl::StatusOr<int64_t> bytes = CheckedTensorBytes(*d, ShapeFromProto(shape), "its type");
  if (!bytes.ok()) return Corrupt(where, bytes.status().message());
  return *bytes;
}

absl::Status CheckBinding(const bundle::Manifest& m, const bundle::Binding& b, const std::string& where) {
  if (b.kind() == bundle::Binding::ABSENT) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(const int64_t bytes, Bytes(where, b.dtype(), b.shape()));
  if (b.bytes() != bytes) {
    return Corrupt(where, absl::StrCat(b.bytes(), " bytes bound for ", b.dtype(), ShapeToString(ShapeFromProto(b.shape())),
                                       " (", bytes, ")"));
  }
  if (b.kind() == bundle::Binding::ARENA) {
    const int64_t arena = m.memory_plan().arena_bytes();
    if (b.offset() < 0 || b.offset() > arena || bytes > arena - b.offset()) {
      return Corrupt(where, absl::StrCat("bytes [", b.offset(), ", +", bytes, ") lie outside the ", arena,
                                         "-byte arena"));
    }
    return absl::OkStatus();
  }
  if (b.kind() != bundle::Binding::WEIGHT) return Corrupt(where, absl::StrCat("unknown binding kind ", b.kind()));
  if (b.weight_index() < 0 || b.weight_index() >= m.weights_size()) {
    return Corrupt(where, absl::StrCat("weight index ", b.weight_index(), " of ", m.weights_size(), " weights"));
  }
  const bundle::Weight& w = m.weights(b.weight_index());
  if (w.dtype() != b.dtype() || ShapeFromProto(w.shape()) != ShapeFromProto(b.shape())) {
    return Corrupt(where, absl::StrCat("binds weight '", w.name(), "' (", w.dtype(),
                                       ShapeToString(ShapeFromProto(w.shape())), ") as ", b.dtype(),
                                       ShapeToString(ShapeFromProto(b.shape()))));
  }
  return absl::OkStatus();
}

absl::Status CheckSignature(const bundle::Manifest& m, const bundle::TensorSignature& s, const std::string& where) {
  KILN_RETURN_IF_ERROR(Bytes(where, s.dtype(), s.shape()).status());
  const bundle::Binding& b = s.binding();
  if (b.kind() == bundle::Binding::ABSENT || b.dtype() != s.dtype() ||
      ShapeFromProto(b.shape()) != ShapeFromProto(s.shape())) {
    return Corrupt(where, absl::StrCat("is ", s.dtype(), ShapeToString(ShapeFromProto(s.shape())), " but bound as ",
                                       b.kind() == bundle::Binding::ABSENT ? std::string("nothing")
                                                                            : absl::StrCat(b.dtype(), ShapeToString(ShapeFromProto(b.shape())))));
  }
  return CheckBinding(m, b, where);
}

absl::Status CheckLaunch(const bundle::Manifest& m, const bundle::Step& step, const bundle::Launch& l,
                         const std::string& where) {
  if (l.module() < 0 || l.module() >= m.kernels_size()) {
    return Corrupt(where, absl::StrCat("module ", l.module(), " of ", m.kernels_size()));
  }
  if (l.grid_size() != 3 || l.block_size() != 3) return Corrupt(where, "grid and block need three dims each");
  uint64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (l.grid(d) == 0 || l.block(d) == 0) return Corrupt(where, "a grid or block dim is 0");
    threads *= l.block(d);
  }
  if (threads > kMaxThreadsPerBlock) return Corrupt(where, absl::StrCat(threads, " threads a block"));
  if (l.shared_bytes() > kMaxSharedBytes) return Corrupt(where, absl::StrCat(l.shared_bytes(), " bytes of shared memory"));
  const int tensors = step.outputs_size() + step.inputs_size();
  for (int a : l.args()) {
    if (a < 0 || a >= tensors ||
        (a >= step.outputs_size() && step.inputs(a - step.outputs_size()).kind() == bundle::Binding::ABSENT)) {
      return Corrupt(where, absl::StrCat("argument ", a, " names no tensor of the step"));
    }
  }
  for (const bundle::TensorMap& t : l.tensor_maps()) {
    if (t.tensor() < 0 || t.tensor() >= tensors || t.rank() < 1 || t.rank() > 5 || t.dims_size() != t.rank() ||
        t.box_size() != t.rank() || t.strides_bytes_size() != t.rank() - 1) {
      return Corrupt(where, "malformed tensor map");
    }
  }
  const int box = 2 * m.dim_symbols_size();
  if (l.size_boxes_size() > 0 && (!l.dim_param() || box == 0 || l.size_boxes_size() % box != 0)) {
    return Corrupt(where, "size variant boxes that do not give a range per dim symbol");
  }
  for (int i = 0; i + 1 < l.size_boxes_size(); i += 2) {
    if (l.size_boxes(i) > l.size_boxes(i + 1)) return Corrupt(where, "a size variant box with lo > hi");
  }
  if (l.size_ranges_size() > 0 && !l.dim_param()) {
    return Corrupt(where, "size variant ranges on a launch without run-time sizes");
  }
  if ((l.size_ranges_size() > 0) != !l.size_select().empty() || l.size_ranges_size() % 2 != 0) {
    return Corrupt(where, "size variant ranges without an expression, or an expression without [lo, hi] pairs");
  }
  for (int i = 0; i + 1 < l.size_ranges_size(); i += 2) {
    if (l.size_ranges(i) > l.size_ranges(i + 1)) return Corrupt(where, "a size variant range with lo > hi");
  }
  if (l.semaphores() > kMaxLaunchSemaphores || l.scratch_bytes() > kMaxLaunchScratchBytes) {
    return Corrupt(where, absl::StrCat("a workspace of ", l.semaphores(), " semaphores and ", l.scratch_bytes(),
                                       " bytes of scratch (at most ", kMaxLaunchSemaphores, " and ",
                                       kMaxLaunchScratchBytes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateManifest(const bundle::Manifest& m) {
  for (int i = 0; i < m.weights_size(); ++i) {
    const auto& w = m.weights(i);
    const std::string where = absl::StrCat("weight ", i, " ('", w.name(), "')");
    if (w.offset() % kBundleAlignment != 0 || w.offset() > m.weight_section_bytes() ||
        w.bytes() > m.weight_section_bytes() - w.offset()) {
      return Corrupt(where, "lies outside the weight section");
    }
    KILN_ASSIGN_OR_RETURN(const int64_t bytes, Bytes(where, w.dtype(), w.shape()));
    if (static_cast<uint64_t>(bytes) != w.bytes()) {
      return Corrupt(where, absl::StrCat(w.bytes(), " bytes stored for ", bytes));
    }
  }
  for (int i = 0; i < m.kernels_size(); ++i) {
    const auto& k = m.kernels(i);
    if (k.offset() > m.kernel_section_bytes() || k.bytes() > m.kernel_section_bytes() - k.offset()) {
      return Corrupt(absl::StrCat("kernel ", i, " ('", k.name(), "')"), "lies outside the kernel section");
    }
  }
  const int64_t arena = m.memory_plan().arena_bytes();
  if (arena < 0 || arena > kMaxTensorBytes) return Corrupt("memory plan", absl::StrCat("arena of ", arena, " bytes"));
  for (int i = 0; i < m.inputs_size(); ++i) {
    const std::string where = absl::StrCat("input '", m.inputs(i).name(), "'");
    KILN_RETURN_IF_ERROR(CheckSignature(m, m.inputs(i), where));
    if (m.inputs(i).binding().kind() != bundle::Binding::ARENA) return Corrupt(where, "is not bound in the arena");
  }
  for (int i = 0; i < m.outputs_size(); ++i) {
    KILN_RETURN_IF_ERROR(CheckSignature(m, m.outputs(i), absl::StrCat("output '", m.outputs(i).name(), "'")));
  }
  for (int s = 0; s < m.steps_size(); ++s) {
    const bundle::Step& step = m.steps(s);
    const std::string where = absl::StrCat("step ", s, " (node '", step.node(), "')");
    if (step.index() != s) return Corrupt(where, absl::StrCat("has index ", step.index()));
    for (int i = 0; i < step.inputs_size(); ++i) {
      KILN_RETURN_IF_ERROR(CheckBinding(m, step.inputs(i), absl::StrCat(where, " input ", i)));
    }
    for (int i = 0; i < step.outputs_size(); ++i) {
      KILN_RETURN_IF_ERROR(CheckBinding(m, step.outputs(i), absl::StrCat(where, " output ", i)));
      if (step.outputs(i).kind() == bundle::Binding::WEIGHT) return Corrupt(where, "writes into a weight");
    }
    for (int j = 0; j < step.launches_size(); ++j) {
      KILN_RETURN_IF_ERROR(CheckLaunch(m, step, step.launches(j), absl::StrCat(where, " launch ", j)));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
