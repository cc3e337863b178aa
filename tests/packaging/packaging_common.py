# SPDX-License-Identifier: Apache-2.0
"""What check_conda_recipe.py and check_versions.py share: the project's
version as the public header states it, PyYAML, and a report that names
every check and fails when one disagrees."""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

HEADER = os.path.join("capi", "include", "reshard", "reshard.h")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def toml_table(text: str, table: str) -> Optional[Dict[str, Any]]:
    """One table of a TOML file: tomllib (Python >= 3.11) or tomli when
    there is one, else a reader of `key = "string"` / `key = 'string'`
    lines, which is all the tables read here hold."""
    try:
        import tomllib as toml  # type: ignore
    except ImportError:
        try:
            import tomli as toml  # type: ignore
        except ImportError:
            toml = None
    if toml is not None:
        data: Any = toml.loads(text)
        for part in table.split("."):
            if not isinstance(data, dict) or part not in data:
                return None
            data = data[part]
        return data if isinstance(data, dict) else None
    m = re.search(r"^\[%s\]\s*$(.*?)(?=^\[|\Z)" % re.escape(table), text,
                  re.MULTILINE | re.DOTALL)
    if not m:
        return None
    out: Dict[str, Any] = {}
    for line in m.group(1).splitlines():
        kv = re.match(r"""^\s*([\w.-]+)\s*=\s*(?:'([^']*)'|"((?:[^"\\]|\\.)*)"|\[(.*)\])""",
                      line)
        if kv:
            out[kv.group(1)] = (kv.group(2) if kv.group(2) is not None else
                                kv.group(3) if kv.group(3) is not None else
                                re.findall(r'"([^"]*)"', kv.group(4) or ""))
    return out


def pyproject_project(source_dir: str) -> Optional[Tuple[str, Dict[str, Any]]]:
    """The text of bindings/python/pyproject.toml and its [project] table
    ({} if it has none); None if there is no such file."""
    path = os.path.join(source_dir, "bindings", "python", "pyproject.toml")
    if not os.path.exists(path):
        return None
    text = read(path)
    return text, toml_table(text, "project") or {}


def header_version(source_dir: str) -> str:
    """MAJOR.MINOR.PATCH from the RS_VERSION_* lines of reshard.h, read as
    CMakeLists.txt reads them (one plain number each)."""
    path = os.path.join(source_dir, HEADER)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define RS_VERSION_%s +([0-9]+) *$" % part, text,
                      re.MULTILINE)
        if not m:
            raise SystemExit("FAIL: no '#define RS_VERSION_%s <number>' line "
                             "in %s" % (part, path))
        parts.append(m.group(1))
    return ".".join(parts)


def load_yaml(path: str):
    """The YAML file at path, parsed by PyYAML; a clear failure without it."""
    try:
        import yaml  # type: ignore
    except ImportError:
        raise SystemExit(
            "FAIL: PyYAML is missing for %s, which parses %s: install it "
            "(Debian: apt-get install python3-yaml; pip: pip install PyYAML)"
            % (sys.executable, path))
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def cmake_cache(build_dir: str) -> Dict[str, str]:
    """NAME -> value of the build folder's CMakeCache.txt ({} if none)."""
    cache: Dict[str, str] = {}
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(path):
        return cache
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.+-]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                cache[m.group(1)] = m.group(2)
    return cache


class Report:
    """Prints one line per check: ok, skip (with the reason) or FAIL."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.failures: List[str] = []
        self.skips = 0
        self.oks = 0

    def ok(self, what: str) -> None:
        self.oks += 1
        print("ok    %s" % what)

    def skip(self, what: str) -> None:
        self.skips += 1
        print("skip  %s" % what)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print("FAIL  %s" % what)

    def check(self, cond: bool, what: str, why: Optional[str] = None) -> bool:
        if cond:
            self.ok(what)
        else:
            self.fail(what + (": " + why if why else ""))
        return cond

    def finish(self) -> int:
        print("%s: %d ok, %d skipped, %d failed" % (
            self.title, self.oks, self.skips, len(self.failures)))
        if self.failures:
            print("\nWhat disagrees:")
            for f in self.failures:
                print("  - " + f)
            return 1
        return 0
