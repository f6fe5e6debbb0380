// `kiln compile model.onnx -o model.kiln`: compiles an ONNX model into a bundle.
#include <chrono>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "runtime/bundle.h"
#include "runtime/compiler.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"

namespace kiln::cli {
namespace {

constexpr char kUsage[] =
    "usage: kiln compile MODEL.onnx -o|--output MODEL.kiln [--arch sm_90a|sm_89|sm_86|sm_80]\n"
    "                    [--precision fp16|bf16|fp32] [--input-shape NAME=1x128]...\n"
    "Compiles the model into a bundle (manifest, kernels, weights) for the named GPU arch.\n"
    "Works without a GPU. The default arch is the local GPU's, else sm_90a (no GPU is\n"
    "detected yet); the default precision is fp16 (device storage; the CPU backend\n"
    "always computes in fp32). For now every graph node is one step (unfused baseline).";

}  // namespace

absl::Status CompileCommand(const std::vector<std::string>& argv) {
  // "-o FILE" is the short form of "--output FILE" (Args knows only long flags).
  std::vector<std::string> expanded;
  for (const std::string& a : argv) {
    if (a == "-o") {
      expanded.push_back("--output");
    } else if (absl::StartsWith(a, "-o") && !absl::StartsWith(a, "--")) {
      expanded.push_back(absl::StrCat("--output=", a.substr(2)));
    } else {
      expanded.push_back(a);
    }
  }
  KILN_ASSIGN_OR_RETURN(Args args, Args::Parse(expanded, {"output", "arch", "precision", "input-shape"}, {"help"}));
  if (args.Has("help")) {
    std::cout << kUsage << "\n";
    return absl::OkStatus();
  }
  if (args.positional().size() != 1) return absl::InvalidArgumentError(absl::StrCat("expected one .onnx file\n", kUsage));
  const std::string input = args.positional()[0];
  const std::string output = args.Get("output");
  if (output.empty()) return absl::InvalidArgumentError(absl::StrCat("missing -o MODEL.kiln\n", kUsage));
  CompileOptions options;
  options.arch = args.Get("arch", DefaultArch());
  options.precision = args.Get("precision", "fp16");
  KILN_ASSIGN_OR_RETURN(options.input_shapes, ParseInputShapes(args.GetAll("input-shape")));
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));

  const auto start = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(CompileToFile(input, output, options));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Bundle> bundle, Bundle::Load(output));
  const bundle::Manifest& m = bundle->manifest();
  std::cout << absl::StrFormat("%s -> %s: %s, %s, %d steps, %d weights, arena %d bytes (lower bound %d), %d bytes, %.2fs\n",
                               input, output, m.target_arch(), m.precision(), m.steps_size(), m.weights_size(),
                               m.memory_plan().arena_bytes(), m.memory_plan().lower_bound_bytes(),
                               bundle->file_bytes(), seconds);
  return absl::OkStatus();
}

}  // namespace kiln::cli
