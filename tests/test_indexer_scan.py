"""Workspace scan: ignore files, default excludes, secrets, and hostile file systems."""

from __future__ import annotations

import os
import threading

import pytest

from indexer.scan import WorkspaceFilter, read_source, scan_workspace
from test_indexer_support import write


def rels(root) -> set[str]:
    return {f.relpath for f in scan_workspace(root)}


def test_nested_gitignore_and_negation(tmp_path):
    write(tmp_path / ".gitignore", "*.log.txt\ngenerated/\n/top_only.py\n")
    write(tmp_path / "top_only.py", "x = 1\n")
    write(tmp_path / "keep.py", "x = 1\n")
    write(tmp_path / "a.log.txt", "log\n")
    write(tmp_path / "generated" / "g.py", "x = 1\n")
    write(tmp_path / "pkg" / "top_only.py", "x = 1\n")  # '/top_only.py' is anchored to the root
    write(tmp_path / "pkg" / ".gitignore", "secret_*.py\n!secret_ok.py\n")
    write(tmp_path / "pkg" / "secret_a.py", "x = 1\n")
    write(tmp_path / "pkg" / "secret_ok.py", "x = 1\n")
    write(tmp_path / "pkg" / "sub" / ".gitignore", "!*.log.txt\n")  # deeper file re-includes
    write(tmp_path / "pkg" / "sub" / "b.log.txt", "log\n")
    write(tmp_path / "pkg" / "sub" / "secret_b.py", "x = 1\n")  # still ignored by pkg/.gitignore
    write(tmp_path / ".fastcoderignore", "vendor_*.py\n")
    write(tmp_path / "vendor_x.py", "x = 1\n")
    assert rels(tmp_path) == {"keep.py", "pkg/top_only.py", "pkg/secret_ok.py", "pkg/sub/b.log.txt"}


def test_nothing_comes_back_from_an_ignored_directory(tmp_path):
    write(tmp_path / ".gitignore", "out/\n!out/keep.py\n")
    write(tmp_path / "out" / "keep.py", "x = 1\n")
    assert rels(tmp_path) == set()
    flt = WorkspaceFilter(tmp_path)
    assert not flt.file_allowed(tmp_path / "out" / "keep.py")


def test_default_excludes_and_virtualenvs(tmp_path):
    for d in (".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", ".mypy_cache",
              ".pytest_cache", ".tox", "pkg.egg-info"):
        write(tmp_path / d / "x.py", "x = 1\n")
    write(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr\n")
    write(tmp_path / "myenv" / "lib" / "site.py", "x = 1\n")
    write(tmp_path / "src" / "ok.py", "x = 1\n")
    assert rels(tmp_path) == {"src/ok.py"}
    flt = WorkspaceFilter(tmp_path)
    assert not flt.file_allowed(tmp_path / "myenv" / "lib" / "site.py")
    assert not flt.file_allowed(tmp_path / "node_modules" / "x.py")
    assert flt.file_allowed(tmp_path / "src" / "ok.py")


@pytest.mark.parametrize(
    "name",
    [".env", ".env.local", "server.pem", "tls.key", "id_rsa", "id_rsa.pub", "cert.p12", "credentials.json",
     "credentials", "store.pfx", ".netrc", ".pgpass", "ID_RSA"],
)
def test_secrets_are_never_indexed(tmp_path, name):
    write(tmp_path / name, "password = hunter2\n")
    write(tmp_path / "ok.py", "x = 1\n")
    assert rels(tmp_path) == {"ok.py"}
    assert not WorkspaceFilter(tmp_path).file_allowed(tmp_path / name)


def test_file_types_size_and_binary(tmp_path):
    for ext in ("py", "ts", "tsx", "go", "rs", "java", "toml", "yaml", "md", "sql", "kt", "swift", "scala"):
        write(tmp_path / f"f.{ext}", "x\n")
    write(tmp_path / "Makefile", "all:\n")
    write(tmp_path / "image.png", "x\n")
    write(tmp_path / "noext", "x\n")
    (tmp_path / "big.py").write_bytes(b"x" * ((1 << 20) + 1))
    (tmp_path / "blob.py").write_bytes(b"abc\0def")
    found = rels(tmp_path)
    assert "Makefile" in found and "f.py" in found and "f.scala" in found
    assert not {"image.png", "noext", "big.py"} & found
    # binary is decided when reading
    assert read_source(tmp_path / "blob.py") is None
    assert read_source(tmp_path / "f.py").text == "x\n"


def test_non_utf8_is_skipped_with_a_log_line(tmp_path, caplog):
    p = tmp_path / "latin.py"
    p.write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    with caplog.at_level("INFO", logger="indexer.scan"):
        assert read_source(p) is None
    assert "not UTF-8" in caplog.text


def test_permission_denied_is_skipped(tmp_path):
    p = write(tmp_path / "locked.py", "x = 1\n")
    d = tmp_path / "lockeddir"
    write(d / "inner.py", "x = 1\n")
    os.chmod(p, 0)
    os.chmod(d, 0)
    try:
        if os.access(p, os.R_OK) or os.access(d, os.R_OK):
            pytest.skip("running with privileges that ignore file permissions")
        assert read_source(p) is None
        assert "lockeddir/inner.py" not in rels(tmp_path)  # and no exception
    finally:
        os.chmod(p, 0o644)
        os.chmod(d, 0o755)


def test_symlink_loops_terminate(tmp_path):
    write(tmp_path / "a" / "x.py", "x = 1\n")
    os.symlink(tmp_path, tmp_path / "a" / "loop")
    os.symlink(tmp_path / "a", tmp_path / "a" / "self")
    os.symlink(tmp_path / "a" / "x.py", tmp_path / "link.py")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.py")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("files", rels(tmp_path)))
    t.start()
    t.join(10)
    assert not t.is_alive(), "the scan did not terminate"
    assert result["files"] == {"a/x.py"}


def test_vanished_and_odd_paths_do_not_raise(tmp_path):
    assert read_source(tmp_path / "missing.py") is None
    assert read_source(tmp_path) is None  # a directory
    assert rels(tmp_path / "missing") == set()
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    assert rels(tmp_path) == set()  # a FIFO is not a regular file
    assert read_source(fifo) is None  # and reading one does not block


def test_ignore_file_changes_take_effect_after_invalidate(tmp_path):
    write(tmp_path / "a.py", "x = 1\n")
    flt = WorkspaceFilter(tmp_path)
    assert flt.file_allowed(tmp_path / "a.py")
    write(tmp_path / ".gitignore", "a.py\n")
    flt.invalidate()
    assert not flt.file_allowed(tmp_path / "a.py")
