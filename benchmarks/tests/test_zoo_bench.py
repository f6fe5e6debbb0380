"""The zoo table's tooling without a GPU: zoo_table.py on CSVs of both kinds, and
run_zoo_benchmarks.sh's kiln and table steps on a zoo case (kiln bench on the CPU
backend; needs KILN_ZOO_DATA and KILN_BINARY, skips without)."""

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import zoo_table  # noqa: E402


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def write_torch(path, model, batch, eager, compiled, compile_status="ok"):
    write_csv(path, ["model", "batch", "mode", "median_ms", "min_ms", "compile_s", "torch_version", "gpu", "status"],
              [[model, batch, "eager", eager, eager, "0", "2.11", "H100", "ok"],
               [model, batch, "compile", compiled, compiled, "30", "2.11", "H100", compile_status]])


def write_kiln(path, fused, unfused):
    write_csv(path, ["model", "device", "config", "median_ms"],
              [["m.onnx", "gpu", "fused", fused], ["m.onnx", "gpu", "unfused", unfused]])


def test_table_rows_ratio_geomean_and_shortfalls(tmp_path):
    write_kiln(tmp_path / "kiln_bert_8.csv", "0.5", "1.0")
    write_torch(tmp_path / "torch_bert_8.csv", "bert", 8, "9.0", "0.8")
    write_kiln(tmp_path / "kiln_whisper_encoder_1.csv", "0.5", "0.4")  # fused slower than unfused
    write_torch(tmp_path / "torch_whisper_encoder_1.csv", "whisper_encoder", 1, "4.0", "0.55")
    write_kiln(tmp_path / "kiln_vit_32.csv", "2.0", "6.0")
    write_torch(tmp_path / "torch_vit_32.csv", "vit", 32, "4.0", "", compile_status="error: OOM")
    (tmp_path / "notes.csv").write_text("not,a,result\n")  # ignored: not kiln_/torch_NAME_BATCH
    text = zoo_table.render(zoo_table.read_rows(str(tmp_path)))
    assert "| bert | 8 | 0.500 | 1.000 | 9.000 | 0.800 | 1.60 |" in text
    assert "| whisper_encoder | 1 | 0.500 | 0.400 | 4.000 | 0.550 | 1.10 |" in text
    assert "| vit | 32 | 2.000 | 6.000 | 4.000 | - | - |" in text  # the failed compile is no number
    assert "over 2 rows: 1.33" in text  # sqrt(1.6 * 1.1)
    assert "whisper_encoder at 1: 1.10x torch.compile (< 1.2)" in text
    assert "whisper_encoder at 1: fused 0.500 ms slower than unfused 0.400 ms" in text
    assert "bert at 8" not in text.split("Short of the bar:")[1]


def test_table_of_an_empty_folder_is_an_error(tmp_path, capsys):
    assert zoo_table.main([str(tmp_path)]) == 1
    assert "no kiln_NAME_BATCH.csv" in capsys.readouterr().err


def test_script_refuses_bad_arguments(tmp_path):
    script = os.path.join(BENCH, "run_zoo_benchmarks.sh")
    r = subprocess.run(["bash", script, "--out", str(tmp_path), "--models", "bert"], capture_output=True, text=True)
    assert r.returncode == 2 and "export_zoo.py" in r.stderr
    fake = tmp_path / "export_zoo.py"
    fake.write_text("")
    r = subprocess.run(["bash", script, "--out", str(tmp_path), "--export-zoo", str(fake), "--models", "bert"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "NAME:BATCH" in r.stderr
    r = subprocess.run(["bash", script, "--out", str(tmp_path), "--export-zoo", str(fake), "--models", "bert:8:onnx"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "legacy or dynamo" in r.stderr


def test_script_kiln_and_table_steps_on_a_zoo_case(tmp_path):
    zoo, kiln = os.environ.get("KILN_ZOO_DATA"), os.environ.get("KILN_BINARY")
    if not zoo or not os.path.isdir(os.path.join(zoo, "bert.legacy")):
        pytest.skip("KILN_ZOO_DATA is not set (the model zoo)")
    if not kiln or not os.path.exists(kiln):
        pytest.skip("KILN_BINARY is not set (the kiln program)")
    # The layout an export leaves: models/NAME_BATCH/{manifest.json, NAME.EXPORTER/model.onnx}.
    case = tmp_path / "models" / "bert_2"
    shutil.copytree(os.path.join(zoo, "bert.legacy"), case / "bert.legacy")
    entry = json.load(open(os.path.join(zoo, "manifest.json")))["bert.legacy"]
    (case / "manifest.json").write_text(json.dumps({"bert.legacy": entry}))
    env = dict(os.environ, KILN=kiln, ITERS="2", WARMUP="1", KILN_ARGS="--device cpu")
    script = os.path.join(BENCH, "run_zoo_benchmarks.sh")
    fake = tmp_path / "export_zoo.py"
    fake.write_text("raise SystemExit('not called: the export is there')\n")
    r = subprocess.run(["bash", script, "--out", str(tmp_path), "--export-zoo", str(fake), "--models", "bert:2",
                        "--only", "kiln"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(open(tmp_path / "kiln_bert_2.csv")))
    assert sorted(row["config"] for row in rows) == ["fused", "unfused"]
    assert all(float(row["median_ms"]) > 0 for row in rows)
    write_torch(tmp_path / "torch_bert_2.csv", "bert", 2, "50.0", "40.0")
    r = subprocess.run(["bash", script, "--out", str(tmp_path), "--only", "table"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| bert | 2 |" in r.stdout and "Geometric mean" in r.stdout
    assert (tmp_path / "zoo_table.csv").exists()
