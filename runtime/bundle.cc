// Writing (atomic) and loading (mmap, validated) of kiln bundles.
#include "runtime/bundle.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/temp_files.h"
#include "graph/text_format.h"
#include "runtime/bundle_validator.h"

namespace kiln {
namespace {

uint64_t AlignUp(uint64_t n) { return (n + kBundleAlignment - 1) / kBundleAlignment * kBundleAlignment; }

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Writes `data` to `fd` fully.
bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

uint64_t Fnv1a64(const void* data, size_t size, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<int64_t> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& dims) {
  return std::vector<int64_t>(dims.begin(), dims.end());
}

absl::StatusOr<DType> DTypeFromBinding(const bundle::Binding& binding) { return ParseDType(binding.dtype()); }

absl::Status WriteBundle(BundleContents contents, const std::string& path) {
  bundle::Manifest& m = contents.manifest;
  if (contents.weights.size() != contents.weight_names.size()) {
    return absl::InternalError(absl::StrCat(path, ": weight names and tensors differ in number"));
  }
  m.set_format_version(m.dim_symbols_size() > 0 ? kDynamicBundleFormatVersion : kBundleFormatVersion);
  m.clear_weights();
  m.clear_kernels();
  uint64_t kernel_bytes = 0;
  for (const KernelImage& k : contents.kernels) {
    bundle::KernelBlob* blob = m.add_kernels();
    blob->set_name(k.name);
    blob->set_arch(k.arch);
    blob->set_offset(kernel_bytes);
    blob->set_bytes(k.bytes.size());
    kernel_bytes = AlignUp(kernel_bytes + k.bytes.size());
  }
  uint64_t weight_bytes = 0;
  for (size_t i = 0; i < contents.weights.size(); ++i) {
    const Tensor& t = contents.weights[i];
    bundle::Weight* w = m.add_weights();
    w->set_name(contents.weight_names[i]);
    w->set_dtype(std::string(DTypeName(t.dtype())));
    for (int64_t d : t.shape()) w->add_shape(d);
    w->set_offset(weight_bytes);
    w->set_bytes(t.nbytes());
    weight_bytes = AlignUp(weight_bytes + t.nbytes());
  }
  m.set_kernel_section_bytes(kernel_bytes);
  m.set_weight_section_bytes(weight_bytes);
  std::string manifest;
  if (!m.SerializeToString(&manifest)) return absl::InternalError(absl::StrCat(path, ": cannot serialise the manifest"));

  std::string head(kBundleMagic, sizeof(kBundleMagic));
  PutU32(&head, m.format_version());
  PutU64(&head, manifest.size());
  head += manifest;
  head.resize(AlignUp(head.size()), '\0');

  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmpl = (dir / (target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot create a temporary file in ", dir.string(), ": ", std::strerror(errno)));
  }
  ScopedTempFile guard(tmpl);  // removed if a signal ends the process mid-write
  uint64_t hash = Fnv1a64(head.data(), head.size());
  bool ok = WriteAll(fd, head.data(), head.size());
  const std::string zeros(kBundleAlignment, '\0');
  auto write_padded = [&](const void* data, size_t size) {
    if (!ok) return;
    ok = WriteAll(fd, data, size);
    hash = Fnv1a64(data, size, hash);
    const size_t pad = AlignUp(size) - size;
    if (ok && pad > 0) {
      ok = WriteAll(fd, zeros.data(), pad);
      hash = Fnv1a64(zeros.data(), pad, hash);
    }
  };
  for (const KernelImage& k : contents.kernels) write_padded(k.bytes.data(), k.bytes.size());
  for (const Tensor& t : contents.weights) write_padded(t.raw_data(), t.nbytes());
  std::string tail;
  PutU64(&tail, hash);
  if (ok) ok = WriteAll(fd, tail.data(), tail.size());
  if (ok) ok = ::fsync(fd) == 0;
  const int saved_errno = errno;
  if (::close(fd) != 0) ok = false;
  if (!ok) {
    std::remove(tmpl.c_str());
    return absl::DataLossError(absl::StrCat(path, ": writing ", tmpl, " failed: ", std::strerror(saved_errno)));
  }
  ::chmod(tmpl.c_str(), 0644);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmpl.c_str());
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot rename ", tmpl, " into place: ", std::strerror(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Bundle>> Bundle::Load(const std::string& path, const BundleLoadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such bundle file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<Bundle> b(new Bundle());
  b->path_ = path;
  b->size_ = static_cast<uint64_t>(st.st_size);
  if (b->size_ > 0) {
    void* p = ::mmap(nullptr, b->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(e)));
    }
    b->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  const uint8_t* d = b->data_;
  const uint64_t size = b->size_;

  // Magic: a file shorter than it is "truncated" only if it is a prefix of it.
  const uint64_t magic_len = std::min<uint64_t>(size, sizeof(kBundleMagic));
  if (magic_len == 0 || std::memcmp(d, kBundleMagic, magic_len) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a kiln bundle (the file does not start with \"KILNBNDL\")"));
  }
  if (size < kBundleHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated bundle: ", size, " bytes, shorter than the 20-byte header"));
  }
  const uint32_t version = GetU32(d + 8);
  if (version != kBundleFormatVersion && version != kDynamicBundleFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": bundle format version ", version, " is not supported (this kiln reads versions ",
                     kBundleFormatVersion, " and ", kDynamicBundleFormatVersion, "); recompile the model"));
  }
  const uint64_t manifest_len = GetU64(d + 12);
  if (manifest_len > size - kBundleHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated bundle: the manifest needs ", manifest_len,
                                                   " bytes after the header, the file has ",
                                                   size - kBundleHeaderBytes));
  }
  b->manifest_bytes_ = manifest_len;
  if (!b->manifest_.ParseFromArray(d + kBundleHeaderBytes, static_cast<int>(manifest_len))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: the manifest does not parse"));
  }
  const bundle::Manifest& m = b->manifest_;
  b->kernel_offset_ = AlignUp(kBundleHeaderBytes + manifest_len);
  b->weight_offset_ = b->kernel_offset_ + m.kernel_section_bytes();
  const uint64_t checksum_offset = b->weight_offset_ + m.weight_section_bytes();
  if (m.kernel_section_bytes() % kBundleAlignment != 0 || m.weight_section_bytes() % kBundleAlignment != 0 ||
      checksum_offset < b->weight_offset_) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: bad section sizes in the manifest"));
  }
  const uint64_t expected = checksum_offset + 8;
  if (size < expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated bundle: ", size, " bytes, the manifest says ",
                                                   expected));
  }
  if (size > expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: ", size - expected,
                                                   " unexpected bytes after the checksum"));
  }
  const uint64_t stored = GetU64(d + checksum_offset);
  const uint64_t actual = Fnv1a64(d, checksum_offset);
  if (stored != actual) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: corrupt bundle: checksum mismatch (stored %016x, computed %016x over %d bytes)", path, stored, actual,
        checksum_offset));
  }
  b->checksum_ = stored;
  if (m.format_version() != version) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt bundle: header version ", version,
                                                   " but manifest version ", m.format_version()));
  }
  if (absl::Status valid = ValidateManifest(m); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  }
  if (!options.expected_arch.empty() && options.expected_arch != m.target_arch()) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": the bundle was compiled for ", m.target_arch(),
                                                      " but ", options.expected_arch,
                                                      " was asked for; recompile with --arch ",
                                                      options.expected_arch));
  }
  return b;
}

Bundle::~Bundle() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

absl::Span<const uint8_t> Bundle::weight_bytes(int i) const {
  const auto& w = manifest_.weights(i);
  return absl::Span<const uint8_t>(data_ + weight_offset_ + w.offset(), w.bytes());
}

absl::Span<const uint8_t> Bundle::kernel_bytes(int i) const {
  const auto& k = manifest_.kernels(i);
  return absl::Span<const uint8_t>(data_ + kernel_offset_ + k.offset(), k.bytes());
}

absl::StatusOr<Tensor> Bundle::WeightTensor(int i) const {
  if (i < 0 || i >= manifest_.weights_size()) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": no weight ", i));
  }
  const auto& w = manifest_.weights(i);
  auto dtype = ParseDType(w.dtype());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", w.name(), "': ", dtype.status().message()));
  }
  Tensor t(*dtype, ShapeFromProto(w.shape()));
  if (t.nbytes() != w.bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", w.name(), "': ", w.bytes(),
                                                   " bytes stored for ", t.TypeString()));
  }
  if (t.nbytes() > 0) std::memcpy(t.mutable_raw_data(), weight_bytes(i).data(), t.nbytes());
  return t;
}

absl::StatusOr<std::unique_ptr<Graph>> Bundle::BuildGraph() const {
  auto graph = ParseGraph(manifest_.graph_text());
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the bundle's graph text does not parse: ", graph.status().message()));
  }
  for (int i = 0; i < manifest_.weights_size(); ++i) {
    Value* v = (*graph)->FindValue(manifest_.weights(i).name());
    if (v == nullptr || !v->is_constant()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", manifest_.weights(i).name(),
                                                     "' is not a constant of the bundle's graph"));
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, WeightTensor(i));
    if (t.dtype() != v->dtype() || t.shape() != v->shape()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", v->name(), "' is ", t.TypeString(),
                                                     " but the graph declares ", v->TypeString()));
    }
    std::vector<DimExpr> symbolic = v->symbolic_data();  // a dynamic bundle's shape constants keep theirs
    (*graph)->SetConstant(v, std::move(t));
    v->SetSymbolicData(std::move(symbolic));
  }
  return graph;
}

int LaunchesPerRun(const bundle::Step& step) {
  int always = 0, variants = 0;
  for (const bundle::Launch& l : step.launches()) (IsSizeVariant(l) ? variants : always) += 1;
  return always + (variants > 0 ? 1 : 0);
}

std::string SizeBoxesText(const bundle::Manifest& m, const bundle::Launch& launch) {
  const int n = m.dim_symbols_size();
  std::vector<std::string> boxes;
  for (int b = 0; n > 0 && b + 2 * n <= launch.size_boxes_size(); b += 2 * n) {
    std::vector<std::string> ranges;
    for (int k = 0; k < n; ++k) {
      ranges.push_back(absl::StrCat(m.dim_symbols(k).name(), "=", launch.size_boxes(b + 2 * k), "..",
                                    launch.size_boxes(b + 2 * k + 1)));
    }
    boxes.push_back(absl::StrJoin(ranges, " "));
  }
  return absl::StrJoin(boxes, "; ");
}

bool IsSizeVariant(const bundle::Launch& launch) {
  return launch.size_boxes_size() > 0 || launch.size_ranges_size() > 0;
}

std::string SizeVariantText(const bundle::Manifest& m, const bundle::Launch& launch) {
  std::vector<std::string> parts;
  if (launch.size_boxes_size() > 0) parts.push_back(SizeBoxesText(m, launch));
  if (launch.size_ranges_size() > 0) {
    std::vector<std::string> ranges;
    for (int i = 0; i + 1 < launch.size_ranges_size(); i += 2) {
      ranges.push_back(absl::StrCat(launch.size_ranges(i), "..", launch.size_ranges(i + 1)));
    }
    parts.push_back(absl::StrCat(launch.size_select(), " in ", absl::StrJoin(ranges, ", ")));
  }
  return absl::StrJoin(parts, "; and ");
}

std::string DimRangesText(const bundle::Manifest& m) {
  std::vector<std::string> ranges;
  for (const bundle::DimSymbol& d : m.dim_symbols()) {
    ranges.push_back(
        absl::StrCat(d.name(), "=", d.min(), "..", d.max(), d.opt() > 0 ? absl::StrCat(":", d.opt()) : ""));
  }
  return absl::StrJoin(ranges, ", ");
}

std::vector<DimSymbol> DimSymbolsOf(const bundle::Manifest& m) {
  std::vector<DimSymbol> out;
  for (const bundle::DimSymbol& d : m.dim_symbols()) out.push_back({d.name(), d.min(), d.max(), d.opt()});
  return out;
}

absl::StatusOr<Shape> SignatureShape(const bundle::Manifest& m, const bundle::TensorSignature& s,
                                     absl::Span<const int64_t> values) {
  if (s.dims_size() == 0) return ShapeFromProto(s.shape());
  const std::vector<DimSymbol> symbols = DimSymbolsOf(m);
  Shape out;
  for (const std::string& text : s.dims()) {
    absl::StatusOr<DimExpr> e = DimExpr::Parse(text, symbols);
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat("'", s.name(), "': ", e.status().message()));
    KILN_ASSIGN_OR_RETURN(int64_t d, e->Evaluate(values));
    out.push_back(d);
  }
  return out;
}

absl::Status CheckFeeds(const Bundle& bundle, const absl::flat_hash_map<std::string, Tensor>& feeds) {
  const bundle::Manifest& m = bundle.manifest();
  const std::string& path = bundle.path();
  for (const auto& [name, t] : feeds) {
    bool known = false;
    for (const auto& in : m.inputs()) known |= in.name() == name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat(path, ": the model has no input '", name, "'"));
  }
  for (const bundle::TensorSignature& in : m.inputs()) {
    auto it = feeds.find(in.name());
    if (it == feeds.end()) return absl::InvalidArgumentError(absl::StrCat(path, ": missing input '", in.name(), "'"));
    const Tensor& t = it->second;
    // A dynamic input's sizes are checked against its ranges when the run binds them.
    const bool sizes_match = in.dims_size() > 0 ? t.rank() == in.shape_size() : t.shape() == ShapeFromProto(in.shape());
    if (std::string(DTypeName(t.dtype())) != in.dtype() || !sizes_match) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": input '", in.name(), "' must be ", in.dtype(),
                                                     ShapeToString(ShapeFromProto(in.shape())), ", got ",
                                                     t.TypeString()));
    }
  }
  return absl::OkStatus();
}

void SetLaunchTensorMaps(const codegen::KernelLaunch& launch, bundle::Launch* out) {
  out->set_family(launch.family);
  out->set_semaphores(launch.semaphores);
  out->set_scratch_bytes(launch.scratch_bytes);
  for (const codegen::TensorMapSpec& t : launch.tensor_maps) {
    bundle::TensorMap* m = out->add_tensor_maps();
    m->set_tensor(t.tensor);
    m->set_rank(t.rank);
    for (int d = 0; d < t.rank; ++d) {
      m->add_dims(t.dims[d]);
      m->add_box(t.box[d]);
      if (d + 1 < t.rank) m->add_strides_bytes(t.strides_bytes[d]);
    }
    m->set_dtype(std::string(DTypeName(t.dtype)));
    m->set_swizzle_bytes(t.swizzle_bytes);
  }
}

absl::StatusOr<std::vector<codegen::TensorMapSpec>> TensorMapsFromProto(const bundle::Launch& launch) {
  std::vector<codegen::TensorMapSpec> out;
  for (const bundle::TensorMap& m : launch.tensor_maps()) {
    codegen::TensorMapSpec t;
    t.tensor = m.tensor();
    t.rank = m.rank();
    if (t.rank < 1 || t.rank > 5 || m.dims_size() != t.rank || m.box_size() != t.rank ||
        m.strides_bytes_size() != t.rank - 1) {
      return absl::InvalidArgumentError(absl::StrCat("launch ", launch.function(), ": malformed tensor map (rank ",
                                                     t.rank, ", ", m.dims_size(), " dims, ", m.box_size(),
                                                     " box dims, ", m.strides_bytes_size(), " strides)"));
    }
    for (int d = 0; d < t.rank; ++d) {
      t.dims[d] = m.dims(d);
      t.box[d] = m.box(d);
      if (d + 1 < t.rank) t.strides_bytes[d] = m.strides_bytes(d);
    }
    absl::StatusOr<DType> dt = ParseDType(m.dtype());
    if (!dt.ok()) return dt.status();
    t.dtype = *dt;
    t.swizzle_bytes = m.swizzle_bytes();
    out.push_back(t);
  }
  return out;
}

}  // namespace kiln
