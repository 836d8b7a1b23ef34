"""No user file is ever evaluated or unpickled: the package source has no eval/exec/compile
calls, imports no pickle-like module, loads no torch checkpoint without weights_only, and reads
YAML only through yaml.safe_load."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mutransfer"
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}
UNSAFE_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}
UNSAFE_YAML = {"load", "load_all", "unsafe_load", "full_load", "unsafe_load_all",
               "full_load_all"}


def findings(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in UNSAFE_CALLS:
                found.append(f"{fn.id}() at line {node.lineno}")
            if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name):
                if fn.value.id == "yaml" and fn.attr in UNSAFE_YAML:
                    found.append(f"yaml.{fn.attr}() at line {node.lineno}")
                if fn.value.id == "torch" and fn.attr == "load" and not any(
                        k.arg == "weights_only" for k in node.keywords):
                    found.append(f"torch.load() without weights_only at line {node.lineno}")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name} at line {node.lineno}" for a in node.names
                      if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in UNSAFE_MODULES:
            found.append(f"from {node.module} import at line {node.lineno}")
    return found


def test_the_scan_catches_what_it_looks_for():
    code = ("import pickle\nimport yaml, torch\neval('1')\nyaml.load(s)\ntorch.load(p)\n"
            "from dill import loads\n")
    assert len(findings(ast.parse(code))) == 5


def test_no_eval_exec_pickle_or_unsafe_yaml_in_the_package():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    bad = {str(p.relative_to(PACKAGE)): f for p in files if (f := findings(ast.parse(
        p.read_text(), filename=str(p))))}
    assert bad == {}
