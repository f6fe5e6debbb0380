// Board energy, power and SM clock of one GPU from NVML, for kiln_gemm_bench --sustain.
// NVML comes with the driver: libnvidia-ml.so.1 is loaded at run time (dlopen), so the
// bench needs no NVML headers or link-time dependency, and a machine without it only
// loses the energy columns (Open says why).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::bench {

class NvmlMeter {
 public:
  // The GPU with PCI bus id `pci_bus_id` (cudaDeviceGetPCIBusId's "0000:1B:00.0").
  // FailedPrecondition when NVML or one of its functions is missing, or the GPU is
  // not found.
  static absl::StatusOr<std::unique_ptr<NvmlMeter>> Open(const std::string& pci_bus_id);
  ~NvmlMeter();
  NvmlMeter(const NvmlMeter&) = delete;
  NvmlMeter& operator=(const NvmlMeter&) = delete;

  // The board's energy since the driver loaded, in millijoules (Volta and later; NVML
  // updates it every 20-100 ms, so measure windows of a second or more).
  absl::StatusOr<uint64_t> EnergyMj() const;
  // The current SM clock (MHz) and board power draw (milliwatts).
  absl::StatusOr<unsigned> SmClockMhz() const;
  absl::StatusOr<unsigned> PowerMw() const;

 private:
  struct Api;
  NvmlMeter(void* lib, std::unique_ptr<Api> api, void* device);
  void* lib_;
  std::unique_ptr<Api> api_;
  void* device_;
};

}  // namespace kiln::bench
