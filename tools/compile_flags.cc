#include "tools/compile_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/model_inputs.h"

namespace kiln::cli {

const std::set<std::string>& CompileValueFlags() {
  static const std::set<std::string> flags = {"arch",        "precision", "input-shape",  "dim",
                                              "calibrate",   "matmul-groups", "conv-groups", "layout",
                                              "dump-kernels", "tune-budget",   "tuning-db"};
  return flags;
}

const std::set<std::string>& CompileBoolFlags() {
  static const std::set<std::string> flags = {"no-fuse", "no-kernel-cache", "tune", "no-tuning-db"};
  return flags;
}

absl::Status ReadTuningDbFlags(const Args& args, CompileOptions& options) {
  options.tuning_db = !args.Has("no-tuning-db");
  options.tuning_db_path = args.Get("tuning-db");
  if (!options.tuning_db && !options.tuning_db_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tuning-db ", options.tuning_db_path, " and --no-tuning-db contradict each other: give one"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CompileOptions> CompileOptionsFromArgs(const Args& args, std::vector<std::string>* notes) {
  CompileOptions options;
  options.arch = args.Get("arch", DefaultArch());
  options.precision = args.Get("precision", "fp16");
  KILN_ASSIGN_OR_RETURN(options.input_shapes,
                        ParseInputShapes(args.GetAll("input-shape"), &options.input_shape_ranges));
  KILN_ASSIGN_OR_RETURN(options.dims, ParseDims(args.GetAll("dim"), &options.dim_ranges));
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));  // a bad --arch or --precision first
  options.fuse = !args.Has("no-fuse");
  KILN_ASSIGN_OR_RETURN(options.matmul_groups, codegen::ParseMatMulGroups(args.Get("matmul-groups", "auto")));
  KILN_ASSIGN_OR_RETURN(options.conv_groups, codegen::ParseConvGroups(args.Get("conv-groups", "auto")));
  KILN_ASSIGN_OR_RETURN(options.layout, ParseLayout(args.Get("layout", "auto")));
  options.kernel_cache = !args.Has("no-kernel-cache");
  options.dump_kernels_dir = args.Get("dump-kernels");
  options.tune = args.Has("tune");
  KILN_RETURN_IF_ERROR(ReadTuningDbFlags(args, options));
  if (args.Has("tune-budget")) {
    std::string budget = args.Get("tune-budget");
    if (!options.tune) return absl::InvalidArgumentError("--tune-budget needs --tune");
    if (absl::EndsWith(budget, "s")) budget.pop_back();
    if (!absl::SimpleAtod(budget, &options.tune_budget_seconds) || !(options.tune_budget_seconds > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("--tune-budget '", args.Get("tune-budget"),
                                                     "': expected a positive number of seconds (60, 90s)"));
    }
  }
  std::map<std::string, std::string> calibration;
  for (const std::string& spec : args.GetAll("calibrate")) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "calibrate"));
    calibration[kv.first] = kv.second;
  }
  if (!calibration.empty() && options.precision != "fp16") {
    if (notes != nullptr) {
      notes->push_back(absl::StrCat("--calibrate only matters for --precision fp16 (", options.precision,
                                    " has fp32's range); ignored"));
    }
  } else if (!calibration.empty()) {
    options.calibration = CalibrationInputs(calibration);
  }
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));
  return options;
}

}  // namespace kiln::cli
