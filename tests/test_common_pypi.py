"""D_c from packages: requirements parsing, the ranking file, wheel/sdist extraction,
the download cache (resume), the build with provenance, the CLI and the lookup's
``package`` field. pip is replaced by a fake that copies archives made here."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

import indexer.pypi as pypi
from fastcoder.datastore import TokenDatastore
from fastcoder.errors import FastCoderError
from fastcoder.models import tokenizer_fingerprint
from indexer.common import build_common_from_packages
from indexer.packages import package_from_tree
from indexer.pypi import Requirement, extract_py, fetch_packages, load_top, parse_requirements
from test_indexer_support import isolated_cache, phrase, write  # noqa: F401 - fixture


# ------------------------------------------------------------------------------ requirements


def test_parse_requirements(tmp_path, caplog):
    write(tmp_path / "base.txt", "six==1.16.0\nrequests>=2.0  # http\n")
    req = write(
        tmp_path / "requirements.txt",
        "\n".join([
            "# a comment",
            "-r base.txt",
            "--index-url https://example.invalid/simple",
            "-e .",
            "-e git+https://example.invalid/x.git#egg=x",
            "Flask[async] == 3.0.0",
            "urllib3>=1.26,<3 ; python_version >= '3.8'",
            "pywin32==306; sys_platform == 'win32'",
            "attrs \\",
            "  ~=23.1",
            "./local/pkg",
            "somepkg @ https://example.invalid/somepkg.whl",
            "https://example.invalid/x.tar.gz",
            "six==9.9",  # duplicate: the first wins
            "zope.interface",
            "bad spec !!",
        ])
        + "\n",
    )
    with caplog.at_level("INFO"):
        reqs = parse_requirements(req)
    assert reqs == [
        Requirement("six", "==1.16.0"),
        Requirement("requests", ">=2.0"),
        Requirement("Flask", "==3.0.0"),
        Requirement("urllib3", ">=1.26,<3"),
        Requirement("attrs", "~=23.1"),
        Requirement("zope.interface", ""),
        Requirement("bad", ""),
    ]
    assert reqs[0].pinned == "1.16.0" and reqs[1].pinned is None
    assert "URL or a local path" in caplog.text and "editable" in caplog.text
    with pytest.raises(FastCoderError):
        parse_requirements(tmp_path / "missing.txt")


def test_requirements_include_cycle(tmp_path):
    write(tmp_path / "a.txt", "-r b.txt\nalpha==1\n")
    write(tmp_path / "b.txt", "-r a.txt\nbeta==2\n")
    assert [r.name for r in parse_requirements(tmp_path / "a.txt")] == ["beta", "alpha"]


def test_ranking_file_is_well_formed():
    reqs = load_top()
    assert len(reqs) >= 300 and all(r.pinned for r in reqs)
    assert len({pypi.normalize(r.name) for r in reqs}) == len(reqs)
    assert [r.name for r in load_top(n=3)] == [r.name for r in reqs[:3]]
    data = json.loads((Path(pypi.__file__).parent / "data" / "pypi_top.json").read_text())
    assert data["source"] and data["date"] and "comment" in data
    with pytest.raises(FastCoderError):
        load_top(n=0)


# ------------------------------------------------------------------------------ archives


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in files.items():
            zf.writestr(rel, text)
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return path


def make_sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_archive_names():
    assert pypi.archive_name_version("Jinja2-3.1.5-py3-none-any.whl") == ("jinja2", "3.1.5", "wheel")
    assert pypi.archive_name_version("zope.interface-7.2-cp311-cp311-manylinux_2_17_x86_64.whl") == ("zope-interface", "7.2", "wheel")
    assert pypi.archive_name_version("python-dateutil-2.9.0.post0.tar.gz") == ("python-dateutil", "2.9.0.post0", "sdist")
    assert pypi.archive_name_version("readme.txt") is None


def test_extract_wheel_and_sdist(tmp_path):
    whl = make_wheel(tmp_path / "d", "demo", "1.0", {
        "demo/__init__.py": "x = 1\n", "demo/data.json": "{}", "demo-1.0.data/purelib/extra.py": "y = 2\n",
        "demo-1.0.data/scripts/tool.py": "z = 3\n",
    })
    assert extract_py(whl, tmp_path / "w") == 2
    assert sorted(p.relative_to(tmp_path / "w").as_posix() for p in (tmp_path / "w").rglob("*.py")) == ["demo/__init__.py", "extra.py"]
    sd = make_sdist(tmp_path / "d", "demo", "1.0", {"src/demo/__init__.py": "x = 1\n", "setup.cfg": "", "docs/conf.py": "c\n"})
    assert extract_py(sd, tmp_path / "s") == 2
    assert (tmp_path / "s" / "src" / "demo" / "__init__.py").is_file()
    pkg = package_from_tree("demo", "1.0", tmp_path / "s")  # docs/ is left out of a tree
    assert [rel for _, rel in pkg.files] == ["src/demo/__init__.py"]


def test_extract_refuses_escaping_members(tmp_path):
    bad = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../../escape.py", "x = 1\n")
    with pytest.raises(FastCoderError, match="escapes"):
        extract_py(bad, tmp_path / "out")
    assert not (tmp_path.parent / "escape.py").exists()


# ------------------------------------------------------------------------------ fetching


@pytest.fixture
def fake_pip(tmp_path, monkeypatch):
    """pip download replaced: wheels for names in ``wheels``, sdists for ``sdists``."""
    calls: list[tuple[str, bool]] = []
    repo = tmp_path / "repo"
    wheels: dict[str, Path] = {}
    sdists: dict[str, Path] = {}

    def fake(req, dest, binary):
        calls.append((req.pip_arg, binary))
        found = (wheels if binary else sdists).get(req.pip_arg)
        if found is None:
            return False, "ERROR: No matching distribution"
        (dest / found.name).write_bytes(found.read_bytes())
        return True, ""

    monkeypatch.setattr(pypi, "_pip_download", fake)

    def add(name, version, text, kind="wheel"):
        files = {f"{name}/__init__.py": text}
        if kind == "wheel":
            wheels[f"{name}=={version}"] = make_wheel(repo, name, version, files)
        else:
            sdists[f"{name}=={version}"] = make_sdist(repo, name, version, files)

    return add, calls


def test_fetch_downloads_once_and_resumes(tmp_path, fake_pip):
    add, calls = fake_pip
    add("aaa", "1.0", "def a():\n    return 1\n")
    add("bbb", "2.0", "def b():\n    return 2\n", kind="sdist")
    reqs = [Requirement("aaa", "==1.0"), Requirement("bbb", "==2.0"), Requirement("ccc", "==3.0")]
    cache = tmp_path / "cache"
    rep = fetch_packages(reqs, cache=cache, jobs=2)
    assert [(p.name, p.version, p.kind) for p in rep.packages] == [("aaa", "1.0", "wheel"), ("bbb", "2.0", "sdist")]
    assert list(rep.failed) == ["ccc==3.0"] and rep.downloaded == 2
    assert ("bbb==2.0", True) in calls and ("bbb==2.0", False) in calls  # wheel first, then the sdist
    calls.clear()
    rep = fetch_packages(reqs[:2], cache=cache)
    assert calls == [] and rep.cached == 2  # all done: nothing downloaded
    # an interrupted extraction (no .complete marker) is redone from the kept archive
    (rep.packages[0].root / pypi.COMPLETE).unlink()
    rep = fetch_packages(reqs[:1], cache=cache)
    assert calls == [] and rep.downloaded == 1 and (rep.packages[0].root / pypi.COMPLETE).is_file()
    with pytest.raises(FastCoderError):
        fetch_packages(reqs[2:], cache=cache, strict=True)


def test_build_common_from_packages_with_provenance_and_resume(tmp_path, tiny_tokenizer, fake_pip, isolated_cache, monkeypatch):
    add, _ = fake_pip
    add("aaa", "1.0", "def a():\n    return '" + phrase("aaa") + "'\n")
    add("bbb", "2.0", "def b():\n    return '" + phrase("bbb") + "'\n")
    rep = fetch_packages([Requirement("aaa", "==1.0"), Requirement("bbb", "==2.0")], cache=tmp_path / "c")
    pkgs = [package_from_tree(p.name, p.version, p.root) for p in rep.packages]
    store, crep = build_common_from_packages(tiny_tokenizer, pkgs, out=tmp_path / "dc.fcds", source="test")
    loaded = TokenDatastore.load(tmp_path / "dc.fcds", expected_fingerprint=tokenizer_fingerprint(tiny_tokenizer))
    assert loaded.meta["kind"] == "common" and loaded.meta["sources"] == ["test"]
    assert [(p["name"], p["version"], p["files"]) for p in loaded.meta["packages"]] == [
        ("aaa", "1.0", ["aaa/__init__.py"]), ("bbb", "2.0", ["bbb/__init__.py"])]
    assert crep.tokens == loaded.n_tokens and crep.documents == 2
    # a second build (e.g. after an interruption, or with one more package) tokenizes
    # only what is new
    import indexer.shards as shards

    seen: list[str] = []
    real = shards.tokenize_packages
    monkeypatch.setattr(shards, "tokenize_packages", lambda tok, ps, **kw: (seen.extend(p.key for p in ps), real(tok, ps, **kw))[1])
    add("ccc", "3.0", "def c():\n    return 3\n")
    rep = fetch_packages([Requirement("ccc", "==3.0")], cache=tmp_path / "c")
    more = pkgs + [package_from_tree(p.name, p.version, p.root) for p in rep.packages]
    store2, _ = build_common_from_packages(tiny_tokenizer, more, source="test")
    assert seen == ["ccc"] and [p["name"] for p in store2.meta["packages"]] == ["aaa", "bbb", "ccc"]
    # a subset does not forget the cached others (shared token cache)
    seen.clear()
    store3, _ = build_common_from_packages(tiny_tokenizer, pkgs[1:], source="test")
    assert seen == [] and [p["name"] for p in store3.meta["packages"]] == ["bbb"]
    store4, _ = build_common_from_packages(tiny_tokenizer, more, source="test")
    assert seen == [] and store4.n_tokens == store2.n_tokens


# ------------------------------------------------------------------------------ CLI


def test_cli_from_requirements_and_lookup_names_the_package(tmp_path, tiny_tokenizer, tiny_model_dir, fake_pip,
                                                            isolated_cache, capsys):
    from fastcoder_cli.main import main

    add, _ = fake_pip
    add("aaa", "1.0", "def a():\n    return '" + phrase("zzq") + "'\n")
    add("bbb", "2.0", "def b():\n    return 2\n")
    req = write(tmp_path / "requirements.txt", "aaa==1.0\nbbb==2.0\nmissing==1\n")
    out = tmp_path / "dc.fcds"
    code = main(["build-common", "--model", str(tiny_model_dir), "--from-requirements", str(req), "--out", str(out),
                 "--exclude", "bbb", "--json", "--no-progress"])
    assert code == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["packages"] == 1 and info["tokens"] > 0
    store = TokenDatastore.load(out)
    assert [p["name"] for p in store.meta["packages"]] == ["aaa"] and store.meta["excluded"] == ["bbb"]
    assert store.meta["failed"] == ["missing==1"]
    ws = tmp_path / "ws"
    write(ws / "main.py", "print('hello')\n")
    words = phrase("zzq").split(" ")
    code = main(["index", str(ws), "--model", str(tiny_model_dir), "--common", str(out), "--lookup", " ".join(words[:4]),
                 "--no-progress"])
    assert code == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    hit = next(c for c in res["continuations"] if c["source"] == "D_c")
    assert hit["package"] == "aaa" and hit["version"] == "1.0" and hit["file"] == "aaa/__init__.py"
    assert hit["packages"] == {"aaa": 1}


def test_cli_rejects_two_corpora(tmp_path, tiny_model_dir, isolated_cache):
    from fastcoder_cli.main import main

    assert main(["build-common", "--model", str(tiny_model_dir), "--from-pypi-top", "3", "--source", str(tmp_path),
                 "--no-progress"]) == 1


def test_cli_index_deps_and_lookup(tmp_path, tiny_tokenizer, tiny_model_dir, isolated_cache, capsys):
    import venv

    from fastcoder_cli.main import main

    ws = tmp_path / "ws"
    write(ws / "main.py", "print('hello')\n")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(ws / ".venv")
    site = next((ws / ".venv").glob("lib/python*/site-packages"))
    write(site / "qqq" / "__init__.py", "def q():\n    return '" + phrase("qqq") + "'\n")
    meta = site / "qqq-0.5.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: qqq\nVersion: 0.5\n")
    (meta / "RECORD").write_text("qqq/__init__.py,,\n")
    assert main(["index", str(ws), "--model", str(tiny_model_dir), "--deps", "--json", "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    dd = json.loads(lines[-1])
    assert dd["origin"] == ".venv" and dd["packages"] == 1 and dd["tokens"] > 0 and dd["rebuilt_shards"] == 1
    words = phrase("qqq").split(" ")
    assert main(["index", str(ws), "--model", str(tiny_model_dir), "--deps", "--lookup", " ".join(words[:4]),
                 "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    hit = next(c for c in res["continuations"] if c["source"] == "D_d")
    assert hit["package"] == "qqq" and hit["file"] == "qqq/__init__.py"
    assert res["sources"]["D_d"]["match_len"] >= 4


def test_cli_from_env_reads_the_environment_like_dd(tmp_path, tiny_model_dir, isolated_cache, capsys):
    import venv

    from fastcoder_cli.main import main

    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    site = next(env.glob("lib/python*/site-packages"))
    write(site / "ppp" / "__init__.py", "def p():\n    return 1\n")
    write(site / "ppp" / "tests" / "test_p.py", "def test_p():\n    pass\n")
    meta = site / "ppp-1.2.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Name: ppp\nVersion: 1.2\n")
    (meta / "RECORD").write_text("ppp/__init__.py,,\nppp/tests/test_p.py,,\n")
    out = tmp_path / "env.fcds"
    assert main(["build-common", "--model", str(tiny_model_dir), "--from-env", str(env), "--out", str(out), "--json",
                 "--no-progress"]) == 0
    store = TokenDatastore.load(out)
    assert [(p["name"], p["version"], p["files"]) for p in store.meta["packages"]] == [("ppp", "1.2", ["ppp/__init__.py"])]
    assert store.meta["sources"] == [f"env:{env}"]
