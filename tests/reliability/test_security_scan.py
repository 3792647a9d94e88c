"""Security: no module of the library, the tasks or the flows unpickles, runs a shell or executes
text (an AST scan, checked against each unsafe pattern and the safe forms)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("xmc_core", "tasks", "flows")
UNSAFE_MODULES = ("pickle", "_pickle", "cPickle", "cloudpickle", "dill", "joblib", "shelve")
SHELL_CALLS = {
    ("os", "system"), ("os", "popen"), ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"), ("pd", "read_pickle"), ("pandas", "read_pickle"),
    ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("marshal", "loads"),
}  # fmt: skip
SUBPROCESS_CALLS = {"run", "call", "check_call", "check_output", "Popen"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def unsafe_calls(source: str) -> list[str]:
    """What in ``source`` could unpickle, run a shell or execute text, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
                if node.module in ("os", "subprocess", "torch", "yaml", "numpy"):
                    names += [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] in UNSAFE_MODULES or tuple(name.split(".")) in SHELL_CALLS:
                    found.append(f"{line}: imports {name}")
                if name in ("torch.load", "numpy.load"):
                    found.append(f"{line}: imports {name} by name (call it as a module attribute)")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        parts = tuple(name.split("."))
        if parts[-2:] in SHELL_CALLS or name in ("eval", "exec", "compile", "__import__"):
            found.append(f"{line}: calls {name}")
        if name in ("np.load", "numpy.load") and not (
            _keyword(node, "allow_pickle") is None
            or _is_const(_keyword(node, "allow_pickle"), False)
        ):
            found.append(f"{line}: {name} with allow_pickle")
        if name == "torch.load" and not _is_const(_keyword(node, "weights_only"), True):
            found.append(f"{line}: torch.load without weights_only=True")
        if parts[0] == "subprocess" and parts[-1] in SUBPROCESS_CALLS:
            shell = _keyword(node, "shell")
            if shell is not None and not _is_const(shell, False):
                found.append(f"{line}: {name} with shell")
            if node.args and isinstance(node.args[0], ast.Constant | ast.JoinedStr | ast.BinOp):
                found.append(f"{line}: {name} given a command string, not an argument list")
        if _is_const(_keyword(node, "trust_remote_code"), True):
            found.append(f"{line}: {name} with trust_remote_code=True")
    return found


def test_no_module_unpickles_runs_a_shell_or_executes_text() -> None:
    offenders = []
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 40
    for path in files:
        offenders += [
            f"{path.relative_to(ROOT)}:{hit}"
            for hit in unsafe_calls(path.read_text(encoding="utf-8"))
        ]
    assert offenders == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import pickle", "imports pickle"),
        ("import cloudpickle as cp", "imports cloudpickle"),
        ("from joblib import load", "imports joblib"),
        ("import dill.settings", "imports dill.settings"),
        ("import numpy as np\nnp.load(p, allow_pickle=True)", "np.load with allow_pickle"),
        ("import numpy\nnumpy.load(p, allow_pickle=flag)", "numpy.load with allow_pickle"),
        ("import torch\ntorch.load(p)", "torch.load without weights_only=True"),
        ("import torch\ntorch.load(p, weights_only=False)", "torch.load without weights_only"),
        ("from torch import load", "imports torch.load by name"),
        ("import subprocess\nsubprocess.run(cmd, shell=True)", "subprocess.run with shell"),
        ("import subprocess\nsubprocess.Popen('ls -l')", "given a command string"),
        ("import subprocess\nsubprocess.check_output(f'ls {x}')", "given a command string"),
        ("import os\nos.system('ls')", "calls os.system"),
        ("import os\nos.popen('ls')", "calls os.popen"),
        ("from os import system", "imports os.system"),
        ("import subprocess\nsubprocess.getoutput('ls')", "calls subprocess.getoutput"),
        ("import yaml\nyaml.load(text, Loader=yaml.Loader)", "calls yaml.load"),
        ("eval(text)", "calls eval"),
        ("exec(text)", "calls exec"),
        ("m.from_pretrained(p, trust_remote_code=True)", "trust_remote_code=True"),
    ],
)
def test_the_scan_catches_each_unsafe_pattern(source: str, expected: str) -> None:
    assert any(expected in hit for hit in unsafe_calls(source)), unsafe_calls(source)


def test_the_scan_accepts_the_safe_forms() -> None:
    safe = (
        "import numpy as np\nimport subprocess\nimport torch\nimport yaml\n"
        "np.load(p, allow_pickle=False)\nnp.load(p)\ntorch.load(p, weights_only=True)\n"
        "subprocess.run(['git', 'status'], shell=False)\nyaml.safe_load(text)\nmodel.eval()\n"
    )
    assert unsafe_calls(safe) == []
