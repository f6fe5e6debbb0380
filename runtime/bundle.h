// The kiln bundle (.kiln): one file holding a protobuf manifest, compiled kernels and
// the weights, written atomically and read through mmap. Layout: docs/runtime.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "codegen/kernel_launch.h"
#include "graph/graph.h"
#include "graph/dim_expr.h"
#include "graph/tensor.h"
#include "runtime/bundle.pb.h"

namespace kiln {

inline constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', 'L'};
// Version 1: static bundles. Version 2: bundles compiled for dim ranges (Manifest
// dim_symbols, launches with run-time sizes and size variants), which a reader of
// version 1 alone would run wrongly (every size variant of a step); the writer stamps
// the lowest version that holds the manifest, and this reader takes both.
inline constexpr uint32_t kBundleFormatVersion = 1;
inline constexpr uint32_t kDynamicBundleFormatVersion = 2;
inline constexpr uint64_t kBundleAlignment = 256;
// magic (8) + format version (u32) + manifest length (u64), little-endian.
inline constexpr uint64_t kBundleHeaderBytes = 20;

// FNV-1a 64-bit hash (offset basis 0xcbf29ce484222325, prime 0x100000001b3), continued
// from `seed` (pass the previous result to hash data in pieces).
uint64_t Fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

// Kernel image to store in the kernel section.
struct KernelImage {
  std::string name;
  std::string arch;
  std::string bytes;
};

// What WriteBundle stores. The writer fills manifest.weights / kernels (offsets),
// the section sizes and format_version; the caller sets everything else.
struct BundleContents {
  bundle::Manifest manifest;
  std::vector<std::string> weight_names;  // weight i is the graph value weight_names[i]
  std::vector<Tensor> weights;            // its data
  std::vector<KernelImage> kernels;
};

// Writes `contents` to `path` atomically: a temporary file in the same folder, then
// rename. Errors name the file.
absl::Status WriteBundle(BundleContents contents, const std::string& path);

struct BundleLoadOptions {
  // When set, the bundle must have been compiled for this arch (FailedPrecondition
  // naming both otherwise). Empty: any arch (the CPU backend runs every bundle).
  std::string expected_arch;
};

// A bundle mapped into memory. Weights and kernels stay in the mapping: weight_bytes()
// and kernel_bytes() are views into it (no copy) for as long as the Bundle lives;
// WeightTensor() copies, because kiln::Tensor owns its storage.
class Bundle {
 public:
  // Maps `path`, checks magic, version, sizes, checksum and arch. Errors:
  // NotFound (missing file), InvalidArgument (not a bundle, truncated, corrupt),
  // FailedPrecondition (other format version, other arch). Each names the file.
  static absl::StatusOr<std::unique_ptr<Bundle>> Load(const std::string& path,
                                                      const BundleLoadOptions& options = {});
  ~Bundle();
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;

  const std::string& path() const { return path_; }
  const bundle::Manifest& manifest() const { return manifest_; }
  uint64_t file_bytes() const { return size_; }
  uint64_t manifest_bytes() const { return manifest_bytes_; }
  uint64_t kernel_section_offset() const { return kernel_offset_; }
  uint64_t weight_section_offset() const { return weight_offset_; }
  uint64_t checksum() const { return checksum_; }

  // The bytes of weight / kernel `i` inside the mapping.
  absl::Span<const uint8_t> weight_bytes(int i) const;
  absl::Span<const uint8_t> kernel_bytes(int i) const;
  // Weight `i` as a Tensor (a copy of the mapped bytes).
  absl::StatusOr<Tensor> WeightTensor(int i) const;
  // The graph of graph_text with every constant's data set from its weight.
  absl::StatusOr<std::unique_ptr<Graph>> BuildGraph() const;

 private:
  Bundle() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t manifest_bytes_ = 0;
  uint64_t kernel_offset_ = 0;
  uint64_t weight_offset_ = 0;
  uint64_t checksum_ = 0;
  bundle::Manifest manifest_;
};

// Helpers shared by the compiler, executor and tools.
std::vector<int64_t> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& dims);
// A dynamic bundle's ranges as "batch=1..4, seq=1..64" ("" for a static bundle).
std::string DimRangesText(const bundle::Manifest& m);
// A dynamic bundle's dim symbols (Manifest.dim_symbols; empty for a static bundle).
std::vector<DimSymbol> DimSymbolsOf(const bundle::Manifest& m);
// The kernels a step launches in one run: its launches, the size variants among them
// (IsSizeVariant) counting once.
int LaunchesPerRun(const bundle::Step& step);
// A size variant's boxes as "batch=1..1 seq=1..127; batch=2..3 seq=1..127" ("" for a
// launch that runs at every size).
std::string SizeBoxesText(const bundle::Manifest& m, const bundle::Launch& launch);
// Whether `launch` is one size variant of its step (size_boxes or size_ranges), and the
// sizes it runs at: "batch=1..1 seq=1..7; ...", "batch*seq in 1..192, 449..704".
bool IsSizeVariant(const bundle::Launch& launch);
std::string SizeVariantText(const bundle::Manifest& m, const bundle::Launch& launch);
// The shape of an input or output at these symbol values (in DimSymbolsOf order): its
// dims evaluated, or its fixed shape. InvalidArgument when a dim does not parse.
absl::StatusOr<Shape> SignatureShape(const bundle::Manifest& m, const bundle::TensorSignature& s,
                                     absl::Span<const int64_t> values);
absl::StatusOr<DType> DTypeFromBinding(const bundle::Binding& binding);
// InvalidArgument, naming the bundle, unless `feeds` holds every input of the
// signature, with its exact dtype and shape, and nothing else.
absl::Status CheckFeeds(const Bundle& bundle, const absl::flat_hash_map<std::string, Tensor>& feeds);
// A generated launch's TMA tensor maps, family and workspace sizes into its
// bundle::Launch, and the maps back (InvalidArgument for a malformed entry).
void SetLaunchTensorMaps(const codegen::KernelLaunch& launch, bundle::Launch* out);
absl::StatusOr<std::vector<codegen::TensorMapSpec>> TensorMapsFromProto(const bundle::Launch& launch);
// The largest workspace a launch may ask for: Bundle::Load refuses a manifest with
// more (a corrupt or hostile bundle) before any session allocates it.
inline constexpr uint32_t kMaxLaunchSemaphores = uint32_t{1} << 26;       // 256 MiB of counters
inline constexpr uint64_t kMaxLaunchScratchBytes = uint64_t{1} << 34;    // 16 GiB

}  // namespace kiln
