// Board power and SM clock of one GPU from NVML, for kiln bench's power and clock columns
// and kiln_gemm_bench --sustain. NVML comes with the driver: libnvidia-ml.so.1
// is loaded at run time (dlopen), so kiln needs no NVML headers or link-time
// dependency, and a machine without it only loses those columns (Open says why).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

class NvmlMeter {
 public:
  // The GPU with PCI bus id `pci_bus_id` (cudaDeviceGetPCIBusId's "0000:1B:00.0").
  // FailedPrecondition when NVML or one of its functions is missing, or the GPU is
  // not found.
  static absl::StatusOr<std::unique_ptr<NvmlMeter>> Open(const std::string& pci_bus_id);
  ~NvmlMeter();
  NvmlMeter(const NvmlMeter&) = delete;
  NvmlMeter& operator=(const NvmlMeter&) = delete;

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

// What the board did while a PowerSampler ran: the SM clock and power averaged over
// samples taken every 10 ms. Energy is mean power x time: NVML's energy counter moves
// in coarse steps, which put the energy of a window as long as kiln_gemm_bench
// --sustain times measurably off (for one kernel it read well above what the power
// samples averaged).
struct PowerReading {
  int samples = 0;
  double mean_sm_mhz = 0;
  double mean_watts = 0;
};

// Samples `meter` on a host thread from construction until Stop (or destruction).
class PowerSampler {
 public:
  explicit PowerSampler(const NvmlMeter& meter);
  ~PowerSampler();
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  // Stops the thread (once) and returns the reading; samples == 0 when none came back.
  PowerReading Stop();

 private:
  const NvmlMeter& meter_;
  std::atomic<bool> done_{false};
  std::vector<std::pair<unsigned, unsigned>> samples_;  // (MHz, mW)
  std::thread thread_;
  std::optional<PowerReading> reading_;
};

// The NVML meter of the current CUDA device (cudaDeviceGetPCIBusId), or why there is none.
absl::StatusOr<std::unique_ptr<NvmlMeter>> OpenCurrentDeviceMeter();

}  // namespace kiln
