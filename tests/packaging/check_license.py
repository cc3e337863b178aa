#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest packaging.license: libreshard is under the Apache License 2.0, and
every place that should say so does.

    check_license.py --source-dir SRC [--fix]

It fails, naming each file, when
  - LICENSE, at the top of the tree, is not the Apache License 2.0 (compared
    byte for byte with Debian's /usr/share/common-licenses/Apache-2.0 where
    that file exists);
  - a source file the project owns does not have the line
    `SPDX-License-Identifier: Apache-2.0`, in a comment of its own syntax,
    as its first line (its second after a `#!` line). Source files: *.c
    *.h *.cu *.cuh *.cpp *.i *.swig *.map *.c.in (C comments, or // where
    the language has them), *.go and go.mod (//), *.lua (--), *.py *.pyi
    *.sh *.cmake *.cmake.in *.pc.in *.yaml *.toml *.rockspec
    CMakeLists.txt (#), and any other file that starts with `#!` (#).
    Not checked: test data (tests/fuzz/corpus, tests/fuzz/regress),
    JSON (no comments), documentation, and Debian's control files;
  - packaging/debian/copyright is not a DEP-5 file whose `Files: *` is
    under Apache-2.0, with that license's text pointing at
    /usr/share/common-licenses/Apache-2.0;
  - bindings/python/pyproject.toml does not say license = "Apache-2.0"
    with LICENSE among its license-files, or bindings/python/LICENSE (a
    link to ../../LICENSE: a Python package may not name a file outside
    its folder) is not the same text.
The conda recipe's license is checked by packaging.conda_recipe.

The files are those `git ls-files` lists when SRC is a git checkout, else
those of the tree less build folders (build*, _build, out, obj-*), debian/
and hidden folders but .ci.

--fix adds the line to each source file that lacks it (after the #! line;
in a Go file with a blank line after it, so that it is not the package's
doc comment) and changes nothing else; run it, then look at the diff.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from typing import List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packaging_common import Report, pyproject_project, read  # noqa: E402

SPDX = "SPDX-License-Identifier: Apache-2.0"
COMMON_LICENSE = "/usr/share/common-licenses/Apache-2.0"

# The comment syntaxes: the line --fix writes, and the comment markers a
# line may use (a C file may say // as well as /* */).
STYLES = {
    "c": ("/* %s */" % SPDX, ("/*", "//")),
    "linker": ("/* %s */" % SPDX, ("/*",)),
    "cpp": ("// %s" % SPDX, ("//", "/*")),
    "go": ("// %s" % SPDX, ("//", "/*")),
    "hash": ("# %s" % SPDX, ("#",)),
    "lua": ("-- %s" % SPDX, ("--",)),
}
BY_SUFFIX = [
    ((".c", ".h", ".cu", ".cuh", ".i", ".swig", ".c.in", ".h.in"), "c"),
    ((".map",), "linker"),
    ((".cpp", ".cc", ".cxx", ".hpp"), "cpp"),
    ((".go", "/go.mod"), "go"),
    ((".lua",), "lua"),
    ((".py", ".pyi", ".sh", ".cmake", ".cmake.in", ".pc.in", ".yaml", ".yml",
      ".toml", ".rockspec", "/CMakeLists.txt"), "hash"),
]
NOT_CHECKED = ("tests/fuzz/corpus/", "tests/fuzz/regress/")
SKIP_DIRS = re.compile(r"^(\.(?!ci$).*|build|build-.*|_build|out|obj-.*|debian|"
                       r"__pycache__|node_modules)$")
LINE = re.compile(r"^\s*(/\*|//|#|--)\s*SPDX-License-Identifier:\s*(.*?)\s*"
                  r"(\*/)?\s*$")


def project_files(src: str) -> Tuple[List[str], str]:
    """Paths relative to src of the files the project owns, and how they
    were found."""
    try:
        top = subprocess.run(["git", "-C", src, "rev-parse", "--show-toplevel"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True)
        if top.returncode == 0 and os.path.samefile(top.stdout.strip(), src):
            out = subprocess.run(["git", "-C", src, "ls-files", "-z"],
                                 stdout=subprocess.PIPE, check=True)
            files = [p for p in out.stdout.decode("utf-8").split("\0") if p]
            return sorted(files), "git ls-files"
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not SKIP_DIRS.match(d)]
        files += [os.path.relpath(os.path.join(root, n), src) for n in names]
    return sorted(files), "the tree (no git checkout)"


def style_of(src: str, rel: str) -> Optional[str]:
    """The comment style of a source file, or None for a file not checked."""
    if rel.startswith(NOT_CHECKED):
        return None
    path = os.path.join(src, rel)
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    slashed = "/" + rel
    for suffixes, style in BY_SUFFIX:
        if slashed.endswith(suffixes):
            return style
    with open(path, "rb") as f:
        return "hash" if f.read(2) == b"#!" else None


def spdx_state(text: str, style: str) -> Tuple[str, str]:
    """('ok', ''), or ('missing' | 'other' | 'misplaced', what is wrong)."""
    lines = text.split("\n")
    at = 1 if lines and lines[0].startswith("#!") else 0
    first = lines[at] if at < len(lines) else ""
    m = LINE.match(first)
    where = "line %d" % (at + 1)
    if m:
        if m.group(1) not in STYLES[style][1]:
            return "other", "%s is a %s comment, not one of %s" % (
                where, m.group(1), " ".join(STYLES[style][1]))
        if m.group(2) != "Apache-2.0":
            return "other", "%s says %r, not Apache-2.0" % (where, m.group(2))
        return "ok", ""
    for n, line in enumerate(lines[:40]):
        if LINE.match(line):
            return "misplaced", ("its SPDX line is line %d; it must be %s"
                                 % (n + 1, where))
    return "missing", "no %r on %s" % (SPDX, where)


def add_line(text: str, style: str) -> str:
    line = STYLES[style][0] + "\n" + ("\n" if style == "go" else "")
    if text.startswith("#!"):
        end = text.find("\n") + 1 or len(text)
        head = text[:end] if text[:end].endswith("\n") else text[:end] + "\n"
        return head + line + text[end:]
    return line + text


def check_license_file(src: str, rep: Report) -> Optional[str]:
    path = os.path.join(src, "LICENSE")
    if not rep.check(os.path.isfile(path), "LICENSE exists", "add the Apache "
                     "License 2.0 text (Debian: %s)" % COMMON_LICENSE):
        return None
    text = read(path)
    rep.check(re.search(r"^\s*Apache License\s+Version 2\.0, January 2004", text)
              is not None and "END OF TERMS AND CONDITIONS" in text,
              "LICENSE is the Apache License, Version 2.0",
              "its start reads %r" % text.strip()[:60])
    if os.path.isfile(COMMON_LICENSE):
        rep.check(read(COMMON_LICENSE) == text,
                  "LICENSE is %s, byte for byte" % COMMON_LICENSE,
                  "it differs: copy that file")
    else:
        rep.skip("no %s here to compare LICENSE with" % COMMON_LICENSE)
    return text


def check_sources(src: str, fix: bool, rep: Report) -> None:
    files, how = project_files(src)
    checked, fixed, bad = 0, [], 0
    for rel in files:
        style = style_of(src, rel)
        if style is None:
            continue
        checked += 1
        path = os.path.join(src, rel)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except UnicodeDecodeError as e:
            bad += 1
            rep.fail("%s: not UTF-8 (%s)" % (rel, e))
            continue
        state, why = spdx_state(text, style)
        if state == "missing" and fix:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(add_line(text, style))
            fixed.append(rel)
            continue
        if state != "ok":
            bad += 1
            rep.fail("%s: %s (add `%s`)" % (rel, why, STYLES[style][0]))
    for rel in fixed:
        print("fixed %s" % rel)
    if bad:
        print("(check_license.py --source-dir %s --fix adds the missing lines)"
              % src)
    if not bad:
        rep.ok("%d source files (of %d from %s) open with the SPDX line%s"
               % (checked, len(files), how,
                  ", %d of them just now (--fix)" % len(fixed) if fixed else ""))


def deb822(text: str) -> List[dict]:
    """Paragraphs of a deb822 file: field (lower case) -> value, with
    continuation lines joined by newlines."""
    paras, cur, key = [], {}, None
    for line in text.split("\n"):
        if not line.strip():
            if cur:
                paras.append(cur)
            cur, key = {}, None
        elif line[0] in " \t" and key:
            cur[key] += "\n" + line.strip()
        elif not line.startswith("#"):
            k, _, v = line.partition(":")
            key = k.strip().lower()
            cur[key] = v.strip()
    if cur:
        paras.append(cur)
    return paras


def check_debian(src: str, rep: Report) -> None:
    path = os.path.join(src, "packaging", "debian", "copyright")
    if not os.path.exists(path):
        rep.skip("Debian: no packaging/debian/copyright")
        return
    paras = deb822(read(path))
    head = paras[0] if paras else {}
    rep.check(head.get("format", "").rstrip("/") ==
              "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0",
              "Debian: copyright is machine-readable (DEP-5 Format: line)",
              "its first paragraph's Format is %r" % head.get("format"))
    star = [p for p in paras if p.get("files", "").split() == ["*"]]
    if not rep.check(len(star) == 1, "Debian: copyright has one `Files: *`",
                     "it has %d" % len(star)):
        return
    lic = star[0].get("license", "")
    rep.check(lic.split("\n")[0].strip() == "Apache-2.0",
              "Debian: `Files: *` is under Apache-2.0",
              "its License is %r" % lic.split("\n")[0])
    rep.check(bool(star[0].get("copyright")), "Debian: `Files: *` has a "
              "Copyright field", "missing")
    # The license's text: in the Files paragraph, or a stand-alone one.
    texts = [p.get("license", "") for p in paras
             if p.get("license", "").split("\n")[0].strip() == "Apache-2.0"]
    rep.check(any(COMMON_LICENSE in t for t in texts),
              "Debian: the Apache-2.0 license text points at %s" % COMMON_LICENSE,
              "no License: Apache-2.0 paragraph with that path")


def check_python(src: str, license_text: Optional[str], rep: Report) -> None:
    found = pyproject_project(src)
    if found is None:
        rep.skip("Python: no bindings/python/pyproject.toml")
        return
    text, project = found
    rep.check(project.get("license") == "Apache-2.0",
              "Python: pyproject.toml license = \"Apache-2.0\" (PEP 639)",
              "it says %r" % project.get("license"))
    files = project.get("license-files")
    if files is None:
        m = re.search(r"^license-files\s*=\s*\[([^\]]*)\]", text, re.MULTILINE)
        files = re.findall(r"[\"']([^\"']*)[\"']", m.group(1)) if m else []
    rep.check("LICENSE" in (files or []),
              "Python: pyproject.toml license-files names LICENSE",
              "license-files is %r" % (files,))
    lic = os.path.join(src, "bindings", "python", "LICENSE")
    rep.check(os.path.isfile(lic) and license_text is not None
              and read(lic) == license_text,
              "Python: bindings/python/LICENSE is the top LICENSE%s" % (
                  " (a link to %s)" % os.readlink(lic) if os.path.islink(lic) else ""),
              "make it a link: ln -s ../../LICENSE bindings/python/LICENSE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--fix", action="store_true",
                    help="add the SPDX line where it is missing")
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    rep = Report("packaging.license")
    license_text = check_license_file(src, rep)
    check_sources(src, a.fix, rep)
    check_debian(src, rep)
    check_python(src, license_text, rep)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
