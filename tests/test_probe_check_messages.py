"""A check file's refusals name the check file's own fields, inside the message too: a seed or
LR given twice in check.seeds / check.lr is "check.seeds[2]: 1 repeats check.seeds[1]", not
"... repeats axes.seed[1]" (the transfer stage's sweep field, which the file does not have)."""

from __future__ import annotations

import pytest
import yaml

from mutransfer.cli import main
from tests.test_bad_input_commands import CHECK


@pytest.mark.parametrize("field,value,says", [
    ("seeds", [3, 1, 1], "check.seeds[2]: 1 repeats check.seeds[1]"),
    ("lr", [0.01, 0.02, 0.01], "check.lr[2]: 0.01 repeats check.lr[0]")])
def test_a_value_given_twice_is_named_in_the_check_files_terms(tmp_path, capsys, field, value,
                                                               says):
    doc = yaml.safe_load(yaml.safe_dump(CHECK))
    doc["check"][field] = value
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "axes." not in err, err
