"""Security: servers bind 127.0.0.1, landing-folder names cannot escape, configuration values
stay plain strings that nothing executes, and a saved folder's ``meta.json`` names only regular
files inside the folder. (No unpickling or shell anywhere: ``test_security_scan.py``.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from xmc_core.app.cli import _parser, main
from xmc_core.config import XmcConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.intake.landing import (
    examine,
    ingest_drop,
    scan_drops,
)
from xmc_core.intake.quarantine import archive, quarantine, safe_name

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
LINES_OK = {
    "train_texts.txt": "one\ntwo\n",
    "train_labels.txt": "a\na,b\n",
    "test_texts.txt": "three\n",
    "test_labels.txt": "b\n",
}
SERVER_COMMANDS = re.compile(
    r"(prefect server start|mlflow server|mlflow ui|mlflow models serve|xmc serve|uvicorn"
    r"|dask scheduler|dask worker)"
)


# --- servers bind 127.0.0.1


def test_xmc_serve_binds_localhost_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import xmc_core.serving.http

    args = _parser().parse_args(["serve", "models:/xmc-synthetic@champion"])
    assert not hasattr(args, "host")  # the CLI passes only what the user gave
    assert XmcConfig().serve.host == "127.0.0.1"  # the one default
    bound: list[tuple[str, int]] = []
    monkeypatch.setattr(
        xmc_core.serving.http,
        "serve",
        lambda _m, _c, host, port, *a, **k: bound.append((host, port)),
    )
    assert main(["serve", "models:/xmc-synthetic@champion"]) == 0
    assert main(["serve", "models:/xmc-synthetic@champion", "--set", "serve.port=6006"]) == 0
    assert bound == [("127.0.0.1", 5005), ("127.0.0.1", 6006)]


def _commands(text: str, markdown: bool) -> list[str]:
    """Shell commands of a file, whitespace collapsed: in Markdown the lines of code blocks
    (continuations joined) and the inline code spans, elsewhere every line."""
    text = text.replace("\\\n", " ")
    if markdown:
        blocks = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        lines = [line for block in blocks for line in block.splitlines()]
        lines += re.findall(r"`([^`]+)`", prose)
    else:
        lines = text.splitlines()
    return [" ".join(c.split()) for c in lines]


DOC_PAGES = sorted(  # the generated reference/ holds --help text (`--host HOST`), not commands
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.parts
)


@pytest.mark.parametrize(
    "name", ["README.md", "prefect.yaml", "Makefile", "BENCHMARKS.md", *DOC_PAGES]
)
def test_documented_servers_bind_localhost(name: str) -> None:
    path = ROOT / name
    if not path.is_file():
        pytest.skip(f"no {name}")
    text = path.read_text(encoding="utf-8")
    assert "0.0.0.0" not in text and "--host ::" not in text
    servers = [c for c in _commands(text, name.endswith(".md")) if SERVER_COMMANDS.search(c)]
    for command in servers:
        hosts = re.findall(r"(?:--host[ =]|(?<!\S)-h )(\S+)", command)
        assert all(h.strip("`'\"") in ("127.0.0.1", "localhost") for h in hosts), command
        if "xmc serve" not in command:  # its default is checked above
            assert hosts, f"{name}: no --host 127.0.0.1 in {command}"
    if name == "docs/lifecycle/registry.md":  # the lifecycle's commands (once the README's)
        assert len(servers) >= 4  # prefect, mlflow server/ui/models serve, xmc serve


# --- landing-folder names cannot escape


def make_drop(landing: Path, name: str, files: dict[str, str]) -> Path:
    folder = landing / name
    folder.mkdir(parents=True)
    for fname, content in files.items():
        (folder / fname).write_text(content)
    return folder


def test_a_drop_named_dot_dot_or_with_a_separator_is_refused(tmp_path: Path) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    make_drop(outside, "stolen", LINES_OK)
    landing.mkdir()
    root = landing.resolve()
    for name in ("..", ".", "", "../outside", "../outside/stolen", "a/../../outside", "x\\..\\y"):
        drop = examine(root, name)
        assert not drop.ok, name
        assert drop.problem is not None and "fix:" in str(drop.problem)
    assert (outside / "stolen" / "train_texts.txt").is_file()  # never moved nor read


def test_links_to_system_folders_are_refused_and_never_followed(tmp_path: Path) -> None:
    landing, qdir = tmp_path / "landing", tmp_path / "quarantine"
    landing.mkdir()
    os.symlink("/etc", landing / "etc")
    os.symlink("/", landing / "root")
    drop = make_drop(landing, "inside", LINES_OK)
    os.symlink("../../../../../../etc/passwd", drop / "train_ids.txt")  # relative escape
    hop = make_drop(landing, "hop", LINES_OK)
    os.symlink(drop / "train_texts.txt", hop / "inner.txt")  # into another drop
    sneaky = make_drop(landing, "sneaky", LINES_OK)
    (sneaky / "sub").mkdir()
    os.symlink("/etc", sneaky / "sub" / "cfg")  # a linked folder deeper down
    loop = make_drop(landing, "loop", LINES_OK)
    os.symlink(".", loop / "self")  # a loop that stays inside: allowed, and the walk ends
    found = {d.name: d for d in scan_drops(landing)}
    for name in ("etc", "root"):
        assert "symbolic link" in str(found[name].problem)
    for name in ("inside", "hop", "sneaky"):
        assert "outside the drop" in str(found[name].problem), name
    assert found["loop"].ok
    moved = quarantine(found["etc"].path, qdir, str(found["etc"].problem))
    assert (moved / "etc").is_symlink() and Path("/etc").is_dir()  # the link moved, not /etc


def test_a_drop_swapped_for_a_link_after_the_scan_is_refused(tmp_path: Path) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    make_drop(outside, "elsewhere", LINES_OK)
    make_drop(landing, "week1", LINES_OK)
    (drop,) = scan_drops(landing)
    assert drop.ok
    (landing / "week1").rename(tmp_path / "gone")
    os.symlink(outside / "elsewhere", landing / "week1")  # the folder becomes a link
    with pytest.raises(InputError, match="symbolic link"):
        ingest_drop(drop, tmp_path / "ingested")
    assert not (tmp_path / "ingested").exists()


@pytest.mark.parametrize(
    "name",
    ["..", "...", "../../etc", "a/b", "x\\..\\y", ".hidden", "REASON.txt", "tab\there", "é" * 100],
)
def test_quarantine_and_archive_names_stay_inside_their_folder(tmp_path: Path, name: str) -> None:
    cleaned = safe_name(name)
    assert "/" not in cleaned and "\\" not in cleaned and ".." not in cleaned
    assert cleaned and not cleaned.startswith(".") and len(cleaned.encode()) <= 128
    if "/" in name or name in ("..", "."):
        return  # no such entry can exist in a folder
    landing, qdir, adir = tmp_path / "landing", tmp_path / "quarantine", tmp_path / "archive"
    landing.mkdir()
    (landing / name).write_text("x")
    folder = quarantine(landing / name, qdir, "test")
    assert folder.parent == qdir and [p.read_text() for p in folder.iterdir()].count("x") == 1
    assert "test" in (folder / "REASON.txt").read_text()  # never replaced by the entry
    (landing / name).mkdir()
    folder = archive(landing / name, adir)
    assert folder.parent == adir and len(list(folder.iterdir())) == 1


# --- configuration values are plain strings that nothing executes

NASTY = [
    "; rm -rf / #", "$(touch canary)", "`touch canary`", "| touch canary", "&& touch canary",
    "\n touch canary", "' ; touch canary ; '", "canary\"; touch canary; echo \"",
]  # fmt: skip


def test_unknown_config_keys_are_rejected() -> None:
    for override in ("nonsense=1", "tfidf.nonsense=1", "tracking.uri.deep=1", "data=3"):
        with pytest.raises(InputError, match=r"does not exist|must be|must hold keys"):
            XmcConfig.load(None, [override])


def test_config_yaml_cannot_construct_python_objects(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f'work_dir: !!python/object/apply:os.system ["touch {canary}"]\n')
    drop = make_drop(tmp_path / "landing", "drop", LINES_OK)
    (drop / "drop.yaml").write_text(f'format: !!python/object/apply:os.system ["touch {canary}"]')
    (found,) = scan_drops(tmp_path / "landing")
    assert "cannot be parsed" in str(found.problem)
    with pytest.raises(InputError, match="not valid YAML"):
        XmcConfig.load(cfg)
    with pytest.raises(InputError, match="override"):
        XmcConfig.load(None, [f'work_dir=!!python/object/apply:os.system ["touch {canary}"]'])
    with pytest.raises(InputError, match="override"):
        XmcConfig.load(None, ["work_dir=[unclosed"])
    assert not canary.exists()


def test_shell_metacharacters_stay_literal_paths_and_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xmc_core.serving.tracking import flatten_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for value in NASTY:
        quoted = yaml.safe_dump(value, default_style='"').strip()
        cfg = XmcConfig.load(
            None,
            [
                f"work_dir={quoted}",
                f"data.dataset={quoted}",
                f"tracking.run_name={quoted}",
                f"tracking.experiment={quoted}",
            ],
        )
        assert cfg.work_dir == Path(value) and cfg.data.dataset == Path(value)
        params = flatten_config(cfg)
        assert params["tracking.run_name"] == value == params["tracking.experiment"]
        assert params["work_dir"] == str(Path(value)) == params["data.dataset"]
        assert cfg.tracking_uri() == f"sqlite:///{Path(value).resolve() / 'mlflow' / 'mlflow.db'}"
    assert not (tmp_path / "canary").exists()


def _xmc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "xmc_core.app.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_cli_treats_shell_metacharacters_as_plain_paths(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    weird = tmp_path / "data; touch canary $(touch canary) `touch canary` | touch canary"
    made = _xmc("synth", str(weird), "--scale", "0.01", "--rows-per-group", "100", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert weird.is_dir() and (weird / "manifest.json").is_file()  # a folder of that very name
    dumped = _xmc("dump-config", "--set", "tracking.run_name=$(touch canary)", cwd=tmp_path)
    assert dumped.returncode == 0 and "$(touch canary)" in dumped.stdout
    missing = _xmc("evaluate", str(weird / "no model; ls"), str(weird), cwd=tmp_path)
    assert missing.returncode == 2 and "error:" in missing.stderr
    assert "Traceback" not in missing.stderr and "no model; ls" in missing.stderr
    assert not canary.exists()


# --- a saved folder's meta.json lists only regular files inside the folder


def _listed_out(folder: Path, secret: Path) -> dict[str, tuple[str, str | None]]:
    """Entries a hostile ``meta.json`` lists -> (what the refusal says, the digest to list;
    None: the real one of the file the entry reaches)."""
    (folder / "link.txt").symlink_to(secret)
    os.mkfifo(folder / "pipe")
    (folder / "sub").mkdir()
    return {
        os.path.relpath(secret, folder): ("outside the folder", None),  # ../secret.txt
        str(secret): ("outside the folder", None),
        "link.txt": ("outside the folder", None),
        "/proc/self/pagemap": ("outside the folder", "0" * 64),  # endless to hash
        "pipe": ("a FIFO (named pipe)", "0" * 64),  # opening it for reading waits for a writer
        "sub": ("a folder", "0" * 64),
    }


def test_meta_json_cannot_list_a_file_outside_its_folder_or_a_special_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before any byte is hashed: ``../../etc/hostname`` with its real sha256 loaded
    (and was served), ``/proc/self/pagemap`` hung the load."""
    from xmc_core.storage import artifacts

    secret, folder = tmp_path / "secret.txt", tmp_path / "thing"
    secret.write_text("not part of the model\n")
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    artifacts.write_meta(folder, "Thing", {"n": 1})
    hashed: list[str] = []
    real_hash, inside = artifacts.sha256_file, os.path.realpath(folder)

    def hash_inside(path: Path) -> str:
        hashed.append(os.path.realpath(path))
        assert hashed[-1].startswith(f"{inside}/"), f"hashed {path}, outside the folder"
        return real_hash(path)

    monkeypatch.setattr(artifacts, "sha256_file", hash_inside)
    meta = json.loads((folder / "meta.json").read_text())
    listed = _listed_out(folder, secret)
    listed["parts"] = ("outside the folder", None)  # a part "../" beside the folder
    for name, (why, digest) in listed.items():
        if name == "parts":
            (tmp_path / "meta.json").write_text("{}")
            edited = meta | {"parts": {"..": real_hash(tmp_path / "meta.json")}}
        else:
            edited = meta | {"files": meta["files"] | {name: digest or real_hash(secret)}}
        (folder / "meta.json").write_text(json.dumps(edited))
        with pytest.raises(ArtifactError) as excinfo:
            artifacts.read_meta(folder, "Thing")
        message = str(excinfo.value)
        assert why in message and "fix:" in message, (name, message)
    assert hashed == []  # every entry is checked before the first is hashed
    (tmp_path / "meta.json").write_text(json.dumps(meta))  # another folder's, or worse
    (folder / "meta.json").unlink()
    (folder / "meta.json").symlink_to(tmp_path / "meta.json")
    with pytest.raises(ArtifactError, match="outside the folder"):
        artifacts.read_meta(folder, "Thing")
    (folder / "meta.json").unlink()
    (folder / "meta.json").write_text(json.dumps(meta))
    assert artifacts.read_meta(folder, "Thing")["n"] == 1
    assert hashed == [f"{inside}/a.txt"]
