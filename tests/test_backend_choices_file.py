"""The file where `mutransfer doctor` remembers each device's fastest scan backend
($MUTRANSFER_DATA_DIR/scan_backends.json) is read as nothing when it holds valid JSON that is
not an object: `auto` then runs its default and the doctor writes a fresh one (a `[]` there
crashed every CUDA `auto` scan with an AttributeError, and the doctor with a TypeError)."""

from __future__ import annotations

import json

import pytest
import torch

from mutransfer.ops.backends import CHOICES, device_key, remember, remembered


@pytest.mark.parametrize("content", ["[]", "3", '"chunked"', "null"])
def test_a_file_that_is_no_mapping_is_read_as_no_choice_and_rewritten(
        tmp_path, monkeypatch, content):
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path))
    (tmp_path / CHOICES).write_text(content)
    cpu = torch.device("cpu")
    assert remembered(cpu) is None
    remember(cpu, "chunked")
    assert json.loads((tmp_path / CHOICES).read_text()) == {device_key(cpu): "chunked"}
    assert remembered(cpu) == "chunked"


def test_a_choice_that_is_no_name_is_no_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path))
    cpu = torch.device("cpu")
    (tmp_path / CHOICES).write_text(json.dumps({device_key(cpu): ["triton"]}))
    assert remembered(cpu) is None
