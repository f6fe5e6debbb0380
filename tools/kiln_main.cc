// The kiln command: dispatches to subcommands and turns their errors into a
// message on stderr and a non-zero exit.
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

constexpr char kUsage[] =
    "kiln: a graph-level inference compiler for NVIDIA tensor cores\n"
    "\n"
    "usage: kiln COMMAND [ARGS]\n"
    "  compile MODEL.onnx -o M.kiln compile into a bundle (--arch sm_90a|sm_89|sm_86|sm_80, --precision)\n"
    "  inspect MODEL.onnx           inputs, outputs, op histogram, parameters, unsupported ops\n"
    "  inspect MODEL.kiln [--json]  a bundle's signature, sections, memory plan and steps\n"
    "  run MODEL.kiln               run a bundle (--device cpu; --input NAME=FILE.npy|arange|random)\n"
    "  run MODEL.onnx --reference   run on the CPU reference (--input NAME=FILE.npy|arange|random)\n"
    "  bench MODEL.onnx             compile and time configurations side by side (--compare fused,unfused)\n"
    "\n"
    "kiln COMMAND --help shows a command's options.";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage << "\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  absl::Status status;
  if (command == "compile") {
    status = kiln::cli::CompileCommand(args);
  } else if (command == "inspect") {
    status = kiln::cli::InspectCommand(args);
  } else if (command == "run") {
    status = kiln::cli::RunCommand(args);
  } else if (command == "bench") {
    status = kiln::cli::BenchCommand(args);
  } else {
    std::cerr << "kiln: unknown command '" << command << "'\n\n" << kUsage << "\n";
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "kiln " << command << ": error: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument && status.message().find("usage:") != absl::string_view::npos ? 2 : 1;
  }
  return 0;
}
