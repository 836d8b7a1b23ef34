"""Bad input to the commands other than sweep and submit (check, validate, train, analyze,
plot, prepare, doctor, autocorr, status, logs), and `validate` of a check file: each refusal is
one line, exit code 2, no traceback, nothing written and nothing run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.test_bad_input_more import one_line_error, write

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*_check.yaml"))

# a check of a small model on generated data: refused or summarised, never run here
CHECK = {"name": "small_check", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
         "data": {"source": "synthetic"},
         "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
         "check": {"widths": [16, 32], "seeds": [0, 1], "lr": [0.001, 0.01, 0.1],
                   "budget": {"minutes": 1, "seeds": 4},
                   "coord": {"steps": 1, "seeds": [0, 1], "batch_size": 2, "seq_len": 16}}}


def check_doc(**changes) -> dict:
    """CHECK with `changes` (dotted keys; None removes the key)."""
    doc = yaml.safe_load(yaml.safe_dump(CHECK))
    for dotted, value in changes.items():
        *above, last = dotted.split(".")
        node = doc
        for key in above:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return doc


@pytest.fixture
def nothing_runs(monkeypatch):
    """What a check does once it is past its refusals (load the data, build the models, run
    the stages), recorded instead of done."""
    done: list[str] = []
    monkeypatch.setattr("mutransfer.commands.check._preflight",
                        lambda *a, **k: done.append("preflight"))
    monkeypatch.setattr("mutransfer.commands.check._run", lambda *a, **k: done.append("ran"))
    monkeypatch.setattr("mutransfer.data.load_data", lambda *a, **k: done.append("data"))
    return done


# -- validate FILE of a check file -----------------------------------------------------------------

@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_validate_takes_a_check_file_and_says_what_it_would_run(example, tmp_path, capsys,
                                                                 monkeypatch, nothing_runs):
    """Before: 'check: Extra inputs are not permitted', a check file read as a sweep file."""
    path = tmp_path / example.name
    shutil.copy(example, path)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert err == ""
    spec = yaml.safe_load(example.read_text())
    k = spec["check"]
    assert out.startswith(f"{path}: ok, a check file -> results/check/{spec['name']} "
                          f"(data not checked)")
    assert f"widths {', '.join(map(str, k['widths']))}; tolerance ±{k.get('tolerance', 0.12):g}" \
        in out
    lo, hi = k["lr"]["log2"]
    assert f"transfer stage: {hi - lo + 1} LRs (2^{lo} .. 2^{hi}, 1 per octave)" in out
    assert "seeds 0-1, then 2 more a round while the drift is undecided, up to 8 seeds" in out
    assert "budget: 9 min from the start, 8 seeds in all" in out  # the examples' and default
    assert f"  parameterization {spec['param']['name']}\n" in out
    assert not nothing_runs and sorted(p.name for p in tmp_path.iterdir()) == [example.name]


def test_a_check_of_sp_says_that_fail_is_its_expected_verdict(tmp_path, capsys):
    """A check file without a param section checks sp (TrialConfig's default), which claims
    no transfer: validate says so, and the FAIL it gets says what to set instead (before:
    the FAIL's reason alone, the readout's missing 1/m multiplier, as if a bug)."""
    doc = check_doc(**{"data": {"source": "stdlib"}, "check.widths": [16, 32, 64],
                       "check.coord.seeds": [0, 1, 2, 3], "check.coord.steps": 2})
    path = write(tmp_path / "c.yaml", doc)
    assert main(["validate", str(path)]) == 0
    assert "  parameterization sp (the default: no param section): the standard " \
           "parameterization claims no transfer, so FAIL is its expected verdict" \
           in capsys.readouterr().out
    assert main(["check", str(path), "--coord-only", "--out", str(tmp_path / "o")]) == 1
    assert "  - param.name is sp: the standard parameterization claims no transfer" in \
        capsys.readouterr().out


def test_validate_checks_a_check_files_data_and_its_grid(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c.yaml", check_doc(**{"check.lr": [0.001, 0.01, 0.1]}))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: ok, a check file -> results/check/small_check\n")
    assert "coordinate stage: 4 runs (2 widths x 2 seeds) x 1 step at lr 0.003" in out
    assert "transfer stage: 3 LRs (0.001, 0.01, 0.1); seeds 0-1, then 2 more a round" in out
    assert "up to 4 seeds (2 rounds); the first round runs at least 12 trials of 10 steps" in out
    one_line_error(capsys, main(["validate", str(path), "--max-cells", "5"]),
                   f"{path}: 12 cells, more than the limit of 5")
    path = write(tmp_path / "c.yaml", check_doc(data={"source": "text",
                                                      "path": str(tmp_path / "none.txt")}))
    line = one_line_error(capsys, main(["validate", str(path)]), f"{path}: data: text: ")
    assert "the check file" in line and "sweep file" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


MALFORMED = [
    # (case, changes to CHECK, what the one line says after the file's name)
    ("tolerance 0", {"check.tolerance": 0}, "check.tolerance: Input should be greater than 0"),
    ("tolerance nan", {"check.tolerance": float("nan")}, "check.tolerance: nan is not a finite"),
    # before: accepted, and every lr* an edge bound: the check could only end INCONCLUSIVE
    ("two LRs", {"check.lr": [0.001, 0.01]}, "check.lr: Value error, 2 LRs: give at least 3"),
    ("a range of two LRs", {"check.lr": {"log2": [-8, -7], "per_octave": 1}},
     "check.lr: Value error, 2 LRs: give at least 3"),
    ("a budget below one seed set", {"check.budget.seeds": 1},
     "check: Value error, budget.seeds 1 is too small for one seed set"),
    ("an unknown key", {"check.widht": [16, 32]}, "check.widht: Extra inputs are not permitted"),
    ("a wrong type", {"check.widths": "16, 32"}, "check.widths: Input should be a valid list"),
    ("a search of another kind", {"check.search": {"kind": "grid"}},
     "check.search: Value error, kind grid: the check's search is a transfer search"),
    ("an unknown arch", {"model.arch": "nonesuch"}, "model.arch: Value error, 'nonesuch'"),
    ("an empty storage", {"storage": ""}, "storage: String should have at least 1 character"),
    ("a storage URI", {"storage": "s3://bucket/x"},
     "storage: Value error, s3://bucket/x: a check writes to a folder on this machine"),
    ("a model no machine holds", {"check.widths": [16, 10**9]},
     "width 1000000000: the model does not fit in memory"),
]


@pytest.mark.parametrize("case,changes,needle", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_a_malformed_check_file_is_refused_by_validate_as_by_check(
        case, changes, needle, tmp_path, capsys, monkeypatch, nothing_runs):
    """validate says what check says, in the same line. Before: validate said 'check: Extra
    inputs are not permitted' for each; check named an arch or train field after the file's
    `name` (not its path), read `storage: ''` as no storage and a URI as a local folder (s3:,
    then a traceback), and refused a model of width 10^9 only after loading the data; a search
    of kind grid was refused as 'search: seed_tolerance is an option of kind transfer'."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c.yaml", check_doc(**changes))
    lines = [one_line_error(capsys, main([command, str(path)]), needle)
             for command in ("validate", "check")]
    assert lines[0] == lines[1] and lines[0].startswith(f"error: {path}: {needle}"), lines
    assert not nothing_runs and sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_a_check_file_with_a_budget_too_small_is_refused_before_its_data_loads(
        tmp_path, capsys, monkeypatch, nothing_runs):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c.yaml", check_doc(**{"check.budget.trial_steps": 10}))
    needle = "check.budget.trial_steps 10: too small for one seed set: the check needs at least"
    for command in ("validate", "check"):
        one_line_error(capsys, main([command, str(path)]), needle)
    one_line_error(capsys, main(["check", str(write(tmp_path / "d.yaml", CHECK)), "--budget",
                                 "10"]), "--budget 10: too small for one seed set")
    assert not nothing_runs


# -- check: where it would write ------------------------------------------------------------------

def _foreign_sweep_folder(root: Path) -> None:
    (root / "out" / "sweep").mkdir(parents=True)
    (root / "out" / "sweep" / "notes.txt").write_text("mine")


def _a_store(root: Path) -> None:
    from mutransfer.results.store import Store

    Store(root / "store").ensure_writable()


def _a_file_out(root: Path) -> None:
    (root / "out").write_text("mine")


@pytest.mark.parametrize("setup,options,needle", [
    (_a_file_out, [], "c.yaml: storage out: is a file"),
    (_foreign_sweep_folder, [], "c.yaml: storage out: {root}/out/sweep: a folder that is not "
                                "empty (notes.txt) and not a mutransfer results store"),
    (_a_store, ["--out", "store/steps/x"], "--out store/steps/x: {root}/store/steps/x/sweep: "
                                           "inside the results store {root}/store"),
    (None, ["--out", "gs://bucket/x"], "--out gs://bucket/x: a check writes to a folder on "
                                       "this machine; give a path, not a URI"),
], ids=["storage a file", "OUT/sweep a folder of other files", "OUT inside a store",
        "--out a URI"])
def test_check_refuses_an_output_its_transfer_stage_could_not_write_before_anything_runs(
        setup, options, needle, tmp_path, capsys, monkeypatch, nothing_runs):
    """Before: a file named by `storage` was refused as '--out out: is a file'; the rest were
    refused by the transfer stage's sweep, after the coordinate stage had run and written its
    files there (into another store's steps/ folder), or a traceback for a URI."""
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        setup(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    path = write(tmp_path / "c.yaml", check_doc(storage="out"))
    for command in (["check", "c.yaml", *options], ["validate", "c.yaml"] if not options
                    else None):
        if command is not None:
            one_line_error(capsys, main(command), needle.format(root=tmp_path))
    assert not nothing_runs
    assert sorted(str(p) for p in tmp_path.rglob("*")) == sorted([*before, str(path)])



@pytest.mark.parametrize("changes,needle", [
    ({"check.lr": [-0.001, 0.001, 0.01]}, "check.lr"),
    ({"check.lr": [0.001, 0.01, 0.01]}, "check.lr"),
    ({"check.seeds": [0, 0]}, "check.seeds")], ids=["negative lr", "repeated lr", "repeated seed"])
def test_coord_only_refuses_the_transfer_fields_the_full_check_refuses(
        changes, needle, tmp_path, capsys, monkeypatch, nothing_runs):
    """The file is a check file either way: `--coord-only` ran and wrote its outputs with LRs
    or seeds the full check then refused."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c.yaml", check_doc(**changes))
    full = one_line_error(capsys, main(["check", str(path)]), needle)
    only = one_line_error(capsys, main(["check", str(path), "--coord-only"]), needle)
    assert only == full
    assert not nothing_runs and sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_coord_only_into_a_folder_holding_a_full_check_is_refused(tmp_path, capsys,
                                                                   monkeypatch, nothing_runs):
    """Before: `check --coord-only` replaced the full check's verdict.json and report.html
    (PASS with its drift) by the coordinate stage's INCONCLUSIVE. A coordinate-only verdict
    there (rounds 0) may be replaced."""
    import json

    monkeypatch.chdir(tmp_path)
    write(tmp_path / "c.yaml", check_doc(storage="out"))
    (tmp_path / "out").mkdir()
    full = {"name": "small_check", "verdict": "PASS", "rounds": 2, "drift": 0.05}
    (tmp_path / "out" / "verdict.json").write_text(json.dumps(full))
    one_line_error(capsys, main(["check", "c.yaml", "--coord-only"]),
                   "c.yaml: storage out: holds a full check (verdict PASS); --coord-only "
                   "would replace it: give another --out")
    assert not nothing_runs
    assert json.loads((tmp_path / "out" / "verdict.json").read_text()) == full
    coord_only = {**full, "verdict": "INCONCLUSIVE", "rounds": 0, "drift": None}
    (tmp_path / "out" / "verdict.json").write_text(json.dumps(coord_only))
    assert main(["check", "c.yaml", "--coord-only"]) == 0 and nothing_runs

# -- train ----------------------------------------------------------------------------------------

@pytest.fixture
def nothing_trains(monkeypatch):
    trained: list[int] = []
    monkeypatch.setattr("mutransfer.train.run_trial", lambda *a, **k: trained.append(1))
    return trained


@pytest.mark.parametrize("text", ["", "# nothing set yet\n", "{}\n"], ids=["empty", "comments",
                                                                          "{}"])
def test_train_refuses_an_empty_config(text, tmp_path, capsys, nothing_trains):
    """Before: every field at its default, a 200-step trial nobody asked for."""
    path = write(tmp_path / "trial.yaml", text)
    one_line_error(capsys, main(["train", str(path)]), f"{path}: empty; a trial config sets")
    assert not nothing_trains


def test_train_names_a_check_file_as_one(tmp_path, capsys, nothing_trains):
    """Before: 'a sweep file (it has name) ...: run it with `mutransfer sweep`', which refuses
    it."""
    path = write(tmp_path / "c.yaml", CHECK)
    one_line_error(capsys, main(["train", str(path)]),
                   f"{path} is a check file (it has check), not a trial config: run it with "
                   f"`mutransfer check {path}`")
    assert not nothing_trains


# -- analyze and plot -----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["analyze", "plot"])
def test_analyze_and_plot_refuse_an_empty_out(command, tmp_path, capsys, monkeypatch):
    """Before: analyze --out '' wrote to RESULTS/analysis, plot --out '' into the current
    folder."""
    from tests.sweeps import planted_results

    root = planted_results(tmp_path / "results", [64])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    one_line_error(capsys, main([command, str(root), "--out", ""]),
                   "--out '': an empty folder name", stdout="")
    assert not (root / "analysis").exists() and not list(work.iterdir())


# -- prepare and doctor take a check file ----------------------------------------------------

def test_prepare_and_doctor_take_a_check_file(tmp_path, capsys, monkeypatch):
    """Before: 'check: Extra inputs are not permitted', as for validate."""
    from mutransfer.commands import doctor

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(doctor, "versions", lambda r: None)
    monkeypatch.setattr(doctor, "scan_backends", lambda r: None)
    path = write(tmp_path / "c.yaml", CHECK)
    assert main(["prepare", str(path)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == f"{path}: no text data to tokenize (generated data only)\n"
    assert main(["doctor", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"ok    {path}: valid, a check file; data and tokenizer present" in out
    assert "ok    storage results/check/small_check: writable" in out
    path = write(tmp_path / "c.yaml", check_doc(**{"check.tolerance": -1}))
    for command in (["prepare", str(path)], ["doctor", str(path)]):
        rc = main(command)
        assert rc == 2 and capsys.readouterr().err == \
            f"error: {path}: check.tolerance: Input should be greater than 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


# -- autocorr, status, logs -----------------------------------------------------------------------

def test_autocorr_names_what_data_takes_for_a_word_it_does_not_know(tmp_path, capsys,
                                                                   monkeypatch):
    """Before: 'pink: no such file', as if --data took only files."""
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, main(["autocorr", "--data", "pink"]),
                   "--data pink: neither white, ar1, constant nor stdlib, and no such file",
                   stdout="")


@pytest.mark.parametrize("argv", [["status", ""], ["status", " ", "--wait"], ["logs", ""],
                                  ["logs", "", "--follow"]],
                         ids=["status", "status --wait", "logs", "logs --follow"])
def test_an_empty_job_id_is_refused_before_the_dashboard_is_asked(argv, capsys, monkeypatch):
    """Before: Ray's Jobs API answered '' with its list of jobs, which its client read as one
    job: a TypeError traceback (seen against a live dashboard)."""
    asked: list[str] = []

    class RayClient:  # what Ray's JobSubmissionClient does with an empty id
        def get_job_info(self, job_id):
            asked.append(job_id)
            raise TypeError("JobDetails() argument after ** must be a mapping, not list")

        get_job_logs = get_job_info

    monkeypatch.setattr("mutransfer.sweep.run.jobs.client", lambda address: RayClient())
    one_line_error(capsys, main([*argv, "--dashboard", "http://127.0.0.1:8265"]),
                   f"argument job_id: {argv[1]!r}: an empty job id", stdout="")
    assert not asked


# -- a trial config where a sweep or check file belongs ----------------------------------------

TRIAL = Path(__file__).parents[1] / "configs" / "train.yaml"


@pytest.mark.parametrize("argv, wanted", [(["validate"], "sweep file"), (["prepare"], "sweep file"),
                                          (["sweep", "--dry-run"], "sweep file"),
                                          (["sweep"], "sweep file"), (["check"], "check file")])
def test_a_trial_config_given_for_a_sweep_or_check_is_named_as_one(argv, wanted, tmp_path,
                                                                   capsys, monkeypatch,
                                                                   nothing_runs):
    """Before: 'name: Field required', as if a field were missing from a sweep file."""
    monkeypatch.chdir(tmp_path)
    path = str(TRIAL)
    one_line_error(capsys, main([*argv, path]),
                   f"{path} is a trial config (it has no name), not a {wanted}: run it with "
                   f"`mutransfer train {path}`")
    assert not nothing_runs and not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["validate", "check"])
def test_a_check_file_says_its_train_lr_and_seed_are_not_used(command, tmp_path, capsys,
                                                              monkeypatch, nothing_runs):
    """A trial config copied into a check file keeps its lr and seed; before, the check
    dropped them without a word."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c.yaml", check_doc(**{"train.lr": 0.003, "train.seed": 7}))
    assert main([command, str(path)]) == 0
    out = capsys.readouterr().out
    assert "note: train.lr 0.003 is not used: the check sets each trial's LR (check.lr" in out
    assert "note: train.seed 7 is not used: the check sets each trial's seed" in out
    plain = write(tmp_path / "plain.yaml", CHECK)
    assert main([command, str(plain)]) == 0
    assert "not used" not in capsys.readouterr().out
