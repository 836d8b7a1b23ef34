"""The data-dependent init schemes (model.dt_init autocorr, model.imag_init memory) build the
same model in the coordinate checks as in a trial: the checks hand the model the trial's init
sample (models.data_init.init_sample). Before, `mutransfer coord-check --model
dt_init.scheme=autocorr` and `mutransfer check` of such a model stopped with a message for
programmers ("call build_model(cfg, spec, sample=(inputs, targets))"), exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mutransfer.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_coord_check_measures_a_model_with_the_autocorr_timescale_init(tmp_path, capsys):
    rc = main(["coord-check", "--widths", "16", "32", "--steps", "1", "--seeds", "0", "1",
               "--param", "mup_ssm", "--model", "dt_init.scheme=autocorr",
               "--out", str(tmp_path / "cc")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "data sample" not in err and "mup_ssm" in out
    assert (tmp_path / "cc" / "coord.parquet").exists()


def test_check_measures_the_coordinates_of_a_model_with_the_autocorr_timescale_init(
        tmp_path, capsys):
    spec = yaml.safe_load((REPO / "examples" / "mamba_check.yaml").read_text())
    spec["model"].update(n_layer=1, base_width=16, dt_init={"scheme": "autocorr"})
    spec["check"].update(widths=[16, 32, 64])
    spec["check"]["coord"].update(steps=1, seeds=[0, 1], seq_len=16, batch_size=2)
    path = tmp_path / "autocorr_check.yaml"
    path.write_text(yaml.safe_dump(spec))
    rc = main(["check", str(path), "--out", str(tmp_path / "out"), "--coord-only"])
    err = capsys.readouterr().err
    assert rc != 2, err  # a verdict (FAIL 1, INCONCLUSIVE 3), not a refusal
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["verdict"]


def test_a_gpu_scan_backend_does_not_stop_the_autocorr_init_on_the_cpu_it_builds_on():
    """A trial builds its model on the CPU and moves it to its device after: with
    `scan_backend: triton` (or mamba_ssm), dt_init autocorr and two layers, reading layer 1's
    input ran layer 0's GPU-only scan on CPU tensors and every GPU trial failed while
    building. The init's passes scan with the CPU's default; the mixers keep their backend."""
    import torch

    from mutransfer.config import TrialConfig
    from mutransfer.data import load_data
    from mutransfer.models.build import build_model
    from mutransfer.models.data_init import init_sample

    def built(backend):
        cfg = TrialConfig.model_validate({
            "width": 32, "data": {"source": "stdlib"}, "train": {"seq_len": 32},
            "model": {"base_width": 32, "n_layer": 2, "d_state": 4, "scan_backend": backend,
                      "dt_init": {"scheme": "autocorr"}}})
        source = load_data(cfg.data)
        torch.manual_seed(0)
        return build_model(cfg, source.spec, sample=init_sample(cfg, source, 32))

    gpu, cpu = built("triton"), built("auto")
    assert [layer.mixer.scan_backend for layer in gpu.layers] == ["triton", "triton"]
    for a, b in zip(gpu.layers, cpu.layers):  # the same Δ as the CPU's own scan gives
        torch.testing.assert_close(a.mixer.dt_proj.bias, b.mixer.dt_proj.bias, rtol=0, atol=0)
