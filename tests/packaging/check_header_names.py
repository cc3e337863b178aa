#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest packaging.header_names: no comment of the public headers names an
rs_* or RS_* identifier that does not exist.

    check_header_names.py --source-dir SRC

Read:
  - the public headers, capi/include/reshard/*.h;
  - the linker version script, capi/reshard.map.

Known names:
  - every symbol a `global:` section of the version script names (the
    functions libreshard exports);
  - what the code of the public headers (their comments left out) declares:
    macros (#define), typedef names, struct, union and enum tags, enum
    values, and the static inline helpers they define
    (rs_context_create_mpi, rs_context_create_nccl).

It fails (exit status 1), naming header, line and name, for each name in a
comment (/* */ or //) of a public header that starts with rs_ or RS_ and is
none of these (a bare prefix, `rs_` followed by no name character, is no
name). A name ending in `*` (rs_*, RS_ERR_*) is a pattern: it must
match at least one known name. A header or the script that yields no names
at all fails too (it could not be read as expected). A function declared
RS_API in a header but missing from the version script is not known here:
ctest abi.exports reports it.
"""
from __future__ import annotations

import argparse
import fnmatch
import glob
import os
import re
import sys
from typing import Dict, List, Set, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packaging_common import Report, read  # noqa: E402

HEADER_DIR = os.path.join("capi", "include", "reshard")
VERSION_SCRIPT = os.path.join("capi", "reshard.map")
# An rs_/RS_ name, and a `*` right after it when it is a pattern (rs_*
# alone too); a bare prefix (`rs_ symbols`) names nothing.
NAME = re.compile(r"(?<![A-Za-z0-9_])(?:rs|RS)_(?:[A-Za-z0-9_]+\*?|\*)")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def split_comments(text: str) -> Tuple[str, List[Tuple[int, str]]]:
    """The code of a C file with every comment replaced by a space (line
    breaks kept) and string and character literals emptied, and its
    comments as (first line, text)."""
    code: List[str] = []
    comments: List[Tuple[int, str]] = []
    i, n, line = 0, len(text), 1
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            body = text[i:end]
            comments.append((line, body))
            code.append(" " + "\n" * body.count("\n"))
            line += body.count("\n")
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append((line, text[i:end]))
            i = end
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            code.append(q + q)
            i = j + 1
        else:
            if text[i] == "\n":
                line += 1
            code.append(text[i])
            i += 1
    return "".join(code), comments


def header_names(code: str) -> Dict[str, str]:
    """name -> what it is, for every name the code of a header declares."""
    names: Dict[str, str] = {}
    # Preprocessor lines (with their continuations): macros, then dropped.
    lines, rest = code.split("\n"), []
    k = 0
    while k < len(lines):
        stmt = lines[k]
        while stmt.endswith("\\") and k + 1 < len(lines):
            k += 1
            stmt = stmt[:-1] + " " + lines[k]
        k += 1
        m = re.match(r"\s*#\s*define\s+(%s)" % IDENT, stmt)
        if m:
            names[m.group(1)] = "macro"
        if not stmt.lstrip().startswith("#"):
            rest.append(stmt)
    body = "\n".join(rest)
    for m in re.finditer(r"\b(?:struct|union|enum)\s+(%s)" % IDENT, body):
        names.setdefault(m.group(1), "tag")
    for m in re.finditer(r"\benum\b\s*(?:%s)?\s*\{([^}]*)\}" % IDENT, body):
        for item in m.group(1).split(","):
            v = re.match(r"\s*(%s)" % IDENT, item)
            if v:
                names[v.group(1)] = "enum value"
    # typedef ... NAME;  typedef struct/enum X { ... } NAME;  typedef R (*NAME)(...);
    for m in re.finditer(r"\btypedef\b([^;{}]*(?:\{[^}]*\}[^;{}]*)?);", body):
        decl = m.group(1)
        fp = re.search(r"\(\s*\*\s*(%s)\s*\)" % IDENT, decl)
        last = re.search(r"(%s)\s*(?:\[[^\]]*\]\s*)*$" % IDENT, decl)
        name = fp.group(1) if fp else last.group(1) if last else None
        if name:
            names[name] = "type"
    for m in re.finditer(r"\bstatic\s+inline\b[^;{(]*?\b(%s)\s*\(" % IDENT, body):
        names[m.group(1)] = "inline function"
    return names


def script_symbols(text: str) -> Set[str]:
    """The symbols the global: sections of a linker version script name."""
    code, _ = split_comments(text)
    symbols: Set[str] = set()
    section = None
    for tok in re.findall(r"[A-Za-z_.*?\[\]][A-Za-z0-9_.*?\[\]]*|[{};:]", code):
        if tok in ("global", "local"):
            section = tok
        elif tok == "}":
            section = None
        elif tok in ("{", ";", ":"):
            continue
        elif section == "global":
            symbols.add(tok)
    return symbols


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    rep = Report("packaging.header_names")

    script = os.path.join(src, VERSION_SCRIPT)
    if not os.path.isfile(script):
        rep.fail("%s: missing" % VERSION_SCRIPT)
        return rep.finish()
    exported = script_symbols(read(script))
    rep.check(bool(exported), "%s: %d exported symbols" % (
        VERSION_SCRIPT, len(exported)), "no global: symbol found")

    headers = sorted(glob.glob(os.path.join(src, HEADER_DIR, "*.h")))
    if not headers:
        rep.fail("%s: no header" % HEADER_DIR)
        return rep.finish()
    known: Dict[str, str] = {s: "exported symbol" for s in exported}
    comments: List[Tuple[str, List[Tuple[int, str]]]] = []
    for path in headers:
        rel = os.path.relpath(path, src)
        code, notes = split_comments(read(path))
        declared = header_names(code)
        rep.check(bool(declared), "%s: %d names declared" % (rel, len(declared)),
                  "its code declares nothing")
        for name, kind in declared.items():
            known.setdefault(name, kind)
        comments.append((rel, notes))

    unknown = 0
    mentions = 0
    for rel, notes in comments:
        for first, body in notes:
            for m in NAME.finditer(body):
                name = m.group(0)
                line = first + body.count("\n", 0, m.start())
                mentions += 1
                if name.endswith("*"):
                    if any(fnmatch.fnmatchcase(k, name) for k in known):
                        continue
                    what = "matches no known name"
                elif name in known:
                    continue
                else:
                    what = "is not a symbol of %s, nor a type, macro, enum " \
                           "value or inline function of the public headers" \
                           % VERSION_SCRIPT
                unknown += 1
                rep.fail("%s:%d: %s %s" % (rel, line, name, what))
    if not unknown:
        rep.ok("%d mentions of rs_/RS_ names in the comments of %d headers, "
               "each a name that exists" % (mentions, len(headers)))
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
