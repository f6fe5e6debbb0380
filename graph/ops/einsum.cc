// Einsum: sums of products of the inputs over the letters the equation leaves out of
// the output (numpy semantics: explicit "->" or implicit output, "..." broadcast
// dims, repeated letters as diagonals). Floats accumulate in double, integers in
// int64.
#include "graph/ops/einsum.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/infer_common.h"

namespace kiln::ops {
namespace {

constexpr int kEllipsisBase = 1000;  // ids of broadcast dims: kEllipsisBase + position

// The ids of one term's dims: letters as themselves, "..." as `ellipsis_rank` ids
// ending at kEllipsisBase + max_ellipsis - 1 (right-aligned broadcasting).
absl::StatusOr<std::vector<int>> TermIds(const Node& node, const std::string& term, int64_t rank, int max_ellipsis,
                                         int* ellipsis_rank) {
  std::vector<int> ids;
  int letters = 0;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      if (ellipsis) return node.Error(absl::StrCat("term '", term, "' has two ellipses"));
      ellipsis = true;
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(term[i]))) {
      return node.Error(absl::StrCat("term '", term, "' has '", std::string(1, term[i]), "', not a letter"));
    }
    ++letters;
  }
  const int64_t e = rank - letters;
  if (e < 0 || (!ellipsis && e != 0)) {
    return node.Error(absl::StrCat("term '", term, "' names ", letters, " dims of an input of rank ", rank));
  }
  if (ellipsis_rank != nullptr) *ellipsis_rank = static_cast<int>(e);
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      for (int64_t k = 0; k < e; ++k) ids.push_back(kEllipsisBase + max_ellipsis - static_cast<int>(e) + static_cast<int>(k));
      i += 2;
      continue;
    }
    ids.push_back(term[i]);
  }
  return ids;
}

}  // namespace

absl::StatusOr<EinsumPlan> PlanEinsum(const Node& node) {
  std::string eq;
  {
    KILN_ASSIGN_OR_RETURN(std::string raw, node.GetString("equation"));
    for (char c : raw) {
      if (c != ' ') eq.push_back(c);
    }
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (static_cast<int>(terms.size()) != node.num_inputs()) {
    return node.Error(absl::StrCat("equation '", eq, "' has ", terms.size(), " terms for ", node.num_inputs(),
                                   " inputs"));
  }
  // Pass 1: the broadcast rank; pass 2: the ids.
  int max_ellipsis = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    int e = 0;
    KILN_RETURN_IF_ERROR(TermIds(node, terms[k], node.input(k)->rank(), 0, &e).status());
    max_ellipsis = std::max(max_ellipsis, e);
  }
  std::vector<std::vector<int>> ids(terms.size());
  std::map<int, int64_t> size;  // id -> extent
  std::map<int, int> uses;
  for (size_t k = 0; k < terms.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(ids[k], TermIds(node, terms[k], node.input(k)->rank(), max_ellipsis, nullptr));
    const Shape& s = node.input(k)->shape();
    for (size_t d = 0; d < ids[k].size(); ++d) {
      const int id = ids[k][d];
      ++uses[id];
      auto [it, fresh] = size.emplace(id, s[d]);
      if (fresh || it->second == s[d]) continue;
      if (id >= kEllipsisBase && (it->second == 1 || s[d] == 1)) {
        it->second = std::max(it->second, s[d]);
        continue;
      }
      return node.Error(absl::StrCat("'", id >= kEllipsisBase ? std::string("...") : std::string(1, char(id)),
                                     "' has size ", it->second, " and ", s[d], " in equation '", eq, "'"));
    }
  }
  std::vector<int> out_ids;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        for (int k = 0; k < max_ellipsis; ++k) out_ids.push_back(kEllipsisBase + k);
        i += 2;
        continue;
      }
      if (!size.count(rhs[i])) {
        return node.Error(absl::StrCat("output letter '", std::string(1, rhs[i]), "' of '", eq, "' is in no input"));
      }
      if (std::count(out_ids.begin(), out_ids.end(), rhs[i])) {
        return node.Error(absl::StrCat("output letter '", std::string(1, rhs[i]), "' of '", eq, "' repeats"));
      }
      out_ids.push_back(rhs[i]);
    }
  } else {
    for (int k = 0; k < max_ellipsis; ++k) out_ids.push_back(kEllipsisBase + k);
    for (const auto& [id, n] : uses) {
      if (id < kEllipsisBase && n == 1) out_ids.push_back(id);  // std::map: sorted letters
    }
  }
  std::vector<int> sum_ids;
  for (const auto& [id, n] : size) {
    if (std::find(out_ids.begin(), out_ids.end(), id) == out_ids.end()) sum_ids.push_back(id);
  }
  EinsumPlan p;
  for (int id : out_ids) p.out.push_back(size[id]);
  for (int id : sum_ids) p.contracted.push_back(size[id]);
  for (size_t k = 0; k < terms.size(); ++k) {
    const Shape& s = node.input(k)->shape();
    const std::vector<int64_t> st = Strides(s);
    auto stride_of = [&](int id) {
      int64_t total = 0;
      for (size_t d = 0; d < ids[k].size(); ++d) {
        if (ids[k][d] == id && !(s[d] == 1 && size[id] != 1)) total += st[d];
      }
      return total;
    };
    std::vector<int64_t> os, ss;
    for (int id : out_ids) os.push_back(stride_of(id));
    for (int id : sum_ids) ss.push_back(stride_of(id));
    p.out_strides.push_back(std::move(os));
    p.sum_strides.push_back(std::move(ss));
  }
  return p;
}

namespace {

absl::Status Infer(Node& node) {
  const DType dt = node.input(0)->dtype();
  KILN_RETURN_IF_ERROR(RequireNumeric(node, 0));
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (node.input(i)->dtype() != dt) {
      return node.Error(absl::StrCat("inputs must share a dtype, got ", DTypeName(dt), " and ",
                                     DTypeName(node.input(i)->dtype())));
    }
  }
  KILN_ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(node));
  node.output(0)->SetType(dt, p.out);
  return absl::OkStatus();
}

// The element offset of index `i` over `shape` with `strides`.
int64_t Offset(int64_t i, const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

absl::Status Eval(const Node& node, absl::Span<const Tensor* const> in, absl::Span<Tensor> out) {
  KILN_ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(node));
  const bool fl = IsFloating(in[0]->dtype());
  std::vector<std::vector<double>> fv;
  std::vector<std::vector<int64_t>> iv;
  for (const Tensor* t : in) {
    if (fl) {
      const std::vector<float> f = t->ToFloat();
      fv.emplace_back(f.begin(), f.end());
    } else {
      iv.push_back(t->ToInt64());
    }
  }
  const int64_t n = NumElements(p.out), m = NumElements(p.contracted);
  std::vector<double> yf(fl ? n : 0);
  std::vector<int64_t> yi(fl ? 0 : n);
  const size_t k_count = in.size();
  ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(m, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> base(k_count);
    for (int64_t o = b; o < e; ++o) {
      for (size_t k = 0; k < k_count; ++k) base[k] = Offset(o, p.out, p.out_strides[k]);
      double sf = 0;
      int64_t si = 0;
      for (int64_t c = 0; c < m; ++c) {
        double pf = 1;
        int64_t pi = 1;
        for (size_t k = 0; k < k_count; ++k) {
          const int64_t at = base[k] + Offset(c, p.contracted, p.sum_strides[k]);
          if (fl) {
            pf *= fv[k][at];
          } else {
            pi *= iv[k][at];
          }
        }
        sf += pf;
        si += pi;
      }
      if (fl) {
        yf[o] = sf;
      } else {
        yi[o] = si;
      }
    }
  });
  if (fl) {
    out[0] = Tensor::FromFloat(out[0].dtype(), p.out, std::vector<float>(yf.begin(), yf.end()));
  } else {
    out[0] = Tensor::FromInt64(out[0].dtype(), p.out, yi);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::ops

KILN_OP_FILE(einsum) {
  registry.Register({.name = "Einsum", .min_inputs = 1, .max_inputs = OpDef::kVariadic, .infer = ops::Infer,
                     .eval = ops::Eval});
}
