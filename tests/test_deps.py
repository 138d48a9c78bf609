"""D_d: environment discovery, what is read, shards (provenance, incremental rebuild,
corruption), the sharded search against a brute-force single store, the background
handle. No downloads: fake site-packages folders and virtualenvs in tmp."""

from __future__ import annotations

import json
import stat
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import DatastoreError
from fastcoder.models import tokenizer_fingerprint
from indexer import deps as deps_mod
from indexer.deps import build_deps, find_environment, start_deps
from indexer.packages import PackageSource, keep_path, list_distributions, read_text
from indexer.package_stores import build_from_docs, origins, pattern_origins, tokenize_packages
from indexer.shards import ShardedStore, ShardSet, load_store
from test_indexer_support import isolated_cache, phrase, write  # noqa: F401 - fixture


# ------------------------------------------------------------------------------ helpers


def fake_dist(site: Path, name: str, version: str, files: dict[str, str], *, editable: bool = False,
              record: bool = True) -> None:
    """A dist-info for ``name`` owning ``files`` (site-relative path -> text)."""
    for rel, text in files.items():
        write(site / rel, text)
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong description: x\n")
    if record:
        rows = [f"{rel},sha256=x,1" for rel in files] + [f"{meta.name}/METADATA,,", f"{meta.name}/RECORD,,", "../../bin/tool,,"]
        (meta / "RECORD").write_text("\n".join(rows) + "\n")
    else:
        tops = sorted({rel.split("/")[0].removesuffix(".py") for rel in files})
        (meta / "top_level.txt").write_text("\n".join(tops) + "\n")
    if editable:
        (meta / "direct_url.json").write_text(json.dumps({"url": "file:///ws", "dir_info": {"editable": True}}))


def module_text(tag: str, lines: int = 6) -> str:
    return "".join(f"def {tag}_f{i}(x):\n    return '{phrase(tag + str(i))}'\n" for i in range(lines))


def make_venv(root: Path) -> Path:
    """A real (pip-less) virtualenv; its interpreter answers like any other."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    return root


def site_of(venv_dir: Path) -> Path:
    return next(venv_dir.glob("lib/python*/site-packages"))


def three_packages(site: Path, alpha_version: str = "1.0") -> None:
    fake_dist(site, "alpha", alpha_version, {"alpha/__init__.py": module_text("alpha" + alpha_version.replace(".", ""))})
    fake_dist(site, "beta", "2.0", {"beta/__init__.py": module_text("beta"), "beta/util.py": module_text("betautil")})
    fake_dist(site, "gamma", "0.3", {"gamma.py": module_text("gamma")})


# ------------------------------------------------------------------------------ discovery


def test_workspace_venv_is_found_by_running_its_interpreter(tmp_path):
    ws = tmp_path / "ws"
    make_venv(ws / ".venv")
    env = find_environment(ws, fallback=None)
    assert env is not None and env.origin == ".venv" and not env.problems
    assert env.site_dirs == [site_of(ws / ".venv")]
    assert Path(env.key) == (ws / ".venv").resolve()


def test_configured_python_wins_and_may_be_a_folder(tmp_path):
    ws = tmp_path / "ws"
    make_venv(ws / "venv")
    other = make_venv(tmp_path / "other")
    assert find_environment(ws, fallback=None).origin == "venv"
    env = find_environment(ws, other / "bin" / "python", fallback=None)
    assert env.origin == "pythonPath" and env.site_dirs == [site_of(other)]
    env2 = find_environment(ws, str(other), fallback=None)  # the venv folder itself
    assert env2.site_dirs == [site_of(other)]


def test_no_venv_falls_back_to_the_server_interpreter(tmp_path):
    env = find_environment(tmp_path)
    assert env is not None and env.origin == "server" and env.site_dirs
    assert find_environment(tmp_path, fallback=None) is None


def test_broken_interpreter_uses_the_venv_layout(tmp_path, caplog):
    ws = tmp_path / "ws"
    v = make_venv(ws / ".venv")
    py = v / "bin" / "python"
    py.unlink()
    py.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    with caplog.at_level("INFO"):
        env = find_environment(ws, fallback=None)
    assert env.origin == ".venv" and env.site_dirs == [site_of(v)]
    assert any("exit 3" in p for p in env.problems) and "layout" in caplog.text


def test_missing_interpreter_and_hanging_interpreter(tmp_path):
    ws = tmp_path / "ws"
    v = make_venv(ws / ".venv")
    for name in ("python", "python3"):
        (v / "bin" / name).unlink(missing_ok=True)
    for p in (v / "bin").glob("python*"):
        p.unlink()
    env = find_environment(ws, fallback=None)
    assert env.site_dirs == [site_of(v)] and any("no interpreter" in p for p in env.problems)
    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    env = find_environment(None, hang, timeout=5.0, fallback=sys.executable)
    assert env.origin == "server"  # the configured one timed out: logged, next candidate


def test_broken_everything_gives_none_and_an_empty_store(tmp_path, tiny_tokenizer, isolated_cache, caplog):
    ws = tmp_path / "ws"
    (ws / ".venv").mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /nowhere\n")
    with caplog.at_level("WARNING"):
        assert find_environment(ws, tmp_path / "missing-python", fallback=None) is None
    assert "does not exist" in caplog.text and "no usable Python environment" in caplog.text
    res = build_deps(ws, tiny_tokenizer, python=tmp_path / "missing-python", fallback=None)
    assert res.env is None and res.store.n_tokens == 0
    assert not res.store.retrieve([1, 2, 3])


# ------------------------------------------------------------------------------ what is read


def test_keep_path_rules():
    keep = ["pkg/__init__.py", "pkg/sub/mod.py", "mod.py", "pkg/testing.py", "pkg/testing/helpers.py"]
    drop = [
        "pkg/tests/x.py", "pkg/test/x.py", "pkg/test_x.py", "pkg/x_test.py", "pkg/conftest.py",
        "pkg/_vendor/six.py", "pkg/vendored/a.py", "pkg/_vendored/a.py", "setuptools/_distutils/core.py",
        "pkg/data.json", "pkg/mod.pyi", "_distutils_hack/__init__.py", "pkg_resources/__init__.py",
        "__editable___x_finder.py", "pkg/__pycache__/m.py",
    ]
    assert all(keep_path(p) for p in keep)
    assert not any(keep_path(p) for p in drop), [p for p in drop if keep_path(p)]


def test_generated_files_are_skipped(tmp_path):
    ok = write(tmp_path / "ok.py", "x = 1\n" * 10)
    long_line = write(tmp_path / "table.py", "T = [" + ", ".join(["1"] * 2000) + "]\n")
    big = write(tmp_path / "big.py", "x = 1\n" * 200_000)
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"x = 1\0\n")
    assert read_text(ok) is not None
    assert read_text(long_line) is None and read_text(big) is None and read_text(binary) is None


def test_list_distributions(tmp_path):
    site = tmp_path / "site"
    three_packages(site)
    fake_dist(site, "pip", "24.0", {"pip/__init__.py": "x = 1\n"})
    fake_dist(site, "setuptools", "70.0", {"setuptools/__init__.py": "x = 1\n", "_distutils_hack/__init__.py": "y = 2\n"})
    fake_dist(site, "myproject", "0.1", {"__editable___myproject_finder.py": "z = 3\n"}, editable=True)
    fake_dist(site, "withtests", "1.0", {"wt/__init__.py": "a = 1\n", "wt/tests/test_a.py": "b = 2\n", "wt/_vendor/v.py": "c\n"})
    fake_dist(site, "legacy", "3.0", {"legacy/__init__.py": "d = 4\n", "legacy/tests/t.py": "e\n"}, record=False)
    fake_dist(site, "stubs-only", "1.0", {"stubs/__init__.pyi": "x: int\n"})
    pkgs, skipped = list_distributions([site])
    by = {p.name: p for p in pkgs}
    assert sorted(by) == ["alpha", "beta", "gamma", "legacy", "withtests"]
    assert [rel for _, rel in by["withtests"].files] == ["wt/__init__.py"]
    assert [rel for _, rel in by["legacy"].files] == ["legacy/__init__.py"]
    assert by["beta"].version == "2.0" and len(by["beta"].files) == 2
    assert set(skipped) == {"pip", "setuptools", "myproject", "stubs-only"}
    assert "editable" in skipped["myproject"]


def test_first_site_dir_wins_on_a_name_clash(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    fake_dist(a, "dup", "1.0", {"dup.py": "x = 1\n"})
    fake_dist(b, "dup", "2.0", {"dup.py": "x = 2\n"})
    pkgs, _ = list_distributions([a, b])
    assert [(p.name, p.version, p.origin) for p in pkgs] == [("dup", "1.0", str(a))]


# ------------------------------------------------------------------------------ shards


def _counting(monkeypatch) -> list[str]:
    """Record every package tokenized (the real tokenize_packages, counted)."""
    import indexer.shards as shards

    seen: list[str] = []
    real = shards.tokenize_packages

    def counting(tokenizer, packages, **kw):
        seen.extend(p.key for p in packages)
        return real(tokenizer, packages, **kw)

    monkeypatch.setattr(shards, "tokenize_packages", counting)
    return seen


def test_header_provenance_and_lookup_origin(tmp_path, tiny_tokenizer, isolated_cache):
    site = tmp_path / "site"
    three_packages(site)
    pkgs, _ = list_distributions([site])
    fp = tokenizer_fingerprint(tiny_tokenizer)
    store, rep = ShardSet(tmp_path / "dd", fp).update(tiny_tokenizer, pkgs, target_tokens=10**9)
    assert len(store.shards) == 1 and rep.rebuilt_shards == 1
    shard = store.shards[0]
    table = shard.meta["packages"]
    assert [(p["name"], p["version"], p["files"]) for p in table] == [
        ("alpha", "1.0", ["alpha/__init__.py"]),
        ("beta", "2.0", ["beta/__init__.py", "beta/util.py"]),
        ("gamma", "0.3", ["gamma.py"]),
    ]
    assert store.packages() == {"alpha": "1.0", "beta": "2.0", "gamma": "0.3"}
    # documents are the files' tokens, in the table's order
    util = tiny_tokenizer((site / "beta" / "util.py").read_text(), add_special_tokens=False)["input_ids"]
    assert shard.doc_tokens(table[1]["first_doc"] + 1).tolist() == util
    # a phrase only beta/util.py holds is attributed to it
    pat = tiny_tokenizer(phrase("betautil3"), add_special_tokens=False)["input_ids"]
    got = store.origins_of(pat)
    assert got == {("beta", "2.0", "beta/util.py"): 1}
    # the header survives a reload
    again = ShardSet(tmp_path / "dd", fp).load()
    assert pattern_origins(again.shards, pat) == got


def test_incremental_rebuild_only_touches_the_changed_package(tmp_path, tiny_tokenizer, monkeypatch):
    site = tmp_path / "site"
    three_packages(site)
    fp = tokenizer_fingerprint(tiny_tokenizer)
    seen = _counting(monkeypatch)
    shard_set = ShardSet(tmp_path / "dd", fp)
    pkgs, _ = list_distributions([site])
    store, rep = shard_set.update(tiny_tokenizer, pkgs, target_tokens=1)  # one package per shard
    assert rep.rebuilt_shards == 3 and sorted(seen) == ["alpha", "beta", "gamma"] and len(store.shards) == 3
    files_before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "dd").glob("shard-*.fcds")}

    seen.clear()
    store, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    assert seen == [] and rep.rebuilt_shards == 0 and rep.kept_shards == 3  # nothing changed

    # upgrade alpha 1.0 -> 1.1 (new code too)
    for p in site.glob("alpha-*.dist-info"):
        import shutil

        shutil.rmtree(p)
    fake_dist(site, "alpha", "1.1", {"alpha/__init__.py": module_text("alpha11")})
    seen.clear()
    store, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    assert seen == ["alpha"] and rep.rebuilt_shards == 1 and rep.kept_shards == 2
    assert store.packages() == {"alpha": "1.1", "beta": "2.0", "gamma": "0.3"}
    files_after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "dd").glob("shard-*.fcds")}
    assert len(files_after) == 3 and len(set(files_after) & set(files_before)) == 2
    assert all(files_after[n] == files_before[n] for n in set(files_after) & set(files_before))
    new_pat = tiny_tokenizer(phrase("alpha112"), add_special_tokens=False)["input_ids"]
    old_pat = tiny_tokenizer(phrase("alpha102"), add_special_tokens=False)["input_ids"]
    assert store.retrieve(new_pat[:6]).match_len == 6 and store.origins_of(new_pat) and not store.origins_of(old_pat)

    # a removed package: its shard goes away, nothing is tokenized
    import shutil

    for p in site.glob("gamma-*.dist-info"):
        shutil.rmtree(p)
    seen.clear()
    store, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    assert seen == [] and rep.removed == ["gamma"] and len(store.shards) == 2
    assert len(list((tmp_path / "dd").glob("shard-*.fcds"))) == 2


def test_grouped_shard_reuses_tokens_of_unchanged_packages(tmp_path, tiny_tokenizer, monkeypatch):
    site = tmp_path / "site"
    three_packages(site)
    fp = tokenizer_fingerprint(tiny_tokenizer)
    seen = _counting(monkeypatch)
    shard_set = ShardSet(tmp_path / "dd", fp)
    shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=10**9)
    import shutil

    for p in site.glob("beta-*.dist-info"):
        shutil.rmtree(p)
    fake_dist(site, "beta", "2.1", {"beta/__init__.py": module_text("beta21")})
    seen.clear()
    store, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=10**9)
    assert seen == ["beta"] and sorted(rep.reused) == ["alpha", "gamma"] and rep.rebuilt_shards == 1
    # same store as a fresh build
    fresh, _ = ShardSet(tmp_path / "fresh", fp).update(tiny_tokenizer, list_distributions([site])[0], target_tokens=10**9)
    assert np.array_equal(np.asarray(store.shards[0].tokens), np.asarray(fresh.shards[0].tokens))
    assert store.shards[0].meta["packages"] == fresh.shards[0].meta["packages"]


def test_corrupt_shard_is_detected_and_rebuilt(tmp_path, tiny_tokenizer, monkeypatch, caplog):
    site = tmp_path / "site"
    three_packages(site)
    fp = tokenizer_fingerprint(tiny_tokenizer)
    seen = _counting(monkeypatch)
    shard_set = ShardSet(tmp_path / "dd", fp)
    store, _ = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    reference = store.retrieve(tiny_tokenizer(phrase("beta2"), add_special_tokens=False)["input_ids"][:5])
    manifest = json.loads((tmp_path / "dd" / "manifest.json").read_text())
    beta_file = next(e["file"] for e in manifest["shards"] if "beta" in e["packages"])
    path = tmp_path / "dd" / beta_file
    data = bytearray(path.read_bytes())
    data[-9] ^= 0xFF  # inside the arrays
    path.write_bytes(bytes(data))
    with pytest.raises(DatastoreError, match="checksum"):
        load_store(path, fp)
    with pytest.raises(DatastoreError):
        shard_set.load()
    seen.clear()
    with caplog.at_level("WARNING"):
        store, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    assert rep.corrupt == [beta_file] and seen == ["beta"] and rep.rebuilt_shards == 1
    assert "unusable" in caplog.text
    again = store.retrieve(tiny_tokenizer(phrase("beta2"), add_special_tokens=False)["input_ids"][:5])
    assert again.nodes == reference.nodes and again.total == reference.total
    shard_set.load()  # healthy again
    # a truncated shard too
    path = tmp_path / "dd" / json.loads((tmp_path / "dd" / "manifest.json").read_text())["shards"][0]["file"]
    path.write_bytes(path.read_bytes()[:100])
    seen.clear()
    _, rep = shard_set.update(tiny_tokenizer, list_distributions([site])[0], target_tokens=1)
    assert len(rep.corrupt) == 1 and len(seen) == 1


def test_foreign_manifest_means_a_full_rebuild(tmp_path, tiny_tokenizer, monkeypatch):
    site = tmp_path / "site"
    three_packages(site)
    fp = tokenizer_fingerprint(tiny_tokenizer)
    ShardSet(tmp_path / "dd", fp).update(tiny_tokenizer, list_distributions([site])[0])
    (tmp_path / "dd" / "manifest.json").write_text("{not json")
    seen = _counting(monkeypatch)
    store, rep = ShardSet(tmp_path / "dd", fp).update(tiny_tokenizer, list_distributions([site])[0])
    assert sorted(seen) == ["alpha", "beta", "gamma"] and store.n_tokens > 0


# ------------------------------------------------------------------------------ search


@pytest.mark.parametrize("parallel", [0, 2])
def test_sharded_search_equals_one_store_over_all_documents(parallel):
    rng = np.random.default_rng(7)
    vocab = 12  # small vocabulary: many repeats, long matches, ties
    docs = [rng.integers(0, vocab, size=int(rng.integers(5, 120))).astype(np.int32) for _ in range(60)]
    groups = [docs[0:7], docs[7:30], docs[30:31], docs[31:60]]
    shards = [TokenDatastore.build(g) for g in groups]
    one = TokenDatastore.build(docs)
    sharded = ShardedStore(shards, parallel=parallel)
    assert sharded.n_tokens == one.n_tokens
    for trial in range(300):
        if trial % 3 == 0:  # a context taken from the data (long matches)
            d = docs[int(rng.integers(len(docs)))]
            end = int(rng.integers(1, d.size + 1))
            ctx = d[max(0, end - 20) : end].tolist()
        else:
            ctx = rng.integers(0, vocab + 2, size=int(rng.integers(1, 20))).tolist()
        for max_nodes in (1, 8, 64):
            a = sharded.retrieve(ctx, n_max=16, n_min=2, max_nodes=max_nodes, max_depth=16)
            b = one.retrieve(ctx, n_max=16, n_min=2, max_nodes=max_nodes, max_depth=16)
            assert (a.match_len, a.total, a.nodes) == (b.match_len, b.total, b.nodes), (ctx, max_nodes)
    sharded.close()


def test_origins_without_a_table():
    store = TokenDatastore.build([[1, 2, 3]])
    assert origins(store, np.asarray([0, 1])) == {("?", "", ""): 2}


def test_build_from_docs_table_ranges(tiny_tokenizer):
    pkgs = [PackageSource("p", "1", []), PackageSource("q", "2", [])]
    assert list(tokenize_packages(tiny_tokenizer, pkgs)) and True
    from indexer.package_stores import PackageDocs

    parts = [PackageDocs("p", "1", ["a.py", "b.py"], [np.array([5, 6], np.int32), np.array([7], np.int32)]),
             PackageDocs("q", "2", ["c.py"], [np.array([5, 6, 8], np.int32)])]
    s = build_from_docs(parts, fingerprint="x")
    assert [(p["first_doc"], p["n_docs"], p["tokens"]) for p in s.meta["packages"]] == [(0, 2, 3), (2, 1, 3)]
    assert pattern_origins([s], [5, 6]) == {("p", "1", "a.py"): 1, ("q", "2", "c.py"): 1}


# ------------------------------------------------------------------------------ D_d end to end


def test_build_deps_for_a_workspace_venv_and_background_handle(tmp_path, tiny_tokenizer, isolated_cache):
    ws = tmp_path / "ws"
    v = make_venv(ws / ".venv")
    three_packages(site_of(v))
    statuses: list[str] = []
    handle = start_deps(ws, tiny_tokenizer, on_status=lambda s, m: statuses.append(s), fallback=None)
    res = handle.wait(60)
    assert handle.status == "ready" and statuses == ["building", "ready"]
    assert res.env.origin == ".venv" and res.store.packages() == {"alpha": "1.0", "beta": "2.0", "gamma": "0.3"}
    ctx = tiny_tokenizer(phrase("gamma4"), add_special_tokens=False)["input_ids"]
    assert handle.source.retrieve(ctx[:5], n_max=16, n_min=2, max_nodes=8, max_depth=8).match_len == 5
    # persisted under cache_root()/deps/<env hash>-<fingerprint>/
    fp = tokenizer_fingerprint(tiny_tokenizer)
    folder = deps_mod.deps_dir(res.env, fp)
    assert folder.parent == isolated_cache / "deps" and folder.name.endswith(fp)
    assert (folder / "manifest.json").is_file()
    # a second build loads: nothing tokenized
    again = build_deps(ws, tiny_tokenizer, fallback=None)
    assert again.report.rebuilt_shards == 0 and again.report.tokenized == []


def test_background_handle_is_empty_until_ready_and_reports_no_env(tmp_path, tiny_tokenizer, isolated_cache):
    handle = deps_mod.DepsHandle(tmp_path, tiny_tokenizer, fallback=None)
    assert not handle.source.retrieve([1, 2, 3]) and handle.source.n_tokens == 0
    handle.start()
    res = handle.wait(30)
    assert res.env is None and handle.status == "empty"


def test_restart_keeps_answering_from_the_old_store(tmp_path, tiny_tokenizer, isolated_cache):
    ws = tmp_path / "ws"
    v = make_venv(ws / ".venv")
    three_packages(site_of(v))
    h1 = start_deps(ws, tiny_tokenizer, fallback=None)
    h1.wait(60)
    other = make_venv(tmp_path / "other")
    fake_dist(site_of(other), "delta", "1.0", {"delta.py": module_text("delta")})
    h2 = h1.restart(python=other)
    assert h2.source.store is not None  # old answers until the new build is done
    res = h2.wait(60)
    assert res.store.packages() == {"delta": "1.0"} and res.env.origin == "pythonPath"


def test_iter_env_packages_for_from_env(tmp_path):
    v = make_venv(tmp_path / "env")
    three_packages(site_of(v))
    assert [p.name for p in deps_mod.iter_env_packages(v)] == ["alpha", "beta", "gamma"]
    with pytest.raises(Exception):
        list(deps_mod.iter_env_packages(tmp_path / "nope"))


def test_capped_counting_keeps_total_exact_and_the_heaviest_paths():
    rng = np.random.default_rng(3)
    # one dominant continuation after [1, 2], many rare ones
    docs = [np.array([1, 2, 3, 4, 5], np.int32)] * 400 + [np.array([1, 2, int(t)], np.int32) for t in rng.integers(10, 60, 200)]
    store = TokenDatastore.build(docs)
    exact = ShardedStore([store]).retrieve([1, 2], max_nodes=8)
    capped = ShardedStore([store], max_positions=50).retrieve([1, 2], max_nodes=8)
    assert capped.total == exact.total == 600 and capped.match_len == exact.match_len == 2
    assert capped.nodes[0][0] == exact.nodes[0][0] == (3,)
    assert abs(capped.nodes[0][1] - 400) <= 600 // 50 + 1  # counts scaled from the sample
    # below the cap nothing changes
    assert ShardedStore([store], max_positions=10_000).retrieve([1, 2], max_nodes=8).nodes == exact.nodes


def _reference_continuations(parts, max_nodes, max_depth):
    """Brute force: count every continuation path of every position, then take the
    heaviest prefix-closed nodes best-first (ties: the node pushed first; a node's
    children are pushed in ascending token order when it is taken)."""
    import heapq
    from collections import Counter

    counts: Counter = Counter()
    for store, pos in parts:
        toks = np.asarray(store.tokens)
        for p in pos.tolist():
            path = ()
            for d in range(max_depth):
                j = p + d
                if j >= toks.size or int(toks[j]) == 2**31 - 1:
                    break
                path = path + (int(toks[j]),)
                counts[path] += 1
    order = 0
    heap = []
    for path in sorted(p for p in counts if len(p) == 1):
        heap.append((-counts[path], order, path))
        order += 1
    heapq.heapify(heap)
    out = []
    while heap and len(out) < max_nodes:
        neg, _, path = heapq.heappop(heap)
        out.append((path, -neg))
        for child in sorted(c for c in counts if len(c) == len(path) + 1 and c[:-1] == path):
            heapq.heappush(heap, (-counts[child], order, child))
            order += 1
    return out


def test_topk_continuations_equal_brute_force():
    from fastcoder.search import continuations

    rng = np.random.default_rng(11)
    stores = [TokenDatastore.build([rng.integers(0, 6, size=int(rng.integers(3, 80))) for _ in range(20)]) for _ in range(3)]
    for _ in range(60):
        pat = rng.integers(0, 6, size=int(rng.integers(1, 3))).tolist()
        parts = []
        for s in stores:
            lo, hi = s.find_range(pat)
            parts.append((s, np.asarray(s.sa[lo:hi], dtype=np.int64) + len(pat)))
        for max_nodes in (1, 5, 64):
            for sub in (parts, parts[:1]):
                assert continuations(sub, max_nodes=max_nodes, max_depth=8) == _reference_continuations(sub, max_nodes, 8)


def test_matrix_and_node_by_node_continuations_agree(monkeypatch):
    """A range is counted from its whole continuation matrix (up to ``MATRIX_ROWS``
    occurrences; one store's, or two stores' rows sorted together, as a workspace's base
    and the delta of the edited files) or node by node: the same nodes, counts and
    order, with many ties (a 3-token vocabulary), documents ending inside the depth and
    strided (scaled) samples; both equal the brute-force reference."""
    import fastcoder.search as search

    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 3, size=int(rng.integers(1, 60))) for _ in range(120)]
    store = TokenDatastore.build(docs)
    delta = TokenDatastore.build(docs[:7] + [rng.integers(0, 3, size=30) for _ in range(5)])
    for pat in ([0], [1, 2], [2, 2, 0], [0, 1, 0, 1]):
        parts = []
        for s in (store, delta):
            lo, hi = s.find_range(pat)
            parts.append((s, np.asarray(s.sa[lo:hi], dtype=np.int64) + len(pat)))
        for step in (1, 3):
            for sub in (parts[:1], parts):
                sample = [(s, p[::step]) for s, p in sub]
                for max_nodes in (1, 2, 7, 64, 500):
                    for depth in (1, 5, 16):
                        got = []
                        for rows in (0, 10**6):
                            monkeypatch.setattr(search, "MATRIX_ROWS", rows)
                            got.append(search.continuations(sample, max_nodes=max_nodes, max_depth=depth, scale=3))
                        assert got[0] == got[1], (pat, len(sub), max_nodes, depth)
                        assert got[0] == [(p, 3 * c) for p, c in _reference_continuations(sample, max_nodes, depth)]


def test_build_deps_searches_a_merged_store_equal_to_the_shards(tmp_path, tiny_tokenizer, isolated_cache):
    ws = tmp_path / "ws"
    v = make_venv(ws / ".venv")
    three_packages(site_of(v))
    res = build_deps(ws, tiny_tokenizer, fallback=None, target_tokens=1)  # three shards, one merged store
    assert len(res.store.shards) == 1 and res.report.rebuilt_shards == 3
    folder = deps_mod.deps_dir(res.env, tokenizer_fingerprint(tiny_tokenizer))
    assert len(list(folder.glob("merged-*.fcds"))) == 1
    shards = ShardSet(folder, tokenizer_fingerprint(tiny_tokenizer)).load()
    assert len(shards.shards) == 3 and res.store.packages() == shards.packages()
    rng = np.random.default_rng(0)
    all_tokens = np.asarray(res.store.shards[0].tokens)
    for _ in range(100):
        end = int(rng.integers(2, all_tokens.size))
        ctx = [t for t in all_tokens[max(0, end - 12) : end].tolist() if t != 2**31 - 1]
        a, b = res.store.retrieve(ctx), shards.retrieve(ctx)
        assert (a.match_len, a.total, a.nodes) == (b.match_len, b.total, b.nodes)
    pat = tiny_tokenizer(phrase("gamma2"), add_special_tokens=False)["input_ids"]
    assert res.store.origins_of(pat) == shards.origins_of(pat) == {("gamma", "0.3", "gamma.py"): 1}
    # an upgrade re-merges; the old merged file goes away
    import shutil

    for p in site_of(v).glob("beta-*.dist-info"):
        shutil.rmtree(p)
    fake_dist(site_of(v), "beta", "2.5", {"beta/__init__.py": module_text("beta25")})
    res2 = build_deps(ws, tiny_tokenizer, fallback=None, target_tokens=1)
    assert res2.report.tokenized == ["beta"] and res2.store.packages()["beta"] == "2.5"
    assert len(list(folder.glob("merged-*.fcds"))) == 1
