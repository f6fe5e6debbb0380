// RNN, GRU and LSTM: their shared plan and CPU reference (graph/ops/recurrent.cc),
// registered for all three ops and used by the GPU kernel (codegen/ops/recurrent.cc).
//
// Inputs X, W, R, B, sequence_lens, initial_h (and for LSTM initial_c, P); outputs Y,
// Y_h (and for LSTM Y_c), layout 0 ([seq, batch, ...]) or 1 ([batch, seq, ...]).
// Gate order: RNN one gate; GRU z, r, h; LSTM i, o, f, c (peepholes i, o, f). A batch
// entry with sequence_lens[b] = L runs L steps (a reverse direction from step L-1
// down); Y is 0 past L and Y_h / Y_c hold the state after step L. Pre-activations are
// clipped to [-clip, clip] when `clip` is set. Every sum is fp32, in the order: the
// biases, then X's terms, then the hidden state's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace kiln::ops {

enum class RnnKind { kRnn, kGru, kLstm };

struct RnnActivation {
  std::string name;  // Sigmoid, Tanh, Relu, HardSigmoid, LeakyRelu, ThresholdedRelu,
                     // ScaledTanh, Affine, Elu, Softsign, Softplus
  float alpha = 0, beta = 0;
};

struct RnnPlan {
  RnnKind kind = RnnKind::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool batch_first = false;  // layout = 1
  bool reverse = false;      // direction = reverse (dirs = 1)
  int gates = 1;             // 1, 3, 4
  // Per direction, the activations the kind uses (RNN f; GRU f, g; LSTM f, g, h).
  std::vector<std::vector<RnnActivation>> acts;
  bool has_clip = false;
  float clip = 0;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
};

absl::StatusOr<RnnPlan> PlanRnn(const Node& node, RnnKind kind);
absl::Status InferRnn(Node& node, RnnKind kind);
absl::Status EvalRnn(const Node& node, RnnKind kind, absl::Span<const Tensor* const> in, absl::Span<Tensor> out);

// The activation of `x` on the CPU (codegen/ops/recurrent.cc writes the same as CUDA).
float ApplyRnnActivation(const RnnActivation& a, float x);

}  // namespace kiln::ops
