"""Every YAML block in the docs is a valid file of its kind, and `mptlab
validate` tells a file's kind from its content and reports that file only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mptlab.analysis import compare
from mptlab.spec.catalog import Catalog, file_kind
from mptlab.spec.yamlsrc import load

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md", ROOT / "kernel" / "README.md"]
BLOCK = re.compile(r"^```(yaml|python)\n(.*?)^```", re.M | re.S)


def blocks(lang: str) -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            if m.group(1) == lang:
                line = text[: m.start()].count("\n") + 1
                out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(2)))
    return out


@pytest.mark.parametrize("where,text", blocks("yaml"), ids=[w for w, _ in blocks("yaml")])
def test_every_yaml_block_of_the_docs_is_valid(where, text, tmp_path):
    path = tmp_path / "block.yaml"
    path.write_text(text)
    data = yaml.safe_load(text)
    if isinstance(data, dict) and "rules" in data:
        assert compare.load_rules(path)
        return
    if isinstance(data, dict) and set(data) == {"jobqueue"}:
        # dask-jobqueue's own configuration (docs/deployment.md, batch
        # systems): every key one that dask-jobqueue knows
        import dask
        import dask_jobqueue  # noqa: F401 - loads its defaults into dask.config

        for kind, options in data["jobqueue"].items():
            known = dask.config.get(f"jobqueue.{kind}")
            assert set(options) <= set(known), (where, kind, set(options) - set(known))
        return
    kind = file_kind(load(path))
    if kind == "campaign":
        cat = Catalog.load(path)
        names = cat.names(path)
        assert names, where
        for name in names:
            assert cat.expand(name), (where, name)
    elif kind == "topology":
        Catalog.load().load_topology(path)
    else:
        Catalog.load().load_profiles(path)


@pytest.mark.parametrize("where,text", blocks("python"), ids=[w for w, _ in blocks("python")])
def test_every_python_block_of_the_docs_compiles(where, text):
    compile(text, where, "exec")


def test_validate_tells_the_kind_from_the_content_and_reports_that_file_only(tmp_path, mptlab):
    mine = tmp_path / "my.yaml"
    mine.write_text(
        "experiments:\n  mine:\n    extends: blest-3g-wlan\n    repetitions: 2\n    matrix: {}\n"
        "    variants: []\n"
    )
    p = mptlab("validate", mine)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [f"{mine}: mine: ok (2 runs)", f"{mine}: 1 experiments, 2 runs"]
    topo = tmp_path / "my-topology.yaml"
    topo.write_text((ROOT / "topologies" / "two-path.yaml").read_text())
    p = mptlab("validate", topo)
    assert p.returncode == 0, p.stderr
    assert "topology ok (6 hosts, 4 routers, 0 switches, 10 links, 2 path slots)" in p.stdout
    named_like_a_topology = tmp_path / "topology-study.yaml"
    named_like_a_topology.write_text(mine.read_text())
    assert "mine: ok" in mptlab("validate", named_like_a_topology).stdout
    profiles = tmp_path / "links.yaml"
    profiles.write_text("profiles:\n  slow: {rate: 1mbit, delay: 50ms, queue: 20}\n")
    assert mptlab("validate", profiles).stdout.strip() == f"{profiles}: 1 profiles ok"
    neither = tmp_path / "x.yaml"
    neither.write_text("hello: world\n")
    p = mptlab("validate", neither)
    assert p.returncode == 2 and "neither a campaign" in p.stderr


def test_show_takes_a_campaign_file_as_run_does(tmp_path, mptlab):
    mine = tmp_path / "my.yaml"
    mine.write_text(
        "experiments:\n"
        "  one:\n    extends: blest-3g-wlan\n    repetitions: 2\n"
        "    matrix: {kernel.scheduler: [blest, minrtt]}\n    variants: []\n"
        "  two:\n    extends: blest-3g-wlan\n    repetitions: 3\n    matrix: {}\n"
        "    variants: []\n"
    )
    p = mptlab("show", mine)
    assert p.returncode == 0, p.stderr
    assert "one: " in p.stdout and "2 variants x 2 repetitions = 4 runs" in p.stdout
    assert "two: " in p.stdout and "1 variants x 3 repetitions = 3 runs" in p.stdout
    by_name = mptlab("show", "two", "--file", mine)
    assert by_name.returncode == 0 and by_name.stdout.strip() in p.stdout
