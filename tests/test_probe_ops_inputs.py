"""What the scan and SSD entry points refuse: every backend the same arguments, as the
`triton` backend always checked them; nothing broadcast, cast or left to fail inside."""

from __future__ import annotations

import pytest
import torch

from mutransfer.ops.scan import selective_scan
from mutransfer.ops.ssd import ssd_scan

BATCH, DIM, N, L = 2, 3, 2, 5


def scan_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return dict(u=torch.randn(BATCH, DIM, L, generator=g),
                delta=torch.rand(BATCH, DIM, L, generator=g),
                A=-torch.rand(DIM, N, generator=g), B=torch.randn(BATCH, N, L, generator=g),
                C=torch.randn(BATCH, N, L, generator=g))


SCAN_CASES = {
    # the real part only, silently (the chunked backend without even a warning)
    "complex A": (dict(A=torch.complex(-torch.rand(DIM, N), torch.randn(DIM, N))), "A must"),
    # ran forward, then the chunked backward failed on the shapes
    "batch-1 B": (dict(B=torch.randn(1, N, L)), "B must"),
    "batch-1 delta": (dict(delta=torch.rand(1, DIM, L)), "u and delta"),
    "one-element D": (dict(D=torch.randn(1)), "D must"),
    # an empty output from chunked, a crash in the reference
    "L = 0": (dict(u=torch.randn(BATCH, DIM, 0), delta=torch.rand(BATCH, DIM, 0),
                   B=torch.randn(BATCH, N, 0), C=torch.randn(BATCH, N, 0)), "L >= 1"),
    # the output came back as integers (the float result truncated)
    "integer u": (dict(u=torch.randint(0, 3, (BATCH, DIM, L))), "u must be a real"),
}


@pytest.mark.parametrize("backend", ["reference", "chunked"])
@pytest.mark.parametrize("case", list(SCAN_CASES))
def test_scan_backends_refuse_what_the_triton_backend_refuses(backend, case):
    change, needle = SCAN_CASES[case]
    inputs = {**scan_inputs(), **change}
    with pytest.raises(ValueError, match=needle):
        selective_scan(**inputs, backend=backend)


B_, L_, H_, P_, G_, N_ = 2, 7, 4, 3, 2, 5


def ssd_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return dict(x=torch.randn(B_, L_, H_, P_, generator=g), dt=torch.randn(B_, L_, H_, generator=g),
                A=-torch.rand(H_, generator=g) - 0.5, B=torch.randn(B_, L_, G_, N_, generator=g),
                C=torch.randn(B_, L_, G_, N_, generator=g), D=torch.randn(H_, generator=g),
                dt_bias=torch.randn(H_, generator=g))


SSD_CASES = {
    # C grouped differently from B: the references repeated each to the heads on its own
    "C with other groups than B": (dict(C=torch.randn(B_, L_, 1, N_)), "B and C"),
    # broadcast silently by every backend
    "dt of one head": (dict(dt=torch.randn(B_, L_, 1)), "dt must"),
    "one-element A": (dict(A=-torch.rand(1)), "A must"),
    "one-element D": (dict(D=torch.randn(1)), "D must"),
    # the imaginary part dropped with a warning
    "complex A": (dict(A=torch.complex(-torch.rand(H_), torch.rand(H_))), "A must be a real"),
    # the output came back as integers
    "integer x": (dict(x=torch.randint(0, 3, (B_, L_, H_, P_))), "x must be a real"),
    # ZeroDivisionError in the chunked backend, ignored by the others
    "chunk_size 0": (dict(chunk_size=0), "chunk_size"),
    "L = 0": (dict(x=torch.randn(B_, 0, H_, P_), dt=torch.randn(B_, 0, H_),
                   B=torch.randn(B_, 0, G_, N_), C=torch.randn(B_, 0, G_, N_)), "L >= 1"),
}


@pytest.mark.parametrize("backend", ["chunked", "reference", "quadratic"])
@pytest.mark.parametrize("case", list(SSD_CASES))
def test_ssd_scan_refuses_misshapen_arguments_on_every_backend(backend, case):
    change, needle = SSD_CASES[case]
    inputs = {**ssd_inputs(), **change}
    with pytest.raises(ValueError, match=needle):
        ssd_scan(**inputs, backend=backend)


def test_ssd_scan_still_takes_a_numpy_integer_chunk_size():
    np = pytest.importorskip("numpy")
    y = ssd_scan(**ssd_inputs(), chunk_size=np.int64(4))
    assert y.shape == (B_, L_, H_, P_)
