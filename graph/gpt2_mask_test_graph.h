// The position ids and packed-sequence mask that transformers' GPT-2 builds from the
// input's sizes, as the dynamo exporter writes them for dynamic batch and seq (Range,
// Expand, a Slice along seq, the shifted Concat, CumSum over seq, GatherND at (batch,
// position) pairs, compares, Where), in kiln's text form, with a token embedding and
// scores that read the inputs' data. Shared by the size-only tests (graph/specialize_test.cc,
// runtime/size_only_steps_test.cc, runtime/gpu_dynamic_test.cc) and the causal-mask ones
// (fusion/mark_causal_masks_test.cc, codegen/attention_test.cc).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kiln::test {

// A graph of batch in [1, 4], seq in [1, 24] with input %input_ids (i64[batch, seq]),
// the inputs `inputs` declares, the embedding (%add), the mask (%mask, [batch, 1, seq,
// seq], 0 or -inf of `fill_dtype`) and the nodes and outputs `tail` adds.
inline std::string Gpt2MaskGraph(const std::string& fill_dtype, const std::string& inputs, const std::string& tail) {
  return absl::StrCat(R"(
graph @main {
  dim batch in [1, 4]
  dim seq in [1, 24]
  input %input_ids : i64[4,24] dims "batch, seq"
)",
                      inputs,
                      absl::StrReplaceAll(R"(
  const %wte : f32[50,16] = splat(0.5)
  const %wpe : f32[24,16] = splat(0.25)
  const %zero : i64[] = [0]
  const %one : i64[] = [1]
  const %ax0 : i64[1] = [0]
  const %ax1 : i64[1] = [1]
  const %one1 : i64[1] = [1]
  const %m1 : i64[1] = [-1]
  const %ax123 : i64[3] = [1, 2, 3]
  const %ax013 : i64[3] = [0, 1, 3]
  const %ax012 : i64[3] = [0, 1, 2]
  const %fzero : FILL[] = [0]
  const %ninf : FILL[] = [-inf]
  %val_0 = Shape(%input_ids) {start = 0, end = 1}
  %val_1 = Shape(%input_ids) {start = 1, end = 2}
  %nb = Squeeze(%val_0)
  %ns = Squeeze(%val_1)
  %embedding = Gather(%wte, %input_ids) {axis = 0}
  %arange = Range(%zero, %ns, %one)
  %unsqueeze = Unsqueeze(%arange, %ax0)
  %embedding_1 = Gather(%wpe, %unsqueeze) {axis = 0}
  %add = Add(%embedding, %embedding_1)
  %val_16 = Concat(%val_0, %one1) {axis = 0}
  %expand = Expand(%unsqueeze, %val_16)
  %slice_1 = Slice(%expand, %ax0, %one1, %ax1, %one1)
  %sub_13 = Sub(%slice_1, %one)
  %cat = Concat(%sub_13, %expand) {axis = -1}
  %slice_2 = Slice(%cat, %ax0, %val_1, %m1, %one1)
  %end = Add(%val_1, %one1)
  %slice_3 = Slice(%cat, %one1, %end, %m1, %one1)
  %sub_24 = Sub(%slice_3, %slice_2)
  %eq = Equal(%sub_24, %one)
  %ne = Not(%eq)
  %cast = Cast(%ne) {to = 7}
  %cumsum = CumSum(%cast, %ax1)
  %arange_1 = Range(%zero, %nb, %one)
  %b4 = Unsqueeze(%arange_1, %ax123)
  %q4 = Unsqueeze(%arange, %ax013)
  %k4 = Unsqueeze(%arange, %ax012)
  %causal = LessOrEqual(%k4, %q4)
  %bq = Max(%b4, %q4)
  %bq_shape = Shape(%bq)
  %bq_b = Expand(%b4, %bq_shape)
  %bq_b5 = Unsqueeze(%bq_b, %m1)
  %bq_q = Expand(%q4, %bq_shape)
  %bq_q5 = Unsqueeze(%bq_q, %m1)
  %at_q = Concat(%bq_b5, %bq_q5) {axis = -1}
  %seq_q = GatherND(%cumsum, %at_q)
  %bk = Max(%b4, %k4)
  %bk_shape = Shape(%bk)
  %bk_b = Expand(%b4, %bk_shape)
  %bk_b5 = Unsqueeze(%bk_b, %m1)
  %bk_k = Expand(%k4, %bk_shape)
  %bk_k5 = Unsqueeze(%bk_k, %m1)
  %at_k = Concat(%bk_b5, %bk_k5) {axis = -1}
  %seq_k = GatherND(%cumsum, %at_k)
  %same = Equal(%seq_q, %seq_k)
  %allowed = And(%causal, %same)
  %mask = Where(%allowed, %fzero, %ninf)
)",
                                          {{"FILL", fill_dtype}}),
                      tail, "\n}\n");
}

// The mask added to scores that read the inputs' data (f32).
inline std::string Gpt2Mask() {
  return Gpt2MaskGraph("f32", "  input %scores : f32[4,2,24,24] dims \"batch, 2, seq, seq\"\n",
                       "  %masked = Add(%scores, %mask)\n  output %add\n  output %masked");
}

// The mask (f16) added to the scaled scores of an attention over inputs %q, %k, %v
// (f16 [batch, 2, seq, 16]) and its output %y.
inline std::string Gpt2MaskedAttention() {
  return Gpt2MaskGraph("f16",
                       "  input %q : f16[4,2,24,16] dims \"batch, 2, seq, 16\"\n"
                       "  input %k : f16[4,2,24,16] dims \"batch, 2, seq, 16\"\n"
                       "  input %v : f16[4,2,24,16] dims \"batch, 2, seq, 16\"\n",
                       R"(  const %scale : f16[] = [0.25]
  %s = MatMul(%q, %k) {trans_b = 1} @scores
  %d = Mul(%s, %scale) @mul
  %a = Add(%d, %mask) @add_mask
  %p = Softmax(%a) {axis = -1} @softmax
  %y = MatMul(%p, %v) @context
  output %add
  output %y)");
}

}  // namespace kiln::test
