"""A model field the chosen arch never reads is refused up front, as a data field the source
never reads is (data/config.py).

Before, `validate` and `sweep` accepted e.g. an axis `model.s4d.init: [lin, inv]` on a Mamba, a
`model.dt_init.kappa` axis under dt_init log_uniform, `keep_nonpositive` on Mamba, or
`zero_real_fraction` / `model.n_layer` on a `package.module:factory` model: every cell trained
the same model under a different trial id, and the analysis compared identical runs as if the
axis had been applied. And `model.imag_init: {scheme: memory}` on a Mamba, or on text data,
passed `validate` and failed every trial at build time (exit 0, a store of failed trials).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.sweeps import tiny_sweep


def _sweep(tmp_path: Path, model: dict, axes: dict, data: dict | None = None) -> Path:
    doc = tiny_sweep("fields", {"width": [16, 32], "lr": [0.001, 0.01], **axes},
                     storage=str(tmp_path / "results"))
    doc["model"] = {**doc["model"], **model}
    doc["data"] = data or {"source": "synthetic"}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _refused(capsys, path: Path, needle: str) -> str:
    assert main(["validate", "--no-data", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert needle in err, err
    return err


UNREAD = [
    ("s4d options on mamba", {"arch": "mamba"}, {"model.s4d.init": ["lin", "inv"]},
     "axes.model.s4d.init: 'inv': model: model.s4d is not used by arch mamba"),
    ("mamba2 options on mamba", {"arch": "mamba"}, {"model.mamba2.headdim": [8, 16]},
     "model.mamba2 is not used by arch mamba"),
    ("keep_nonpositive on mamba2", {"arch": "mamba2", "mamba2": {"headdim": 8}},
     {"model.keep_nonpositive": [False, True]},
     "model.keep_nonpositive is not used by arch mamba2"),
    ("expand on s4d", {"arch": "s4d"}, {"model.expand": [2, 4]},
     "axes.model.expand: 4: model: model.expand is not used by arch s4d"),
    ("kappa under log_uniform", {"arch": "mamba"}, {"model.dt_init.kappa": [0.5, 2.0]},
     "model.dt_init.kappa is used only by dt_init.scheme autocorr"),
    ("dt_max under dt_init autocorr", {"arch": "mamba", "dt_init": {"scheme": "autocorr"}},
     {"model.dt_max": [0.01, 0.1]},
     "model.dt_max is not used under dt_init.scheme autocorr"),
    ("dt_min under dt_init autocorr", {"arch": "s4d", "dt_init": {"scheme": "autocorr"}},
     {"model.dt_min": [0.0001, 0.001]},
     "model.dt_min is not used under dt_init.scheme autocorr"),
    ("min_separation under the default imag init", {"arch": "s4d"},
     {"model.imag_init.min_separation": [0.0, 0.3]},
     "model.imag_init.min_separation is used only by imag_init.scheme memory"),
]


@pytest.mark.parametrize("case,model,axes,needle", UNREAD, ids=[u[0] for u in UNREAD])
def test_an_axis_over_a_field_the_arch_never_reads_is_refused_naming_it(
        tmp_path, capsys, case, model, axes, needle):
    """Each of these sweeps would train one model under several trial ids."""
    _refused(capsys, _sweep(tmp_path, model, axes), needle)
    assert not (tmp_path / "results").exists()


def test_builtin_fields_on_a_factory_model_are_refused(tmp_path, capsys):
    """A factory takes its settings from model.options: zero_real_fraction (an init scheme of
    the built-in SSMs) or a model.n_layer axis would change nothing in its model."""
    factory = {"arch": "examples.tiny_gpt:tiny_gpt", "n_layer": 2, "d_state": 16,
               "options": {"n_layer": 1, "head_dim": 8, "max_len": 16}}
    path = _sweep(tmp_path, {**factory, "zero_real_fraction": 0.1}, {},
                  data={"source": "stdlib"})
    # the file's field is named, not an unrelated model axis that happens to be swept
    err = _refused(capsys, path, "model.zero_real_fraction is not used by arch "
                                 "examples.tiny_gpt:tiny_gpt")
    assert "axes." not in err
    path = _sweep(tmp_path, factory, {"model.n_layer": [2, 4]}, data={"source": "stdlib"})
    _refused(capsys, path, "axes.model.n_layer: 4: model.n_layer is not used by arch "
                           "examples.tiny_gpt:tiny_gpt")


def test_a_memory_imag_init_that_no_trial_could_build_is_refused_by_validate(tmp_path, capsys):
    """imag_init memory needs a complex A (s4d) and the synthetic memory task's scalar
    inputs; before, validate said ok and every trial failed at build time."""
    memory = {"imag_init": {"scheme": "memory"}}
    _refused(capsys, _sweep(tmp_path, {"arch": "mamba", **memory}, {}),
             "model.imag_init is not used by arch mamba")
    _refused(capsys, _sweep(tmp_path, {"arch": "s4d", **memory}, {}, {"source": "stdlib"}),
             "model.imag_init memory (ridge) needs data source synthetic, task memory")
    task = {"imag_init": {"scheme": "memory", "memory": "task"}}
    _refused(capsys, _sweep(tmp_path, {"arch": "s4d", **task}, {},
                            {"source": "synthetic", "task": "copy", "copy_len": 2}),
             "needs data source synthetic, task memory")


def test_fields_the_arch_reads_are_still_swept(tmp_path, capsys):
    """Comparing init schemes stays possible: dt_init.scheme and zero_real_fraction on a
    Mamba, the s4d options and min_separation on an S4D under imag_init memory."""
    path = _sweep(tmp_path, {"arch": "mamba"},
                  {"model.dt_init.scheme": ["log_uniform", "autocorr"],
                   "model.zero_real_fraction": [0.0, 0.25]})
    assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err
    assert "ok, 16 cells" in capsys.readouterr().out
    path = _sweep(tmp_path, {"arch": "s4d", "imag_init": {"scheme": "memory"}},
                  {"model.s4d.init": ["lin", "inv"],
                   "model.imag_init.min_separation": [0.0, 0.3]})
    assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err
    assert "ok, 16 cells" in capsys.readouterr().out
