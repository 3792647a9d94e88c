"""Module closures and the code fingerprints of stages built on them."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import xmc_core
from xmc_core.storage.code_closure import imported_modules, module_closure
from xmc_core.storage.fingerprint import closure_fingerprint, code_fingerprint, combine, forget_code

PKG = "xmcfakeclosure"
ROOTS = (PKG,)

# A tiny package: ``a`` imports ``b`` (which imports ``a`` back: a cycle), a submodule and an
# attribute by ``from``, relative imports at two levels, a lazy import inside a function,
# third-party and standard modules, and modules only under TYPE_CHECKING (never run).
FILES = {
    "__init__.py": '"""The package."""\n',
    "a.py": (
        "from __future__ import annotations\n"
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "import numpy as np\n"
        "from numpy import linalg\n"
        f"from {PKG} import b\n"
        f"from {PKG}.c import VALUE\n"
        "from . import d\n"
        "from .sub import thing\n"
        "if TYPE_CHECKING:\n"
        f"    from {PKG} import typing_only\n"
        "else:\n"
        f"    from {PKG} import runtime_else\n"
        "def f():\n"
        f"    from {PKG}.sub import lazy\n"
        "    return lazy\n"
    ),
    "b.py": (
        f"import typing\nimport {PKG}.a\nif typing.TYPE_CHECKING:\n    import {PKG}.typing_only\n"
    ),
    "c.py": '"""Holds a constant."""\nVALUE = 1\n',
    "d.py": f"import {PKG}.sub.deep\n",
    "sub/__init__.py": "thing = 1\n",
    "sub/lazy.py": "",
    "sub/deep.py": "from ..c import VALUE\nfrom ... import nothing_beyond_the_top\n",
    "typing_only.py": "",
    "runtime_else.py": "",
    "unused.py": '"""Imported by nobody."""\n',
}
CLOSURE_OF_A = {
    PKG,
    f"{PKG}.a",
    f"{PKG}.b",
    f"{PKG}.c",
    f"{PKG}.d",
    f"{PKG}.sub",
    f"{PKG}.sub.lazy",
    f"{PKG}.sub.deep",
    f"{PKG}.runtime_else",
}


@pytest.fixture
def fake_pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The package written under ``tmp_path``, which is put first on ``sys.path``."""
    for rel, text in FILES.items():
        path = tmp_path / PKG / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_code()
    yield tmp_path / PKG
    forget_code()


def test_closure_follows_every_import_that_runs(fake_pkg: Path) -> None:
    assert module_closure(f"{PKG}.a", ROOTS) == CLOSURE_OF_A


def test_from_import_of_an_attribute_is_its_module_of_a_submodule_both(fake_pkg: Path) -> None:
    found = imported_modules(f"{PKG}.a")
    assert {f"{PKG}.c", f"{PKG}.b", f"{PKG}.d", f"{PKG}.sub", f"{PKG}.sub.lazy"} <= found
    assert f"{PKG}.c.VALUE" not in found and f"{PKG}.sub.thing" not in found
    assert f"{PKG}.typing_only" not in found  # under TYPE_CHECKING
    # the relative import beyond the top-level package cannot run: it is dropped
    assert imported_modules(f"{PKG}.sub.deep") == {f"{PKG}.c"}


def test_closure_skips_type_checking_third_party_and_unused(fake_pkg: Path) -> None:
    closure = module_closure(f"{PKG}.a", ROOTS)
    assert "numpy" in imported_modules(f"{PKG}.a") and "json" in imported_modules(f"{PKG}.a")
    assert all(name.split(".")[0] == PKG for name in closure)  # numpy, json: not followed
    assert f"{PKG}.typing_only" not in closure  # both `TYPE_CHECKING` and `typing.TYPE_CHECKING`
    assert f"{PKG}.unused" not in closure


def test_closures_look_up_only_their_roots_one_thread_at_a_time(
    fake_pkg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The predict flow's partition tasks key themselves at once, in threads (a race there
    once cost a cached result in CI): the closures are found one thread at a time, and no
    third-party name (``from numpy import linalg``) goes through the import system."""
    real, guard = importlib.util.find_spec, threading.Lock()
    looked_up: list[str] = []
    inside = [0, 0]  # now, most

    def slow_find_spec(name: str, package: str | None = None) -> object:
        with guard:
            looked_up.append(name)
            inside[0] += 1
            inside[1] = max(inside)
        time.sleep(0.02)
        with guard:
            inside[0] -= 1
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", slow_find_spec)
    with ThreadPoolExecutor(4) as pool:
        prints = set(pool.map(lambda _: closure_fingerprint(f"{PKG}.a", roots=ROOTS), range(8)))
    assert len(prints) == 1 and set(looked_up) == {PKG} and inside[1] == 1


def test_cycles_end_and_every_member_has_the_same_closure(fake_pkg: Path) -> None:
    assert module_closure(f"{PKG}.b", ROOTS) == CLOSURE_OF_A
    assert module_closure(f"{PKG}.sub.deep", ROOTS) == {
        PKG,
        f"{PKG}.sub",
        f"{PKG}.sub.deep",
        f"{PKG}.c",
    }


def test_unknown_module_is_an_error(fake_pkg: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="nope"):
        module_closure(f"{PKG}.nope", ROOTS)


def test_fingerprint_hashes_version_paths_and_bytes(fake_pkg: Path) -> None:
    h = hashlib.sha256(xmc_core.__version__.encode())
    for rel in ("__init__.py", "c.py"):  # the closure of c, sorted by path
        data = (fake_pkg / rel).read_bytes()
        h.update(f"\0{PKG}/{rel}\0{len(data)}\0".encode() + data)
    assert closure_fingerprint(f"{PKG}.c", roots=ROOTS) == h.hexdigest()


def test_only_edits_inside_the_closure_change_the_fingerprint(fake_pkg: Path) -> None:
    before = closure_fingerprint(f"{PKG}.a", roots=ROOTS)
    for outside in ("unused.py", "typing_only.py"):
        (fake_pkg / outside).write_text('"""Edited docstring."""\n', encoding="utf-8")
        forget_code()
        assert closure_fingerprint(f"{PKG}.a", roots=ROOTS) == before
    (fake_pkg / "c.py").write_text('"""Edited docstring."""\nVALUE = 1\n', encoding="utf-8")
    assert closure_fingerprint(f"{PKG}.a", roots=ROOTS) == before  # cached for the process
    forget_code()
    assert closure_fingerprint(f"{PKG}.a", roots=ROOTS) != before


def test_union_of_closures(fake_pkg: Path) -> None:
    union = closure_fingerprint(f"{PKG}.c", f"{PKG}.unused", roots=ROOTS)
    assert union != closure_fingerprint(f"{PKG}.c", roots=ROOTS)
    assert union == closure_fingerprint(f"{PKG}.unused", f"{PKG}.c", roots=ROOTS)


def test_featurize_closure_holds_the_tokenizer_not_the_http_server() -> None:
    closure = module_closure("xmc_core.families.featurize")
    assert {"xmc_core.features.tokenizer", "xmc_core.config"} <= closure
    assert "xmc_core.serving.http" not in closure
    assert "xmc_core.transformer.encoder" not in closure  # no torch for TF-IDF stages
    assert closure_fingerprint("xmc_core.families.featurize") != code_fingerprint()


def test_graph_stages_and_lifecycle_stages_key_on_their_own_closure() -> None:
    from tasks.stage_task import artifact_key
    from xmc_core.families.featurize import SPLIT
    from xmc_core.lifecycle.predict import ASSEMBLE
    from xmc_core.stages.keys import stage_code

    code = closure_fingerprint("xmc_core.families.featurize")
    assert stage_code(SPLIT.fn) == code
    want = combine("split", code, [["parts", []], ["split", "train"]])[:32]
    assert artifact_key(SPLIT, {"parts": [], "split": "train"}) == want
    lifecycle = closure_fingerprint("xmc_core.lifecycle.predict")
    want = combine("predictions", lifecycle, [["parts", []]])[:32]
    assert artifact_key(ASSEMBLE, {"parts": []}) == want  # batch prediction: the same scheme


NESTED = """
import m0
def f():
    import m1
    class C:
        import m2
        async def g(self):
            async with x:
                import m3
            async for _ in y:
                pass
            else:
                import m4
try:
    import m5
except ImportError:
    import m6
else:
    import m7
finally:
    import m8
for _ in z:
    import m9
else:
    import m10
while w:
    import m11
else:
    import m12
with open(p) as h:
    import m13
match v:
    case 1:
        import m14
    case _:
        if c:
            from m15 import q
        elif TYPE_CHECKING:
            import never
        else:
            import m16
lam = lambda: __import__("not_a_statement")
"""


def test_imports_are_found_in_every_kind_of_statement_list() -> None:
    """Imports are statements: every body, branch, handler and case holds some; none is lost
    by walking only statement lists."""
    from xmc_core.storage.code_closure import _runtime_imports

    found = set()
    for node in _runtime_imports(ast.parse(NESTED)):
        found |= {node.module} if isinstance(node, ast.ImportFrom) else {a.name for a in node.names}
    assert found == {f"m{i}" for i in range(17)}
