#include "calibrate/gpu_info.h"

#include <algorithm>
#include <cctype>

#include "base/units.h"

namespace zplan::calibrate {

namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

}  // namespace

std::optional<hardware::Arch> arch_for_compute_capability(int major, int minor) {
  (void)minor;
  if (major < 7) return std::nullopt;
  if (major == 7) return minor >= 5 ? hardware::Arch::kAmpere : hardware::Arch::kVolta;
  if (major == 8) return hardware::Arch::kAmpere;
  if (major == 9) return hardware::Arch::kHopper;
  return hardware::Arch::kBlackwell;
}

std::string stock_profile_for_device(const std::string& device_name, double memory_bytes) {
  const std::string n = upper(device_name);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // CUDA's names: "NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe",
  // "NVIDIA H100 80GB HBM3", "NVIDIA L4", "NVIDIA A10G", "NVIDIA L40S",
  // "NVIDIA GeForce RTX 4090". The PCIe boards have stock profiles of their own (PCIe nodes, no
  // NVLink); an A100 PCIe of 40 GB has none and gets the SXM one's.
  if (has("A100")) {
    if (memory_bytes <= 48 * kGiB) return "a100-40g";
    return has("PCIE") ? "a100-pcie" : "a100";
  }
  if (has("H100")) return has("PCIE") ? "h100-pcie" : "h100";
  if (has("H200")) return "h200";
  if (has("V100")) return "v100";
  if (has("L40S")) return "l40s";
  if (has("A10G")) return "a10g";
  if (has("RTX 4090")) return "rtx4090";
  if (n == "NVIDIA L4" || n == "L4") return "l4";
  return "";
}

std::vector<GemmShape> gpu_gemm_shapes(Sweep sweep) {
  switch (sweep) {
    case Sweep::kTiny:
      return {{256, 256, 256}, {1024, 1024, 1024}};
    case Sweep::kQuick:
      return {{256, 256, 256},    {512, 512, 512},     {1024, 1024, 1024},  {2048, 2048, 2048},
              {4096, 4096, 4096}, {8192, 8192, 8192},  {2048, 3072, 1024},  {4096, 4096, 1024},
              {4096, 1024, 4096}, {4096, 12288, 4096}, {8192, 16384, 4096}, {8192, 4096, 16384}};
    case Sweep::kFull:
      return {{256, 256, 256},       {512, 512, 512},      {1024, 1024, 1024},
              {2048, 2048, 2048},    {4096, 4096, 4096},   {8192, 8192, 8192},
              {16384, 16384, 16384}, {2048, 3072, 1024},   {4096, 4096, 1024},
              {4096, 1024, 4096},    {4096, 12288, 4096},  {8192, 16384, 4096},
              {8192, 4096, 16384},   {16384, 24576, 6144}, {16384, 6144, 24576},
              {8192, 36864, 12288},  {8192, 12288, 49152}};
  }
  return {};
}

double gpu_copy_bytes(Sweep sweep) {
  switch (sweep) {
    case Sweep::kTiny:
      return 1 << 20;
    case Sweep::kQuick:
      return 64 << 20;
    case Sweep::kFull:
      return 256 << 20;
  }
  return 64 << 20;
}

}  // namespace zplan::calibrate
