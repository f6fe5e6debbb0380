// kiln_gemm_bench's rows printed, summarized and written as CSV (gemm_bench_report.h).
#include "benchmarks/gemm_bench_report.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace kiln::gemm_bench {

std::string Num(double v, int precision) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
  return buf;
}

namespace {

std::string Fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}
std::string ShapeName(const Problem& p) { return absl::StrCat(p.m, "x", p.n, "x", p.k); }

// --sustain's columns of one measurement: energy per launch (mJ), mean SM clock, mean power.
std::string SustainedCsv(const Sustained& s) {
  return absl::StrCat(Num(s.Mj(), 4), ",", Num(s.mhz, 4), ",", Num(s.watts, 4));
}

struct Stats {
  int n = 0;
  double geomean = kNaN, best = kNaN, worst = kNaN;
};
Stats Summarize(const std::vector<double>& xs) {
  Stats s;
  double log_sum = 0;
  for (double x : xs) {
    if (std::isnan(x)) continue;
    ++s.n;
    log_sum += std::log(x);
    s.best = std::isnan(s.best) ? x : std::max(s.best, x);
    s.worst = std::isnan(s.worst) ? x : std::min(s.worst, x);
  }
  if (s.n > 0) s.geomean = std::exp(log_sum / s.n);
  return s;
}

}  // namespace

void PrintRow(const Row& r) {
  std::printf("%-11s %-16s %-9s %9s %7s %9s %9s %6s %6s %6s %8s %s%s%s\n", r.p.set.c_str(), ShapeName(r.p).c_str(),
              IdiomName(r.idiom), Fixed(r.kiln_ms, 4).c_str(), Fixed(r.Flops() / r.kiln_ms / 1e9, 1).c_str(),
              Fixed(r.a_ms, 4).c_str(), Fixed(r.b_ms, 4).c_str(), Fixed(r.Speedup(r.a_ms), 2).c_str(),
              Fixed(r.Speedup(r.b_ms), 2).c_str(), Fixed(r.Speedup(r.BestPeerMs()), 2).c_str(),
              std::isnan(r.err) ? "-" : Num(r.err, 2).c_str(), r.status.c_str(), r.note.empty() ? "" : ": ",
              r.note.c_str());
  std::fflush(stdout);
}

void PrintSustained(const Row& r) {
  auto one = [](const char* who, const Sustained& s) {
    if (!(s.ms > 0)) return std::string();
    return absl::StrCat("  ", who, " ", Fixed(s.ms * 1000, 2), " us/launch ", Fixed(s.Mj(), 3), " mJ ", Fixed(s.mhz, 0),
                        " MHz ", Fixed(s.watts, 0), " W");
  };
  std::printf("  sustained:%s%s%s", one("kiln", r.kiln_s).c_str(), one("peer_a", r.a_s).c_str(),
              one("peer_b", r.b_s).c_str());
  if (r.kiln_s.Mj() > 0 && r.a_s.Mj() > 0) std::printf("  energy kiln/peer_a %.3f", r.kiln_s.Mj() / r.a_s.Mj());
  if (r.kiln_s.Mj() > 0 && r.b_s.Mj() > 0) std::printf(" kiln/peer_b %.3f", r.kiln_s.Mj() / r.b_s.Mj());
  std::printf("\n");
  std::fflush(stdout);
}

void WriteCsv(const std::string& path, const std::vector<Row>& rows, bool sustained) {
  std::ofstream csv(path);
  csv << "set,m,n,k,idiom,status,kiln_ms,kiln_tflops,kiln_config,peer_a,peer_a_ms,peer_b,peer_b_ms,best_peer_ms,"
         "speedup_vs_a,speedup_vs_b,speedup_vs_best,max_rel_err,peer_rel_err,note"
      << (sustained ? ",kiln_mj,kiln_mhz,kiln_w,peer_a_mj,peer_a_mhz,peer_a_w,peer_b_mj,peer_b_mhz,peer_b_w" : "")
      << "\n";
  for (const Row& r : rows) {
    std::string note = r.note;
    std::replace(note.begin(), note.end(), ',', ';');
    std::replace(note.begin(), note.end(), '\n', ' ');
    csv << r.p.set << "," << r.p.m << "," << r.p.n << "," << r.p.k << "," << IdiomName(r.idiom) << "," << r.status
        << "," << Num(r.kiln_ms, 6) << "," << Num(r.Flops() / r.kiln_ms / 1e9) << "," << r.config << ","
        << PeerA(r.idiom) << "," << Num(r.a_ms, 6) << "," << PeerB(r.idiom) << "," << Num(r.b_ms, 6) << ","
        << Num(r.BestPeerMs(), 6) << "," << Num(r.Speedup(r.a_ms)) << "," << Num(r.Speedup(r.b_ms)) << ","
        << Num(r.Speedup(r.BestPeerMs())) << "," << Num(r.err, 3) << "," << Num(r.peer_err, 3) << "," << note;
    if (sustained) csv << "," << SustainedCsv(r.kiln_s) << "," << SustainedCsv(r.a_s) << "," << SustainedCsv(r.b_s);
    csv << "\n";
  }
}

void PrintSummary(const std::vector<Row>& rows, const Options& o) {
  std::printf(
      "\nSummary: speedup = peer time / kiln time (> 1: kiln faster), over the rows that passed validation\n"
      "%-10s %-12s %5s %5s %5s | %-30s | %-22s | %-22s\n",
      "idiom", "set", "ok", "fail", "n/a", "vs fastest peer: geomean best worst", "vs peer A: geo best worst",
      "vs peer B: geo best worst");
  std::vector<std::string> sets = o.sets;
  if (sets.size() > 1) sets.push_back("all");
  for (Idiom idiom : o.idioms) {
    for (const std::string& set : sets) {
      std::vector<double> best, a, b;
      int fail = 0, na = 0;
      for (const Row& r : rows) {
        if (r.idiom != idiom || (set != "all" && r.p.set != set)) continue;
        fail += r.status == "FAIL";
        na += r.status == "n/a";
        best.push_back(r.Speedup(r.BestPeerMs()));
        a.push_back(r.Speedup(r.a_ms));
        b.push_back(r.Speedup(r.b_ms));
      }
      const Stats s = Summarize(best), sa = Summarize(a), sb = Summarize(b);
      auto three = [](const Stats& st) {
        return absl::StrCat(Fixed(st.geomean, 3), " ", Fixed(st.best, 3), " ", Fixed(st.worst, 3));
      };
      std::printf("%-10s %-12s %5d %5d %5d | %-30s | %-22s | %-22s\n", IdiomName(idiom), set.c_str(), s.n, fail, na,
                  three(s).c_str(), three(sa).c_str(), three(sb).c_str());
    }
  }
}

}  // namespace kiln::gemm_bench
