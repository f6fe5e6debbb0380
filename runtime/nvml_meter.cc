#include "runtime/nvml_meter.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln {

// The NVML entry points used, as nvml.h declares them (nvmlReturn_t is an int enum,
// 0 = NVML_SUCCESS; nvmlDevice_t an opaque pointer; NVML_CLOCK_SM = 1).
struct NvmlMeter::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, void**) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*power)(void*, unsigned*) = nullptr;
  const char* (*error)(int) = nullptr;
};

namespace {
constexpr int kNvmlClockSm = 1;

using ErrorString = const char* (*)(int);
absl::Status Failed(ErrorString error, int code, const char* what);
}  // namespace

NvmlMeter::NvmlMeter(void* lib, std::unique_ptr<Api> api, void* device)
    : lib_(lib), api_(std::move(api)), device_(device) {}

NvmlMeter::~NvmlMeter() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (lib_ != nullptr) dlclose(lib_);
}

absl::StatusOr<std::unique_ptr<NvmlMeter>> NvmlMeter::Open(const std::string& pci_bus_id) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("NVML (libnvidia-ml.so.1, from the driver) not found: ", dlerror()));
  }
  auto api = std::make_unique<Api>();
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  api->init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
  api->by_pci = reinterpret_cast<int (*)(const char*, void**)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  api->clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
  api->power = reinterpret_cast<int (*)(void*, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
  api->error = reinterpret_cast<const char* (*)(int)>(sym("nvmlErrorString"));
  if (!api->init || !api->shutdown || !api->by_pci || !api->clock || !api->power) {
    dlclose(lib);
    return absl::FailedPreconditionError(
        "NVML lacks one of nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetClockInfo, "
        "nvmlDeviceGetPowerUsage");
  }
  if (int rc = api->init(); rc != 0) {
    absl::Status st = Failed(api->error, rc, "nvmlInit_v2");
    dlclose(lib);
    return st;
  }
  void* device = nullptr;
  if (int rc = api->by_pci(pci_bus_id.c_str(), &device); rc != 0) {
    absl::Status st = Failed(api->error, rc, absl::StrCat("nvmlDeviceGetHandleByPciBusId_v2(", pci_bus_id, ")").c_str());
    api->shutdown();
    dlclose(lib);
    return st;
  }
  return std::unique_ptr<NvmlMeter>(new NvmlMeter(lib, std::move(api), device));
}

absl::StatusOr<unsigned> NvmlMeter::SmClockMhz() const {
  unsigned mhz = 0;
  if (int rc = api_->clock(device_, kNvmlClockSm, &mhz); rc != 0) return Failed(api_->error, rc, "nvmlDeviceGetClockInfo");
  return mhz;
}

absl::StatusOr<unsigned> NvmlMeter::PowerMw() const {
  unsigned mw = 0;
  if (int rc = api_->power(device_, &mw); rc != 0) return Failed(api_->error, rc, "nvmlDeviceGetPowerUsage");
  return mw;
}

namespace {
absl::Status Failed(ErrorString error, int code, const char* what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " failed: NVML error ", code, error ? absl::StrCat(" (", error(code), ")") : ""));
}
}  // namespace

PowerSampler::PowerSampler(const NvmlMeter& meter) : meter_(meter) {
  thread_ = std::thread([this] {
    while (!done_.load()) {
      absl::StatusOr<unsigned> mhz = meter_.SmClockMhz();
      absl::StatusOr<unsigned> mw = meter_.PowerMw();
      if (mhz.ok() && mw.ok()) samples_.emplace_back(*mhz, *mw);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
}

PowerSampler::~PowerSampler() { Stop(); }

PowerReading PowerSampler::Stop() {
  if (reading_) return *reading_;
  done_.store(true);
  thread_.join();
  PowerReading r;
  r.samples = static_cast<int>(samples_.size());
  for (const auto& [mhz, mw] : samples_) {
    r.mean_sm_mhz += mhz;
    r.mean_watts += mw / 1000.0;
  }
  if (r.samples > 0) {
    r.mean_sm_mhz /= r.samples;
    r.mean_watts /= r.samples;
  }
  reading_ = r;
  return r;
}

absl::StatusOr<std::unique_ptr<NvmlMeter>> OpenCurrentDeviceMeter() {
  int device = 0;
  char bus[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) {
    return absl::FailedPreconditionError("no CUDA device to meter");
  }
  return NvmlMeter::Open(bus);
}

}  // namespace kiln
