"""`mutransfer autocorr --data ... --lengths 256 1024 4096`: λ_max and Δ* against L.

--data: white | ar1 | constant (reference sequences, used as they are), stdlib (the default
corpus), or a YAML file: a trial config (width, model, data, ...) or a data config (source,
...). For a data source the sequences are, by default, what the first SSM layer of the
config's model sees at init (`--input layer0`: for tokens, the normalised embeddings through
Mamba's in_proj/conv, or S4D's mixer input; channels pooled as sequences), as the
`dt_init: {scheme: autocorr}` init does; `--input raw` uses the data's inputs as numbers
(real inputs per dimension; token ids as values, whose non-zero mean makes λ_max grow like L).
"""

from __future__ import annotations

import math

SIGNALS = ("white", "ar1", "constant")
# the options of one reference signal each: (option, attribute, signal, default)
SIGNAL_OPTIONS = (("--rho", "rho", "ar1", 0.99), ("--mean", "mean", "constant", 1.0),
                  ("--noise", "noise", "constant", 0.0))
# the archs whose layer-0 SSM input --input layer0 reads (as model.dt_init autocorr does)
LAYER0_ARCHS = ("mamba", "s4d")
# values of one length's sample (samples x L): 2^27 float64s are 1 GiB, and the estimator's
# FFTs take a few times that; beyond it the answer is an out-of-memory traceback
MAX_VALUES = 1 << 27


def add_arguments(p, name: str) -> None:
    p.add_argument("--data", default="white",
                   help="white | ar1 | constant | stdlib | a trial or data config YAML")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096], metavar="L")
    p.add_argument("--samples", type=int, default=64, help="sequences per length (default 64)")
    p.add_argument("--estimator", choices=("toeplitz", "sample"), default="toeplitz")
    p.add_argument("--kappa", type=float, default=1.0, help="Δ* = kappa / sqrt(L λ_max)")
    p.add_argument("--input", choices=("layer0", "raw"), default=None,
                   help="for data sources: layer 0's SSM input (default for tokens) or raw")
    # None: not given (refused with another --data), then the default
    p.add_argument("--rho", type=float, default=None, help="ar1 coefficient (default 0.99)")
    p.add_argument("--mean", type=float, default=None, help="constant: the mean (default 1)")
    p.add_argument("--noise", type=float, default=None,
                   help="constant: noise std (default 0)")
    p.add_argument("--seed", type=int, default=0)


def _trial_config(data: str):
    """A TrialConfig for `stdlib` or a YAML file (a trial config, or a data config)."""
    from pathlib import Path

    from mutransfer.commands.train import not_a_trial_config
    from mutransfer.config import TrialConfig
    from mutransfer.configbase import read_yaml, validate
    from mutransfer.errors import UserError

    if data == "stdlib":
        return TrialConfig(data={"source": "stdlib"})
    if not Path(data).exists():  # before: 'pink: no such file', as if only files were taken
        raise UserError(f"--data {data}: neither {', '.join(SIGNALS)} nor stdlib, and no such "
                        f"file")
    raw = read_yaml(data)
    if "source" in raw:  # a data config alone
        raw = {"data": raw}
    problem = not_a_trial_config(raw, data, "`mutransfer autocorr --data` a trial config "
                                            "or a data config")
    if problem:  # before: "name: Extra inputs are not permitted"
        raise UserError(problem)
    return validate(TrialConfig, raw, source=data)


class _Sequences:
    """Sequences of length L from a data source: layer 0's SSM input, or the raw inputs."""

    def __init__(self, cfg, mode: str | None, samples: int, seed: int) -> None:
        from mutransfer.data import load_data

        self.cfg, self.samples, self.seed = cfg, samples, seed
        self.source = load_data(cfg.data)
        self.mode = mode or ("layer0" if self.source.spec.kind == "tokens" else "raw")
        self.model = None
        arch = cfg.model.arch
        if self.mode == "layer0" and arch not in LAYER0_ARCHS:
            from mutransfer.errors import UserError

            what = "a factory model" if not cfg.model.builtin else f"arch {arch}"
            raise UserError(f"--input layer0: {what} has no SSM input that dt_init autocorr "
                            f"reads (arch {' or '.join(LAYER0_ARCHS)}); use --input raw, or a "
                            f"config with arch {' or '.join(LAYER0_ARCHS)}")

    def check(self, lengths: list[int]) -> None:
        """Refuse, before the table starts, a length the source cannot give sequences of (a
        corpus shorter than it, a synthetic task that needs longer sequences), and a sample
        too large to hold: each sequence drawn gives `per` sequences to the estimator (layer
        0's channels, or the input's dims), which the limit on values a length counts."""
        from mutransfer.errors import UserError

        for length in lengths:
            try:
                next(self.source.batches("train", 1, length, seed=self.seed))
            except UserError as exc:
                raise UserError(f"--lengths {length}: {exc}") from None
        per = self._sequences_per_sample(lengths[0])
        if lengths[-1] * self.samples * per > MAX_VALUES:
            what = "channels of layer 0" if self.mode == "layer0" else "input dims"
            fit = MAX_VALUES // (lengths[-1] * per)
            hint = (f"--samples up to {fit:,}" if fit else
                    f"--lengths up to {MAX_VALUES // (self.samples * per):,}")
            raise UserError(f"--lengths {lengths[-1]} x --samples {self.samples} x {per} {what}"
                            f": at most {MAX_VALUES:,} values a length (e.g. {hint})")

    def _sequences_per_sample(self, length: int) -> int:
        if self.mode == "raw":
            return self.source.spec.input_dim or 1  # token ids: one sequence
        return self._layer0(self._batch(length)).layers[0].mixer.channels

    def _batch(self, length: int):
        return next(self.source.batches("train", self.samples, length, seed=self.seed))

    def _layer0(self, batch):
        """The config's model, built once (with its init schemes, on the first batch)."""
        if self.model is None:
            import torch

            from mutransfer.models.build import build_model

            torch.manual_seed(self.seed)
            self.model = build_model(self.cfg, self.source.spec, sample=batch)
        return self.model

    def __call__(self, length: int):
        batch = self._batch(length)
        inputs = batch[0]
        if self.mode == "raw":
            x = inputs.double()
            return x.transpose(1, 2).reshape(-1, length) if x.dim() == 3 else x
        from mutransfer.models.data_init import capture_ssm_input

        return capture_ssm_input(self._layer0(batch), 0, inputs)


def _describe(args, mode: str | None) -> str:
    what = {"white": "white noise N(0, 1)", "ar1": f"AR(1), rho {args.rho:g}",
            "constant": f"constant {args.mean:g} + {args.noise:g} N(0, 1)"}.get(args.data)
    if what is None:
        what = f"{args.data} ({mode} inputs)"
    return (f"{what}: {args.samples} sequences per length, estimator {args.estimator}, "
            f"kappa {args.kappa:g}")


def _options_of_the_data(args) -> None:
    """Refuse an option that the --data given does not read (before: ignored, so that
    `--data white --rho 0.5` printed white noise's table, `--data ar1 --input layer0` the raw
    AR(1) one); then set each signal's option that was not given to its default."""
    from mutransfer.errors import UserError

    if args.data == "":  # Path("") is the current folder: was ': not a file'
        raise UserError(f"--data '': give {', '.join(SIGNALS)}, stdlib or a YAML file")
    if args.input is not None and args.data in SIGNALS:
        raise UserError(f"--input {args.input}: only for a data source (stdlib or a YAML "
                        f"file); --data {args.data} is a reference signal, used as it is")
    for option, name, signal, default in SIGNAL_OPTIONS:
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif args.data != signal:
            raise UserError(f"{option}: only for --data {signal}, not --data {args.data}")


def run(args) -> int:
    from mutransfer.errors import UserError
    from mutransfer.init import autocorr, signals

    _options_of_the_data(args)
    lengths = sorted(set(args.lengths))
    if lengths[0] < 2 or args.samples < 1:
        raise UserError("--lengths must be >= 2 and --samples >= 1")
    if lengths[-1] * args.samples > MAX_VALUES:  # a sample of that size: memory, not an answer
        raise UserError(f"--lengths {lengths[-1]} x --samples {args.samples}: at most "
                        f"{MAX_VALUES:,} values a length (e.g. --lengths up to "
                        f"{MAX_VALUES // args.samples:,})")
    for name, value, ok, want in (("--rho", args.rho, abs(args.rho) < 1, "inside (-1, 1)"),
                                  ("--kappa", args.kappa, 0 < args.kappa < math.inf,
                                   "above 0"),
                                  ("--noise", args.noise, 0 <= args.noise < math.inf,
                                   "at least 0"),
                                  ("--mean", args.mean, math.isfinite(args.mean), "")):
        if not ok:  # NaN fails each comparison too; inf gives a table of inf or nan
            raise UserError(f"{name} {value:g}: give a finite number {want}".rstrip())
    if not -2**63 <= args.seed < 2**64:  # torch's generator takes no other
        raise UserError(f"--seed {args.seed}: give a seed from -2**63 to 2**64 - 1")
    if args.data in SIGNALS:
        def draw(length: int):
            return signals.make(args.data, args.samples, length, rho=args.rho,
                                mean=args.mean, noise=args.noise, seed=args.seed)
        mode = None
    else:
        draw = _Sequences(_trial_config(args.data), args.input, args.samples, args.seed)
        draw.check(lengths)
        mode = draw.mode
    print(_describe(args, mode))
    print(f"{'L':>8}  {'lambda_max':>12}  {'delta*':>10}")
    lams, dts = [], []
    for length in lengths:
        lam = autocorr.lambda_max(draw(length), args.estimator)
        dt = autocorr.timescale(lam, length, args.kappa)
        lams.append(lam)
        dts.append(dt)
        print(f"{length:>8}  {lam:>12.4g}  {dt:>10.4g}", flush=True)
    if len(lengths) > 1 and 0 in lams:  # a power law through λ_max = 0 is no number
        print("fitted exponents: none (lambda_max 0: the sequences are zero, and set no "
              "timescale)")
    elif len(lengths) > 1:
        print(f"fitted exponents: lambda_max ~ L^{autocorr.fit_exponent(lengths, lams):.3f}, "
              f"delta* ~ L^{autocorr.fit_exponent(lengths, dts):.3f}")
    return 0
