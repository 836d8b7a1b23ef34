"""Layers import only downward, as a program sees it: importing a module loads none above it.

The full layering is the import-linter contracts in pyproject.toml (`lint-imports`, run by
.ci/run); these check the moves that made it hold, in a fresh interpreter each.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", ["mutransfer.sweep.plan.cells", "mutransfer.config"])
def test_reading_a_sweep_plan_or_a_trial_config_loads_no_model_code_and_no_torch(module):
    loaded = _loaded_after_import(module)
    assert "mutransfer.models" not in loaded
    assert "torch" not in loaded


@pytest.mark.parametrize("module", ["mutransfer.init.memory", "mutransfer.init.signals"])
def test_init_estimators_load_no_model_code(module):
    assert "mutransfer.models" not in _loaded_after_import(module)


def test_every_layering_contract_in_pyproject_holds():
    """The README's test command checks the layering too (.ci/run also runs `lint-imports`)."""
    pytest.importorskip("importlinter", reason="import-linter (the dev extra) checks the contracts")
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(no_cache=True))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
