"""The reference (state-spaces/mamba) state-dict layout, with unusual inputs: an untied
reference loaded as tied is refused instead of silently losing its readout, and a Mamba-2
model's state round-trips."""

from __future__ import annotations

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.models.checkpoint import from_reference, to_reference

TINY = {"n_layer": 1, "d_state": 4, "base_width": 16}


def model(width: int = 32, **fields):
    cfg = TrialConfig.model_validate({"width": width, "model": {**TINY, **fields}})
    torch.manual_seed(0)
    return build_model(cfg, load_data(cfg.data).spec)


def test_an_untied_reference_loaded_as_tied_is_refused():
    ref = to_reference(model(tie_embeddings=False).state_dict(), tied=False)
    with pytest.raises(ValueError, match="tied=False"):
        from_reference(ref, d_state=4)


def test_an_untied_reference_loads_untied_with_the_same_outputs():
    untied = model(tie_embeddings=False)
    other = model(tie_embeddings=False)
    for p in other.parameters():
        torch.nn.init.normal_(p)
    other.load_state_dict(from_reference(to_reference(untied.state_dict(), tied=False),
                                         d_state=4, tied=False))
    ids = torch.randint(0, 256, (2, 5))
    assert torch.equal(other(ids), untied(ids))


def test_a_mamba2_state_round_trips_through_to_and_from_reference():
    fields = {"arch": "mamba2", "base_width": 64, "mamba2": {"headdim": 16}}
    m2 = model(64, **fields)
    back = from_reference(to_reference(m2.state_dict()), d_state=4)
    assert not any(k.endswith("A_zero") for k in back)
    other = model(64, **fields)
    other.load_state_dict(back)
    ids = torch.randint(0, 256, (2, 5))
    assert torch.equal(other(ids), m2(ids))
