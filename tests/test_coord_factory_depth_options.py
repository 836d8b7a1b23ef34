"""A `package.module:factory` arch takes its depth from model.options: `coord-check --n-layer`
or `--depths` (without a depth parameterization, the only reader of n_layer) is refused in one
line that names the option given, exit 2, nothing written. Before, the line was the trial
config's "Value error, model.n_layer is not used by arch ...", naming neither option."""

from __future__ import annotations

from mutransfer.cli import main

GPT = ["--model", "arch=examples.tiny_gpt:tiny_gpt"]


def _refusal(argv: list[str], tmp_path, capsys) -> str:
    out = tmp_path / "out"
    rc = main(["coord-check", *GPT, *argv, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists() and len(err.splitlines()) == 1
    return err


def test_n_layer_of_a_factory_arch_is_refused_pointing_to_its_options(tmp_path, capsys):
    err = _refusal(["--n-layer", "1", "--widths", "16", "32"], tmp_path, capsys)
    assert err.startswith("error: --n-layer:") and "--model options.n_layer=1" in err


def test_a_depth_check_of_a_factory_arch_without_a_depth_parameterization_is_refused(
        tmp_path, capsys):
    err = _refusal(["--depths", "1", "2", "--width", "32"], tmp_path, capsys)
    assert err.startswith("error: --depths:") and "--depth-param" in err
