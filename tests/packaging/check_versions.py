#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest packaging.versions: the version is written in one place, the
RS_VERSION_MAJOR/MINOR/PATCH lines of capi/include/reshard/reshard.h, and
everything else that states a version agrees with it.

    check_versions.py --source-dir SRC [--build-dir BUILD] [--python PY]

Checked (skipped, saying why, where a file or a build product is absent):
  - the build's configure_file outputs: packaging/reshard.pc (Version:),
    packaging/reshardConfigVersion.cmake (PACKAGE_VERSION), and the library
    file lib/libreshard.so.<version>;
  - the Python package: bindings/python/pyproject.toml takes its version
    from reshard.h with scikit-build-core's regex provider, which is run
    here the way scikit-build-core runs it (or its static version, if it
    ever gets one); reshard/__init__.py hard-codes none; and the build's
    staged package, imported, reports the version (__version__);
  - packaging/conda/recipe.yaml: context.version;
  - packaging/debian/changelog: the upstream part of the first entry's
    version (`libreshard (0.5.0-1) ...`);
  - Lua rockspecs (*.rockspec), if any: the upstream part of `version`;
  - the Go binding: go.mod has no version; the doc comment of Version
    quotes one, which must be this one;
  - the `reshard` program of the build: `reshard --version`;
  - the Python binding's CMakeLists.txt asks an installed libreshard for
    this MAJOR.MINOR (find_package, pkg-config), as it exposes what this
    release added;
  - every `libreshard.so.X.Y.Z` that docs/ABI.md and the conda and Debian
    READMEs name is this version;
  - nothing is documented for a release after this one: no `@since X.Y`
    or `since X.Y` in the public headers (capi/include/reshard/*.h) or
    docs/ABI.md (its table of functions included), and no version node of
    capi/reshard.map, names a later MAJOR.MINOR.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from typing import Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packaging_common import (Report, header_version, pyproject_project,  # noqa: E402
                              read, toml_table)


def python_version(src: str, version: str, rep: Report) -> None:
    pydir = os.path.join(src, "bindings", "python")
    found = pyproject_project(src)
    if found is None:
        rep.skip("Python: no bindings/python/pyproject.toml")
        return
    text, project = found
    static = project.get("version")
    dynamic = project.get("dynamic") or []
    if static is not None:
        rep.check(static == version, "pyproject.toml version %r is %s"
                  % (static, version), "pyproject.toml says %r" % static)
    elif "version" in dynamic:
        meta = toml_table(text, "tool.scikit-build.metadata.version")
        if not meta:
            rep.fail("pyproject.toml: version is dynamic, but there is no "
                     "[tool.scikit-build.metadata.version] table to compute it")
        elif meta.get("provider") != "scikit_build_core.metadata.regex":
            rep.fail("pyproject.toml: the version comes from provider %r, "
                     "which this check cannot run" % meta.get("provider"))
        else:
            # As scikit_build_core.metadata.regex computes it: re.search with
            # MULTILINE over the input file, result formatted from the groups.
            inp = os.path.normpath(os.path.join(pydir, meta.get("input", "")))
            regex = meta.get(
                "regex", r'(?i)^(__version__|VERSION)(?: ?\: ?str)? *= *([\'"])v?(?P<value>.+?)\2')
            result = meta.get("result", "{value}")
            rep.check(os.path.exists(inp) and os.path.samefile(
                inp, os.path.join(src, "capi", "include", "reshard", "reshard.h")),
                "pyproject.toml computes the version from reshard.h",
                "its input is %s" % inp)
            m = re.search(regex, read(inp), re.MULTILINE) if os.path.exists(inp) else None
            if m is None:
                rep.fail("pyproject.toml: its version regex matches nothing in "
                         "%s (pip install would fail)" % inp)
            else:
                got = result.format(*m.groups(), **m.groupdict())
                if meta.get("remove"):
                    got = re.sub(meta["remove"], "", got)
                rep.check(got == version, "pyproject.toml's computed version "
                          "%r is %s" % (got, version),
                          "scikit-build-core would compute %r" % got)
    else:
        rep.fail("pyproject.toml: [project] has neither version nor "
                 "dynamic = [\"version\"]")
    init = os.path.join(pydir, "reshard", "__init__.py")
    if os.path.exists(init):
        lits = re.findall(r"""^__version__\s*(?::\s*str)?\s*=\s*['"]([^'"]*)['"]""",
                          read(init), re.MULTILINE)
        rep.check(all(v == version for v in lits),
                  "reshard/__init__.py: __version__ %s" % (
                      "= %r" % lits[0] if lits else
                      "is the loaded library's (library_version), not a literal"),
                  "it hard-codes %s" % lits)


def staged_python(build: str, python: Optional[str], version: str,
                  rep: Report) -> None:
    staged = os.path.join(build, "bindings", "python")
    pkg = os.path.join(staged, "reshard")
    if not os.path.isdir(pkg) or not any(
            f.startswith("_reshard_swig") and f.endswith(".so")
            for f in os.listdir(pkg)):
        rep.skip("Python: the binding is not built in %s" % build)
        return
    if not python:
        rep.skip("Python: no interpreter given (--python) to import the "
                 "build's package")
        return
    env = dict(os.environ, PYTHONPATH=staged, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([python, "-c", "import importlib.machinery as m; "
                        "print(' '.join(m.EXTENSION_SUFFIXES))"],
                       stdout=subprocess.PIPE, universal_newlines=True)
    suffixes = r.stdout.split()
    exts = [f for f in os.listdir(pkg) if f.startswith("_reshard_swig")
            and f.endswith(".so")]
    if not any(f.endswith(s) for f in exts for s in suffixes if s != ".so"):
        rep.skip("Python: the build's extension %s was built for another "
                 "Python than %s" % (exts, python))
        return
    r = subprocess.run([python, "-c", "import reshard; print(reshard.__version__)"],
                       cwd=staged, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    got = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    rep.check(r.returncode == 0 and got == version,
              "Python: the build's package reports reshard.__version__ %r"
              % got, "import failed or reported another version:\n%s" % r.stdout)


def conda_version(src: str, version: str, rep: Report) -> None:
    path = os.path.join(src, "packaging", "conda", "recipe.yaml")
    if not os.path.exists(path):
        rep.skip("conda: no packaging/conda/recipe.yaml")
        return
    try:
        import yaml  # type: ignore
        got = (yaml.safe_load(read(path)).get("context") or {}).get("version")
        how = ""
    except ImportError:
        # Without PyYAML (packaging.conda_recipe needs it and says so), the
        # line `  version: "X"` of the context block.
        m = re.search(r"^context:\s*\n(?:[ \t]+.*\n|\s*\n)*?[ \t]+version:\s*"
                      r"['\"]?([^'\"\s#]+)", read(path), re.MULTILINE)
        got = m.group(1) if m else None
        how = " (read without PyYAML)"
    rep.check(got == version, "conda recipe context.version %r is %s%s"
              % (got, version, how), "recipe.yaml says %r" % got)


def debian_version(src: str, version: str, rep: Report) -> None:
    path = os.path.join(src, "packaging", "debian", "changelog")
    if not os.path.exists(path):
        rep.skip("Debian: packaging/debian/changelog does not exist (yet): "
                 "nothing to compare")
        return
    first = read(path).splitlines()[0] if read(path) else ""
    m = re.match(r"^(\S+) \(([^)]+)\)", first)
    if not m:
        rep.fail("Debian: the first line of packaging/debian/changelog, %r, "
                 "is not `<source> (<version>) <dist>; urgency=...`" % first)
        return
    full = m.group(2)
    upstream = re.sub(r"^\d+:", "", full)          # epoch
    upstream = re.sub(r"-[^-]*$", "", upstream)    # Debian revision
    upstream = re.sub(r"[~+].*$", "", upstream)    # ~rc1, +dfsg, +git...
    rep.check(upstream == version, "Debian: changelog's upstream version %r "
              "(%s %s) is %s" % (upstream, m.group(1), full, version),
              "packaging/debian/changelog's first entry is %s" % full)


def lua_version(src: str, version: str, rep: Report) -> None:
    specs = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in (
            "build", "_build", "node_modules")]
        specs += [os.path.join(root, f) for f in files if f.endswith(".rockspec")]
    if not specs:
        rep.skip("Lua: no rockspec in the repository (the version comes from "
                 "the library at run time: reshard._VERSION)")
        return
    for spec in sorted(specs):
        m = re.search(r"""^version\s*=\s*['"]([^'"]+)['"]""", read(spec),
                      re.MULTILINE)
        got = re.sub(r"-\d+$", "", m.group(1)) if m else None
        rel = os.path.relpath(spec, src)
        rep.check(got == version, "Lua: %s version %r is %s" % (rel, got, version),
                  "it says %r" % (m.group(1) if m else None))


def go_version(src: str, version: str, rep: Report) -> None:
    rep.skip("Go: go.mod states no version (Go module versions are VCS tags)")
    path = os.path.join(src, "bindings", "go", "types.go")
    if not os.path.exists(path):
        return
    m = re.search(r"Version is the version of the loaded libreshard, "
                  r"\"(\d+\.\d+\.\d+)\"", read(path))
    if m:
        rep.check(m.group(1) == version, "Go: the doc comment of Version "
                  "quotes %r" % m.group(1),
                  "bindings/go/types.go quotes %r; say %r" % (m.group(1), version))


def major_minor(version: str) -> Tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


# `@since 0.5`, `since 0.5`, `(since\n * 0.5;` across a comment's lines
SINCE = re.compile(r"(?i)(?:@since|\bsince)(?:\s|\*|//)+v?(\d+)\.(\d+)\b")
# a row of docs/ABI.md's table of functions: `| ... | 0.5 |`
SINCE_ROW = re.compile(r"^\|.*\|\s*(\d+)\.(\d+)\s*\|\s*$", re.MULTILINE)


def since_versions(src: str, version: str, rep: Report) -> None:
    mine = major_minor(version)
    headers = os.path.join(src, "capi", "include", "reshard")
    files = sorted(os.path.join(headers, f) for f in os.listdir(headers)
                   if f.endswith(".h")) if os.path.isdir(headers) else []
    files.append(os.path.join(src, "docs", "ABI.md"))
    count, newest, late = 0, (0, 0), 0
    for path in files:
        if not os.path.exists(path):
            rep.fail("no %s to read @since from" % os.path.relpath(path, src))
            continue
        text = read(path)
        found = [(m.start(), m.group(1), m.group(2)) for m in SINCE.finditer(text)]
        if path.endswith(".md"):
            found += [(m.start(), m.group(1), m.group(2))
                      for m in SINCE_ROW.finditer(text)]
        for at, major, minor in sorted(found):
            v = (int(major), int(minor))
            count += 1
            newest = max(newest, v)
            if v > mine:
                late += 1
                rep.fail("%s:%d says since %d.%d, after %s, the version of "
                         "reshard.h (raise RS_VERSION_* there, or correct it)"
                         % (os.path.relpath(path, src),
                            text.count("\n", 0, at) + 1, v[0], v[1], version))
    if count and not late:
        rep.ok("%d `since X.Y` in the public headers and docs/ABI.md, the "
               "newest %d.%d: none after %s" % (count, newest[0], newest[1],
                                                version))
    elif not count:
        rep.fail("found no `@since X.Y` in the public headers and docs/ABI.md")
    path = os.path.join(src, "capi", "reshard.map")
    if os.path.exists(path):
        text = re.sub(r"/\*.*?\*/", " ", read(path), flags=re.DOTALL)
        nodes = [(int(a), int(b)) for a, b in
                 re.findall(r"\bRESHARD_(\d+)\.(\d+)\s*\{", text)]
        top = max(nodes) if nodes else None
        rep.check(top is not None and top <= mine,
                  "capi/reshard.map: the newest version node, RESHARD_%s, is "
                  "not after %s" % ("%d.%d" % top if top else "?", version),
                  "a node for a later release than reshard.h states")


def binding_minimum(src: str, version: str, rep: Report) -> None:
    path = os.path.join(src, "bindings", "python", "CMakeLists.txt")
    if not os.path.exists(path):
        rep.skip("Python: no bindings/python/CMakeLists.txt")
        return
    text = read(path)
    want = "%d.%d" % major_minor(version)
    asks = re.findall(r"find_package\(\s*reshard\s+([0-9.]+)", text) + \
        re.findall(r"\breshard\s*>=\s*([0-9.]+)", text)
    rep.check(bool(asks) and all(a == want for a in asks),
              "Python: bindings/python/CMakeLists.txt asks an installed "
              "libreshard for %s (%s)" % (want, ", ".join(asks) or "nothing"),
              "the binding exposes what %s added; ask for %s" % (want, want))


def docs_versions(src: str, version: str, rep: Report) -> None:
    for rel in ("docs/ABI.md", "packaging/conda/README.md",
                "packaging/debian/README"):
        path = os.path.join(src, rel)
        if not os.path.exists(path):
            continue
        text = read(path)
        named = re.findall(r"libreshard\.so\.(\d+\.\d+\.\d+)", text)
        named += re.findall(r"debian/changelog: (\d+\.\d+\.\d+)-", text)
        if named:
            rep.check(all(v == version for v in named),
                      "%s names version %s" % (rel, ", ".join(sorted(set(named)))),
                      "say %s" % version)


def build_versions(build: Optional[str], version: str, rep: Report) -> None:
    if not build:
        rep.skip("build: no --build-dir: configure_file outputs not checked")
        return
    stale = " (a stale build folder? run cmake --build %s)" % build
    pc = os.path.join(build, "packaging", "reshard.pc")
    if os.path.exists(pc):
        m = re.search(r"^Version:\s*(\S+)", read(pc), re.MULTILINE)
        got = m.group(1) if m else None
        rep.check(got == version, "build: packaging/reshard.pc Version %r" % got,
                  "it says %r%s" % (got, stale))
    else:
        rep.fail("build: no %s (configure_file output of packaging/)" % pc)
    cv = os.path.join(build, "packaging", "reshardConfigVersion.cmake")
    if os.path.exists(cv):
        m = re.search(r'set\(PACKAGE_VERSION "([^"]*)"\)', read(cv))
        got = m.group(1) if m else None
        rep.check(got == version, "build: packaging/reshardConfigVersion.cmake "
                  "PACKAGE_VERSION %r" % got, "it says %r%s" % (got, stale))
    else:
        rep.fail("build: no %s (write_basic_package_version_file output)" % cv)
    libdir = os.path.join(build, "lib")
    real = os.path.join(libdir, "libreshard.so." + version)
    soname = os.path.join(libdir, "libreshard.so." + version.split(".")[0])
    found = sorted(f for f in os.listdir(libdir) if f.startswith("libreshard.so")) \
        if os.path.isdir(libdir) else []
    rep.check(os.path.exists(real) and os.path.islink(soname),
              "build: lib/libreshard.so.%s (SONAME link %s)"
              % (version, os.path.basename(soname)),
              "lib/ has %s%s" % (found or "no libreshard.so*", stale))
    cli = os.path.join(build, "tools", "reshard")
    if os.access(cli, os.X_OK):
        r = subprocess.run([cli, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        want = "reshard %s (libreshard %s)" % (version, version)
        rep.check(r.returncode == 0 and r.stdout.strip() == want,
                  "build: `reshard --version` says %r" % r.stdout.strip(),
                  "expected %r" % want)
    else:
        rep.skip("build: the reshard program is not built (RESHARD_BUILD_TOOLS)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--python", help="interpreter that imports the build's "
                    "Python package")
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    build = os.path.abspath(a.build_dir) if a.build_dir else None
    version = header_version(src)
    rep = Report("packaging.versions")
    print("the version: %s (RS_VERSION_MAJOR/MINOR/PATCH of "
          "capi/include/reshard/reshard.h)\n" % version)
    build_versions(build, version, rep)
    python_version(src, version, rep)
    if build:
        staged_python(build, a.python, version, rep)
    conda_version(src, version, rep)
    debian_version(src, version, rep)
    lua_version(src, version, rep)
    go_version(src, version, rep)
    binding_minimum(src, version, rep)
    docs_versions(src, version, rep)
    since_versions(src, version, rep)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
