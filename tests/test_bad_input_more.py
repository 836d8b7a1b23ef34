"""More bad input, end to end (tests/test_bad_input.py has the first cases): YAML documents no
config has the shape of, host names no lookup takes, sizes no machine holds, and empty or
out-of-range options. Each is one line, exit code 2, no traceback, nothing written and nothing
trained or measured."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.sweeps import tiny_sweep

TRIAL = {k: v for k, v in tiny_sweep("more").items() if k != "name"}


def one_line_error(capsys, rc: int, needle: str, stdout: str | None = None) -> str:
    """The one error line (asserted); `stdout`, when given, is what stdout must be."""
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert stdout is None or out == stdout, out
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    return lines[0]


def write(path: Path, doc: dict | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def _sweep_file(tmp_path: Path, model_options: str) -> Path:
    """A tiny sweep file of a user model whose model.options (its factory's keywords, any
    value) is `model_options` (YAML text, one line)."""
    sweep = tiny_sweep("more")  # the model's own fields (n_layer, d_state) are Mamba's
    sweep["model"] = {"base_width": sweep["model"]["base_width"]}
    doc = yaml.safe_dump({**sweep, "storage": str(tmp_path / "results")}, sort_keys=False)
    doc = doc.replace("model:\n", "model:\n  arch: examples.tiny_gpt:tiny_gpt\n"
                                  f"  options: {model_options}\n", 1)
    return write(tmp_path / "sweep.yaml", doc)


def bomb(levels: int) -> str:
    """A flow list of anchors, each holding nine aliases of the one before: 9^levels values
    once expanded, a few hundred bytes of text ('billion laughs')."""
    items = ["&a0 [x, x, x, x, x, x, x, x, x]"]
    items += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return f"[{', '.join(items)}]"


# -- YAML documents no config has the shape of ---------------------------------------------------

SHAPES = [
    # (case, model.options as YAML text, text the one line must contain)
    ("an alias of an alias of ... (a YAML bomb, 9^6 values)", f"{{x: {bomb(6)}}}",
     "more than 100,000 values once its aliases are expanded"),
    ("nested 40 levels deep", "{x: " + "[" * 40 + "]" * 40 + "}",
     "nested more than 32 levels deep"),
    ("nested 2000 levels deep (deeper than the YAML parser recurses)",
     "{x: " + "[" * 2000 + "]" * 2000 + "}", "nested more than 32 levels deep"),
    ("an alias inside its own anchor", "{x: &a [*a]}",
     "model.options.x.0: an alias inside its own anchor"),
]


@pytest.mark.parametrize("case,options,needle", SHAPES, ids=[c[0] for c in SHAPES])
def test_a_document_no_config_has_the_shape_of_is_refused_while_it_is_read(
        tmp_path, capsys, case, options, needle):
    """model.options takes any value (a user factory's keywords): before, a bomb there was
    copied into every cell (validate ran for minutes, gigabytes), and deep or self-containing
    values ended in a RecursionError or 'Circular reference detected' traceback."""
    path = _sweep_file(tmp_path, options)
    t0 = time.perf_counter()
    for command in (["validate", str(path)], ["sweep", str(path)]):
        line = one_line_error(capsys, main(command), needle)
        assert line.startswith(f"error: {path}: ")
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "results").exists()


def test_a_config_of_ordinary_size_and_depth_is_read_as_before(tmp_path, capsys):
    """Aliases a config shares on purpose (one LR list for two parameterizations), options
    nested a few levels and holding 20,000 values are all fine."""
    many = ", ".join(["1"] * 20_000)
    path = _sweep_file(tmp_path, f"{{a: {{b: {{c: [[1, 2], [{many}]]}}}}}}")
    write(path, path.read_text() + "axes:\n  parameterization: [sp, mup]\n"
                                   "  lr: {sp: &lrs [0.001, 0.01], mup: *lrs}\n")
    assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err
    assert "ok, 4 cells" in capsys.readouterr().out


def test_measuring_a_document_costs_its_distinct_lists_not_their_aliases():
    """One list of 30,000 values aliased 30,000 times: each distinct list is walked once
    (walked at each alias, it took 9 * 10^8 steps)."""
    from mutransfer.configbase import shape_problem

    class Counted(list):  # a list that counts the walks over its values
        walks = 0

        def __iter__(self):
            Counted.walks += 1
            return super().__iter__()

    shared = Counted([1] * 30_000)
    problem = shape_problem({"x": shared, "p": [shared] * 30_000})
    assert problem is not None and problem.startswith("p: more than 100,000 values")
    assert Counted.walks <= 2  # entering and leaving it, not once per alias (counted: load-proof)
    assert shape_problem({"p": [[1, 2]] * 30_000}) is None  # 90,001 values: under the limit


def test_a_set_value_no_config_has_the_shape_of_names_the_set(tmp_path, capsys, monkeypatch):
    trained = []
    monkeypatch.setattr("mutransfer.train.run_trial", lambda *a, **k: trained.append(1))
    config = write(tmp_path / "trial.yaml", TRIAL)
    deep = "model.options.x=" + "[" * 3000 + "]" * 3000
    for assignment, needle in [(deep, "--set model.options.x: nested more than 32 levels"),
                               ("model.options.x=&a [*a]", "--set model.options.x: 0: an alias"),
                               (f"model.options.x={bomb(6)}", "--set model.options.x: 5: more")]:
        rc = main(["train", str(config), "--set", assignment])
        one_line_error(capsys, rc, needle)
    assert not trained


def test_a_file_larger_than_any_config_is_refused_before_it_is_parsed(tmp_path, capsys,
                                                                      monkeypatch):
    """`mutransfer sweep corpus.txt` by mistake: 8 MB of text took 18 s and 470 MB to parse
    only to be refused as 'expected a mapping'; 100 MB would take minutes."""
    big = tmp_path / "corpus.txt"
    big.write_text("the quick brown fox jumps over the lazy dog\n" * 70_000)  # 3.1 MB
    parsed = []
    monkeypatch.setattr("mutransfer.configbase.load_yaml", lambda text: parsed.append(text))
    one_line_error(capsys, main(["validate", str(big)]),
                   "corpus.txt: 2.9 MiB, larger than a config file can be (at most 2 MiB)")
    assert not parsed  # refused by its size, before the parser saw it (not timed: load-proof)


# -- host names no lookup takes ------------------------------------------------------------------

def _ok_sweep(tmp_path: Path) -> str:
    return str(write(tmp_path / "ok.yaml", {**tiny_sweep("more"),
                                            "storage": str(tmp_path / "results")}))


HOSTS = [
    # (case, argv from the test folder): an empty label (a..b, .) or one over 63 characters
    ("sweep --address with an empty label", lambda t: ["sweep", _ok_sweep(t), "--address",
                                                       "head..cluster:6379"]),
    ("sweep --address ray:// with a long label",
     lambda t: ["sweep", _ok_sweep(t), "--address", f"ray://{'h' * 64}.example:10001"]),
    ("doctor --address of a dot", lambda t: ["doctor", "--address", ".:6379"]),
    ("submit --dashboard with an empty label",
     lambda t: ["submit", _ok_sweep(t), "--dashboard", "http://head..cluster:8265"]),
    ("status --dashboard with a long label",
     lambda t: ["status", "raysubmit_1", "--dashboard", f"http://{'h' * 64}:8265"]),
    ("logs --dashboard without a scheme", lambda t: ["logs", "raysubmit_1", "--dashboard",
                                                     "head..cluster:8265"]),
]


@pytest.mark.parametrize("case,argv", HOSTS, ids=[c[0] for c in HOSTS])
def test_a_host_name_no_lookup_takes_is_refused_with_the_command_line(tmp_path, capsys, case,
                                                                        argv):
    """The name lookup encodes a host to IDNA, which raises UnicodeError (no OSError: the
    connection checks let it through as a traceback)."""
    one_line_error(capsys, main(argv(tmp_path)), "is not a host name: each of its labels")
    assert not (tmp_path / "results").exists()


def test_host_names_that_look_odd_but_resolve_are_left_to_the_connection(tmp_path):
    from mutransfer.commands.jobs import dashboard_url
    from mutransfer.commands.options import cluster_address

    for address in ("auto", "127.0.0.1:6379", "[::1]:6379", "ray://head.local.:10001",
                    f"{'h' * 63}:6379", "héad:6379"):
        assert cluster_address(address) == address
    for url in ("http://[::1]:8265", "https://head:8265/", "http://[::1"):
        assert dashboard_url(url) == url  # an unclosed bracket: refused where it is used


# -- train: threads, --out, sizes ----------------------------------------------------------------

@pytest.fixture
def no_training(monkeypatch):
    """What train would do past its checks, recorded instead of done: a refusal must come
    before torch's threads are set and before any trial runs."""
    done: list[str] = []
    monkeypatch.setattr("torch.set_num_threads", lambda n: done.append(f"threads {n}"))
    monkeypatch.setattr("mutransfer.train.run_trial", lambda *a, **k: done.append("trained"))
    return done


@pytest.mark.parametrize("argv,env,needle", [
    (["--threads", "100000000"], None, "--threads 100000000: more threads than any machine"),
    ([], "100000", "OMP_NUM_THREADS=100000: more threads than any machine"),
], ids=["--threads", "OMP_NUM_THREADS"])
def test_train_refuses_more_threads_than_any_machine_has(tmp_path, capsys, monkeypatch,
                                                         no_training, argv, env, needle):
    """Before: torch.set_num_threads(10^5) and the process died in a segmentation fault."""
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    config = write(tmp_path / "trial.yaml", TRIAL)
    one_line_error(capsys, main(["train", str(config), *argv]), needle)
    assert not no_training


def test_train_refuses_an_empty_out_file_name(tmp_path, capsys, no_training):
    """Before: --out '' was taken as no --out, and the result was written nowhere."""
    config = write(tmp_path / "trial.yaml", TRIAL)
    one_line_error(capsys, main(["train", str(config), "--out", ""]), "--out '': an empty")
    assert not no_training


@pytest.mark.parametrize("assignment,needle", [
    ("train.batch_size=1000000000000",
     "train.batch_size 1000000000000 x train.seq_len 16: one batch's token ids alone take"),
    ("model.n_layer=10000000", "the model does not fit in memory: its weights"),
], ids=["a batch", "a model"])
def test_train_refuses_a_trial_no_machine_holds_before_its_data_loads(
        tmp_path, capsys, no_training, assignment, needle):
    """Before: a 10^7-layer model was built block by block without end, and a batch of 10^12
    sequences ended in numpy's MemoryError traceback after the data had loaded."""
    config = write(tmp_path / "trial.yaml", TRIAL)
    one_line_error(capsys, main(["train", str(config), "--set", assignment]), needle)
    assert not no_training


# -- coord-check and check -----------------------------------------------------------------------

@pytest.fixture
def no_measuring(monkeypatch):
    """coord_check runs its checks as they are; the corpus and the measurement are stubs
    that record being reached (neither may be)."""
    done: list[str] = []

    def reached(*args, **kwargs):
        done.append("measured")
        raise AssertionError("measured")

    monkeypatch.setattr("mutransfer.coordcheck.load_data", reached)
    monkeypatch.setattr("mutransfer.coordcheck.run_coord_check", reached)
    return done


def test_coord_check_refuses_an_empty_out_folder_name(tmp_path, capsys, monkeypatch,
                                                      no_measuring):
    """Before: '' was the current folder, and the results were written there."""
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, main(["coord-check", "--out", ""]), "--out '': an empty folder")
    assert not no_measuring and not list(tmp_path.iterdir())


def test_coord_check_refuses_a_batch_no_machine_holds(tmp_path, capsys, no_measuring):
    one_line_error(capsys, main(["coord-check", "--batch-size", "1000000000000", "--out",
                                 str(tmp_path / "out")]),
                   "--batch-size 1000000000000 x --seq-len 32: one batch's token ids alone")
    assert not no_measuring and not (tmp_path / "out").exists()


CHECK = {"name": "more_check", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
         "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
         "check": {"widths": [16, 32], "seeds": [0], "lr": [0.001, 0.01, 0.1],
                   "budget": {"minutes": 1, "seeds": 1},
                   "coord": {"steps": 1, "seeds": [0, 1], "batch_size": 2, "seq_len": 16}}}


@pytest.fixture
def no_check_run(monkeypatch):
    done: list[str] = []
    monkeypatch.setattr("mutransfer.commands.check._preflight",
                        lambda *a, **k: done.append("preflight"))
    monkeypatch.setattr("mutransfer.commands.check._run", lambda *a, **k: done.append("ran"))
    return done


@pytest.mark.parametrize("doc,options,needle", [
    (CHECK, ["--num-cpus", "0"], "argument --num-cpus: 0: give a whole number of at least 1"),
    (CHECK, ["--out", ""], "--out '': an empty folder name"),
    ({**CHECK, "check": {**CHECK["check"], "coord": {**CHECK["check"]["coord"],
                                                      "batch_size": 10**12}}},
     [], "check.coord.batch_size 1000000000000 x check.coord.seq_len 16: one batch's"),
    ({**CHECK, "train": {**CHECK["train"], "batch_size": 10**12}},
     [], "train.batch_size 1000000000000 x train.seq_len 16: one batch's token ids"),
], ids=["--num-cpus 0", "--out ''", "a coordinate batch", "a transfer batch"])
def test_check_refuses_before_its_coordinate_stage(tmp_path, capsys, monkeypatch,
                                                   no_check_run, doc, options, needle):
    """Before: --num-cpus 0 was refused after the coordinate stage had run and printed its
    verdict; --out '' wrote the check into the file's storage; a batch no machine holds
    ended in numpy's MemoryError traceback at the first batch."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "check.yaml", doc)
    one_line_error(capsys, main(["check", str(path), *options]), needle)
    assert not no_check_run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.yaml"]


def test_check_with_coord_only_does_not_judge_the_transfer_stages_batch(
        tmp_path, capsys, monkeypatch, no_check_run):
    monkeypatch.chdir(tmp_path)
    doc = {**CHECK, "train": {**CHECK["train"], "batch_size": 10**12}}
    path = write(tmp_path / "check.yaml", doc)
    assert main(["check", str(path), "--coord-only"]) == 0, capsys.readouterr().err
    assert no_check_run == ["preflight", "ran"]


def test_coord_check_refuses_a_seed_out_of_range_before_its_data_loads(tmp_path, capsys,
                                                                       no_measuring):
    """Before: refused by the first trial's config, after the token cache's progress lines."""
    one_line_error(capsys, main(["coord-check", "--seeds", str(2**60), "1", "--out",
                                 str(tmp_path / "out")]),
                   f"--seeds {2**60}: out of range for a seed (at most 2**53 in size)")
    assert not no_measuring


# -- roles and autocorr --------------------------------------------------------------------------

def test_roles_refuses_a_model_no_machine_holds_before_its_data_loads(tmp_path, capsys,
                                                                      monkeypatch):
    """Before: a model of 10^8 layers was built block by block without end (after the token
    cache's progress lines)."""
    done: list[str] = []
    monkeypatch.setattr("mutransfer.data.load_data", lambda *a, **k: done.append("data"))
    monkeypatch.setattr("mutransfer.models.factory.probe", lambda *a, **k: done.append("built"))
    config = write(tmp_path / "trial.yaml", {"model": {"n_layer": 10**8, "base_width": 16}})
    one_line_error(capsys, main(["roles", str(config)]),
                   "trial.yaml: width 32: the model does not fit in memory: its weights")
    assert not done


@pytest.mark.parametrize("options,needle", [
    (["--data", "constant", "--mean", "nan"], "--mean nan: give a finite number"),
    (["--data", "constant", "--mean", "inf"], "--mean inf: give a finite number"),
    (["--data", "constant", "--noise", "inf"], "--noise inf: give a finite number at least 0"),
    (["--kappa", "inf"], "--kappa inf: give a finite number above 0"),
    (["--seed", str(2**64)], f"--seed {2**64}: give a seed from -2**63 to 2**64 - 1"),
], ids=["mean nan", "mean inf", "noise inf", "kappa inf", "seed 2**64"])
def test_autocorr_refuses_a_value_that_gives_no_table(capsys, options, needle):
    """Before: a table of nan (or inf) lines, exit 0; a seed past torch's range ended in an
    'Overflow when unpacking long long' traceback under the table's header."""
    one_line_error(capsys, main(["autocorr", *options, "--lengths", "16", "--samples", "2"]),
                   needle, stdout="")


def test_autocorr_takes_every_seed_torch_takes(capsys):
    for seed in (str(-2**63), "-1", str(2**64 - 1)):
        assert main(["autocorr", "--seed", seed, "--lengths", "16", "--samples", "2"]) == 0
    assert "Traceback" not in capsys.readouterr().err


# -- storage -------------------------------------------------------------------------------------

@pytest.mark.parametrize("storage,needle", [
    ("results\nold", r"storage: 'results\nold' holds a control character"),
    ("results\tnew", r"storage: 'results\tnew' holds a control character"),
    ("s3://", "storage: s3://: a URI with no location after s3://"),
    ("file://", "storage: file://: a URI with no location after file://"),
], ids=["a newline", "a tab", "s3:// alone", "file:// alone"])
def test_a_storage_that_names_no_place_is_refused(tmp_path, capsys, monkeypatch, storage,
                                                  needle):
    """Before: a newline or tab in the storage was a folder of that name (and the lines that
    name the store broke in two); `s3://` was taken as a local folder `s3:` and the sweep
    ended in pyarrow's 'Missing bucket name' traceback once Ray started."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "sweep.yaml", {**tiny_sweep("more"), "storage": storage})
    one_line_error(capsys, main(["validate", "--no-data", str(path)]), needle)
    plain = write(tmp_path / "plain.yaml", tiny_sweep("more"))
    one_line_error(capsys, main(["sweep", str(plain), "--storage", storage, "--dry-run"]),
                   needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.yaml", "sweep.yaml"]


def test_doctor_refuses_an_empty_storage(tmp_path, capsys, monkeypatch):
    """Before: --storage '' was taken as no --storage, and 'results' was checked instead."""
    monkeypatch.chdir(tmp_path)
    rc = main(["doctor", "--storage", ""])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == "error: storage '': an empty path; give a folder or URI"


# -- LR ranges -----------------------------------------------------------------------------------

@pytest.mark.parametrize("log2,needle", [
    ([-1e308, 1e308], "axes.lr.log2: -1e+308 is beyond the LRs a float holds"),
    ([1000, 1024], "axes.lr.log2: 1024 is beyond the LRs a float holds"),
    ([-2000, -1000], "axes.lr.log2: -2000 is beyond the LRs a float holds"),
    ([-1074, -1073], "axes.lr.log2: -1074 is beyond the LRs a float holds"),
], ids=["a range of 10^308 octaves", "up to 2^1024", "down to 2^-2000", "subnormal"])
def test_an_lr_range_beyond_what_a_float_holds_is_refused(tmp_path, capsys, log2, needle):
    """Before: an OverflowError traceback (the count of points of an infinite range; 2.0 **
    1024), or LRs of 0.0 refused as if the user had written them."""
    path = write(tmp_path / "sweep.yaml", {**tiny_sweep("more", {"lr": {"log2": log2}}),
                                           "storage": str(tmp_path / "results")})
    one_line_error(capsys, main(["validate", "--no-data", str(path)]), needle)


def test_an_lr_range_at_the_ends_of_what_a_float_holds_is_taken(tmp_path, capsys):
    """Normal floats only: subnormal LRs read as 0.0 once a process flushes them."""
    path = write(tmp_path / "sweep.yaml", {**tiny_sweep("more", {"lr": {"log2": [-1022, -1021]}}),
                                           "storage": str(tmp_path / "results")})
    assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("resources,needle", [
    ({"cpus_per_trial": 1e-9}, "resources.cpus_per_trial: 1e-09 is less than the smallest"),
    ({"gpus_per_trial": {16: 0.5, 64: 0.00001}},
     "resources.gpus_per_trial: 1e-05 is less than the smallest fraction of a CPU or GPU Ray "
     "schedules (0.0001)"),
], ids=["cpus", "gpus by width"])
def test_a_fraction_of_a_cpu_or_gpu_ray_cannot_schedule_is_refused(tmp_path, capsys,
                                                                  resources, needle):
    """Before: taken, and the sweep ended in Ray's 'precision ... cannot go beyond 0.0001'
    traceback when its first trial started (after the token cache and Ray's start)."""
    path = write(tmp_path / "sweep.yaml", {**tiny_sweep("more"), "resources": resources,
                                           "storage": str(tmp_path / "results")})
    one_line_error(capsys, main(["validate", "--no-data", str(path)]), needle)
    for fine in ({"cpus_per_trial": 0.0001}, {"gpus_per_trial": 0.33333}):
        write(path, {**tiny_sweep("more"), "resources": fine})
        assert main(["validate", "--no-data", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("address", ["head..x:6379", "ray://" + "a" * 64 + ":10001"])
def test_the_python_entry_point_refuses_a_host_no_lookup_takes_in_one_line(tmp_path, address):
    """The command line checks --address as it is read; mutransfer.run(address=...) reaches
    the cluster probe, whose name lookup raised a UnicodeError traceback."""
    import mutransfer
    from mutransfer.errors import UserError

    spec = {"name": "tiny", "storage": str(tmp_path / "store"),
            "model": {"base_width": 16}, "axes": {"width": [16], "lr": [0.01]}}
    with pytest.raises(UserError, match="is not a host name"):
        mutransfer.run(spec, address=address)
    assert not (tmp_path / "store").exists()
