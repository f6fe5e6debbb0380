// The kiln-internal channels-last layout of Conv and the pools.
#include "graph/ops/channels_last.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/ops/data_movement.h"

namespace kiln::ops {

absl::StatusOr<bool> ChannelsLast(const Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t cl, node.GetInt("channels_last", 0));
  if (cl != 0 && cl != 1) return node.Error(absl::StrCat("channels_last must be 0 or 1, got ", cl));
  if (cl == 1 && node.input(0)->rank() != 4) {
    return node.Error(absl::StrCat("channels_last=1 needs a 4-D input X [N, H, W, C] (2-D spatial only), got ",
                                   node.input(0)->TypeString()));
  }
  return cl == 1;
}

absl::Status EvalThroughNchw(absl::Span<const Tensor* const> in, size_t permuted, Tensor& y, const NchwEval& nchw) {
  std::vector<Tensor> moved;
  moved.reserve(permuted);
  std::vector<const Tensor*> args;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i < permuted) {
      moved.push_back(PermuteAxes(*in[i], kNhwcToNchw));
      args.push_back(&moved.back());
    } else {
      args.push_back(in[i]);
    }
  }
  const Shape& ys = y.shape();
  Tensor out(y.dtype(), {ys[0], ys[3], ys[1], ys[2]});
  KILN_RETURN_IF_ERROR(nchw(args, out));
  y = PermuteAxes(out, kNchwToNhwc);
  return absl::OkStatus();
}

}  // namespace kiln::ops
