"""binder/ and pyproject.toml list the same dependencies; CITATION.cff is valid CFF 1.2.0."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: the extra postBuild installs
BINDER_EXTRA = "all"
#: extras that a conda-forge package of the same name already brings
CONDA_COVERS = {"dask": {"array"}}
#: what Binder needs beyond the package's own dependencies
BINDER_ONLY = {"python", "pip"}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def closure(extra: str) -> dict[str, Requirement]:
    """Every requirement of the package plus the extra, self-references (throughput[a,b]) expanded."""
    project = pyproject()["project"]
    found: dict[tuple[str, frozenset], Requirement] = {}
    todo = [Requirement(r) for r in project["dependencies"]] + [Requirement(f"throughput[{extra}]")]
    seen_extras: set[str] = set()
    while todo:
        req = todo.pop()
        if canonicalize_name(req.name) == "throughput":
            for name in sorted(req.extras - seen_extras):
                seen_extras.add(name)
                todo += [Requirement(r) for r in project["optional-dependencies"][name]]
            continue
        found[(canonicalize_name(req.name), frozenset(req.extras))] = req
    return {f"{name}[{','.join(sorted(extras))}]" if extras else name: req for (name, extras), req in found.items()}


def environment() -> tuple[dict[str, Requirement], dict[str, Requirement]]:
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    conda, pip = {}, {}
    for item in env["dependencies"]:
        if isinstance(item, dict):
            for line in item["pip"]:
                req = Requirement(line)
                pip[canonicalize_name(req.name) + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")] = req
        else:
            req = Requirement(item)
            conda[canonicalize_name(req.name)] = req
    return conda, pip


def test_binder_environment_matches_pyproject():
    wanted = closure(BINDER_EXTRA)
    conda, pip = environment()
    problems = []
    for key, req in sorted(wanted.items()):
        name = canonicalize_name(req.name)
        if key in pip:
            have = pip[key]
        elif name in conda and req.extras <= CONDA_COVERS.get(name, set()):
            have = conda[name]
        else:
            problems.append(f"{req} is in pyproject.toml but not in binder/environment.yml")
            continue
        if str(have.specifier) != str(req.specifier):
            problems.append(f"{req.name}: pyproject.toml says '{req.specifier}', binder/environment.yml '{have.specifier}'")
    covered = {canonicalize_name(r.name) for r in wanted.values()} | BINDER_ONLY
    for key in sorted(set(conda) | set(pip)):
        if canonicalize_name(key.split("[")[0]) not in covered:
            problems.append(f"binder/environment.yml lists '{key}', which pyproject.toml does not require")
    for key, req in pip.items():
        if key not in wanted:
            problems.append(f"binder/environment.yml pip entry '{req}' does not match a pyproject.toml requirement")
    assert not problems, "\n".join(problems)


def test_binder_python_is_the_projects():
    conda, _ = environment()
    assert str(conda["python"].specifier) == pyproject()["project"]["requires-python"]


def test_postbuild_installs_the_package_with_the_extra():
    post = ROOT / "binder" / "postBuild"
    assert post.stat().st_mode & 0o111, "postBuild must be executable"
    text = post.read_text()
    assert text.startswith("#!/bin/bash") and "set -euo pipefail" in text
    assert re.search(rf'pip install .*-e "\.\[{BINDER_EXTRA}\]"', text)
    assert BINDER_EXTRA in pyproject()["project"]["optional-dependencies"]
    assert "notebooks" in closure_extras(BINDER_EXTRA) and "report" in closure_extras(BINDER_EXTRA)


def closure_extras(extra: str) -> set[str]:
    extras = pyproject()["project"]["optional-dependencies"]
    seen, todo = set(), [extra]
    while todo:
        name = todo.pop()
        seen.add(name)
        for r in extras[name]:
            req = Requirement(r)
            if canonicalize_name(req.name) == "throughput":
                todo += sorted(req.extras - seen)
    return seen


def test_citation_cff():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "type", "license", "version"):
        assert cff.get(key), f"CITATION.cff lacks '{key}'"
    assert cff["type"] == "software" and cff["title"] == "throughput"
    assert cff["version"] == pyproject()["project"]["version"]
    assert cff["license"] == pyproject()["project"]["license"]["text"]
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    seed = [r for r in cff["references"] if "Big Arrays, Fast" in r["title"]]
    assert len(seed) == 1
    assert seed[0]["doi"] == "10.5281/zenodo.3829032" and seed[0]["year"] == 2020
    assert seed[0]["authors"][0]["family-names"] == "Abernathey"
    assert "10.5281/zenodo.3829032" in cff["message"]
