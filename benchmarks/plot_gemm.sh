#!/usr/bin/env bash
# Turns the CSV of kiln_gemm_bench into a PNG: one panel per shape set, the speedup
# (peer time / kiln time, log scale, > 1: kiln faster) of each idiom per problem, in
# the CSV's order (sets of more than 40 problems: sorted by M*N*K, without labels).
# Rows that are not OK (n/a, FAIL) leave gaps; idioms without any OK row in a set are
# named in the panel's title. Run it where the
# CSV lands (the GPU machine has no gnuplot); installs gnuplot with apt-get if missing.
#
#   benchmarks/plot_gemm.sh gemm.csv [gemm.png] [speedup_vs_best|speedup_vs_a|speedup_vs_b]
set -euo pipefail
csv=${1:?usage: plot_gemm.sh CSV [PNG] [METRIC]}
png=${2:-${csv%.csv}.png}
metric=${3:-speedup_vs_best}
[ -r "$csv" ] || { echo "plot_gemm.sh: cannot read $csv" >&2; exit 1; }

if ! command -v gnuplot >/dev/null; then
  echo "plot_gemm.sh: gnuplot not found, installing it (apt-get install gnuplot-nox)" >&2
  sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
  $sudo_ apt-get update -qq && $sudo_ apt-get install -y -qq gnuplot-nox >/dev/null
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# One data file per set: label, M*N*K, then the metric of each idiom (NaN where absent
# or not OK); "sets" lists each set with its problem count and the idioms without an
# OK row there; "idioms" lists the idioms.
awk -F, -v metric="$metric" -v dir="$work" '
  NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i
            if (!(metric in col)) { print "no column " metric " in the CSV" > "/dev/stderr"; bad = 1; exit 1 }
            next }
  { set = $col["set"]; key = $col["m"] "x" $col["n"] "x" $col["k"]; idiom = $col["idiom"]
    if (!(set in seen_set)) { seen_set[set] = 1; sets[++nsets] = set }
    if (!(idiom in seen_idiom)) { seen_idiom[idiom] = 1; idioms[++nidioms] = idiom }
    if (!((set, key) in index_of)) {
      index_of[set, key] = ++count[set]; label[set, count[set]] = key
      mnk[set, count[set]] = $col["m"] * $col["n"] * $col["k"]
    }
    v = $col[metric]
    ok = $col["status"] == "OK" && v != ""
    value[set, index_of[set, key], idiom] = ok ? v : "NaN"
    if (ok) ++ok_rows[set, idiom] }
  END {
    if (bad) exit 1
    for (s = 1; s <= nsets; ++s) {
      f = dir "/" s ".raw"
      for (i = 1; i <= count[sets[s]]; ++i) {
        line = label[sets[s], i] " " mnk[sets[s], i]
        for (d = 1; d <= nidioms; ++d) {
          v = value[sets[s], i, idioms[d]]; line = line " " (v == "" ? "NaN" : v)
        }
        print line > f
      }
      close(f)
      missing = ""
      for (d = 1; d <= nidioms; ++d) if (!((sets[s], idioms[d]) in ok_rows)) missing = missing (missing == "" ? "" : ",") idioms[d]
      print sets[s], count[sets[s]], (missing == "" ? "-" : missing) > (dir "/sets")
    }
    for (d = 1; d <= nidioms; ++d) printf "%s ", idioms[d] > (dir "/idioms")
  }' "$csv"

nsets=$(wc -l < "$work/sets")
[ "$nsets" -gt 0 ] || { echo "plot_gemm.sh: no rows in $csv" >&2; exit 1; }
idioms=$(cat "$work/idioms")
terminal="pngcairo size 1400,$((420 * nsets + 60)) font ',10'"
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || terminal="png size 1400,$((420 * nsets + 60))"

{
  echo "set terminal $terminal"
  echo "set output '$png'"
  echo "set termoption noenhanced"
  echo "set datafile missing 'NaN'"
  echo "set multiplot layout $nsets,1 title 'kiln vs cuBLAS/cuBLASLt: $metric (peer time / kiln time; > 1: kiln faster) — $(basename "$csv")'"
  echo "set logscale y 2"
  echo "set ylabel 'speedup'"
  echo "set grid ytics"
  echo "set key outside right top"
  echo "set xtics rotate by -60 font ',8'"
  echo "idioms = '$idioms'"
  s=0
  while read -r set count missing; do
    s=$((s + 1))
    title="$set ($count problems)"
    [ "$missing" = "-" ] || title="$title; no OK rows (n/a or FAIL): $missing"
    echo "set title '$title'"
    echo "set xrange [0.5:$count + 0.5]"
    # Only the idioms with points (gnuplot warns about empty columns).
    cols=""; d=0
    for idiom in $idioms; do
      d=$((d + 1)); case ",$missing," in *",$idiom,"*) ;; *) cols="$cols $d";; esac
    done
    if [ "$count" -le 40 ]; then
      awk '{ print NR, $0 }' "$work/$s.raw" > "$work/$s.dat"
      using="using 1:(column(c+3)):xtic(2) with linespoints pt 7 ps 0.8"
    else
      sort -g -k2,2 "$work/$s.raw" | awk '{ print NR, $0 }' > "$work/$s.dat"
      echo "set xtics auto norotate"
      echo "set xlabel 'problem, sorted by M*N*K'"
      using="using 1:(column(c+3)) with points pt 7 ps 0.6"
    fi
    if [ -n "$cols" ]; then
      echo "cols = '$cols'"
      echo "plot for [i=1:words(cols)] c=int(word(cols, i)) '$work/$s.dat' $using title word(idioms, c), 1 with lines lc 'black' dt 2 notitle"
    else
      echo "set yrange [0.5:2]"
      echo "plot 1 with lines lc 'black' dt 2 notitle"
      echo "set autoscale y"
    fi
    echo "unset xlabel"
    echo "set xtics rotate by -60 font ',8'"
  done < "$work/sets"
  echo "unset multiplot"
} > "$work/plot.gp"
gnuplot "$work/plot.gp"
echo "wrote $png"
