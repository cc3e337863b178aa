#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest packaging.conda_recipe: packaging/conda/recipe.yaml agrees with the
CMake project and with what `cmake --install` really installs.

    check_conda_recipe.py --source-dir SRC --build-dir BUILD [--cmake CMAKE]

No conda build tool runs here: the recipe is parsed with PyYAML (its
`${{ ... }}` Jinja expressions are plain strings to YAML) and cross-checked.
It fails, naming what disagrees, when
  - its version (context.version) is not the one reshard.h states;
  - its license is not Apache-2.0 with LICENSE as about.license_file;
  - its outputs miss a transport module core/CMakeLists.txt builds, or name
    a module file other than the one CMake makes (libreshard-<name>.so.<major>);
  - a package_contents entry (read the way rattler-build reads it on Linux)
    matches no file of `cmake --install BUILD --prefix <tmp>`, an installed
    file is in no output (or in two), or build_output.sh ships other files
    for an output than its package_contents lists;
  - the Python package's module list disagrees with bindings/python;
  - obvious dependencies are missing (the MPI module on openmpi and
    xxhash, the NCCL module on a CUDA compiler, cudart and nccl, the
    modules pinned exactly to libreshard, libreshard's run_exports pinned to
    the ABI major, ...).
Parts the build folder did not build (the NCCL module without CUDA, the
tools without json-c, the Lua binding) are reported as skipped, saying why.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packaging_common import Report, cmake_cache, header_version, load_yaml  # noqa: E402

JINJA = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


# ---- globs ----------------------------------------------------------------
def rattler_glob(glob: str) -> "re.Pattern[str]":
    """A rattler-build (globset) glob as a regex over prefix-relative paths:
    `*` and `**` match any characters ('/' included: globset's default),
    `?` one character, `[..]`/`[!..]` classes, `{a,b}` alternatives."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append(".*")
            i += 1
        elif c == "?":
            out.append(".")
            i += 1
        elif c == "[":
            j = glob.find("]", i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = glob[i + 1:j]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body + "]")
            i = j + 1
        elif c == "{":
            j = glob.find("}", i + 1)
            if j < 0:
                out.append(re.escape(c))
                i += 1
                continue
            alts = glob[i + 1:j].split(",")
            out.append("(?:" + "|".join(re.escape(a) for a in alts) + ")")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("^" + "".join(out) + "$")


def shell_glob(pattern: str) -> "re.Pattern[str]":
    """A bash glob (as build_output.sh's `ship` expands it) as a regex:
    `*` and `?` stay inside one path component; a match that is a folder
    stands for every file under it."""
    out = []
    for c in pattern:
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(c))
    return re.compile("^" + "".join(out) + "(?:/.*)?$")


def matching(pattern: "re.Pattern[str]", paths: Iterable[str]) -> List[str]:
    return sorted(p for p in paths if pattern.match(p))


# ---- the recipe -------------------------------------------------------------
class Recipe:
    def __init__(self, path: str, data: Any, rep: Report) -> None:
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.data = data if isinstance(data, dict) else {}
        self.rep = rep
        ctx = self.data.get("context") or {}
        self.context = {k: str(v) for k, v in ctx.items()
                        if isinstance(v, (str, int, float))}

    def render(self, s: Any) -> str:
        """${{ name }} of a context variable replaced by its value; other
        expressions are left as they are."""
        def sub(m: "re.Match[str]") -> str:
            expr = m.group(1)
            return self.context.get(expr, m.group(0))
        return JINJA.sub(sub, str(s))

    def outputs(self) -> List[Dict[str, Any]]:
        outs = self.data.get("outputs") or []
        return [o for o in outs if isinstance(o, dict) and "package" in o]


def flatten(items: Any) -> List[Any]:
    """A recipe list with its if/then/else entries expanded (both branches:
    the check does not evaluate selectors)."""
    result: List[Any] = []
    if items is None:
        return result
    if not isinstance(items, list):
        items = [items]
    for it in items:
        if isinstance(it, dict) and "if" in it:
            result += flatten(it.get("then"))
            result += flatten(it.get("else"))
        else:
            result.append(it)
    return result


def dep_key(spec: Any) -> str:
    """'openmpi', 'cmake', 'compiler:c', 'stdlib:c', 'pin:libreshard' for
    the requirement strings of a recipe."""
    s = str(spec).strip()
    m = JINJA.fullmatch(s)
    if m:
        expr = m.group(1)
        f = re.match(r"(\w+)\(\s*['\"]([^'\"]+)['\"]", expr)
        if f:
            return "%s:%s" % ({"pin_subpackage": "pin",
                               "pin_compatible": "pin_compatible"}.get(
                                   f.group(1), f.group(1)), f.group(2))
        return expr
    return re.split(r"[\s<>=!~]", s, 1)[0]


def deps(output: Dict[str, Any], section: str) -> Dict[str, str]:
    """key -> the requirement's text, of requirements.<section>."""
    reqs = (output.get("requirements") or {}).get(section)
    if isinstance(reqs, dict):  # run_exports: {weak: [...], strong: [...]}
        reqs = sum((flatten(v) for v in reqs.values()), [])
    return {dep_key(d): str(d) for d in flatten(reqs)}


def contents_tests(output: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [t["package_contents"] for t in (output.get("tests") or [])
            if isinstance(t, dict) and isinstance(t.get("package_contents"), dict)]


def contents_globs(recipe: Recipe, output: Dict[str, Any]
                   ) -> Tuple[List[Tuple[str, str, List["re.Pattern[str]"]]],
                              List[Tuple[str, "re.Pattern[str]"]], List[str]]:
    """(exists, not_exists, site_packages) of an output's package_contents,
    as rattler-build reads them on Linux: exists entries are
    (section, text, [regexes, any of which must match]); site_packages are
    the dotted module names."""
    exists: List[Tuple[str, str, List["re.Pattern[str]"]]] = []
    not_exists: List[Tuple[str, "re.Pattern[str]"]] = []
    site: List[str] = []
    for pc in contents_tests(output):
        for e in flatten(pc.get("lib")):
            e = recipe.render(e)
            if e.endswith(".so") or ".so." in e or e.endswith(".a"):
                pats = [rattler_glob("lib/" + e)]
            else:
                pats = [rattler_glob("lib/{,lib}%s.so" % e),
                        rattler_glob("lib/{,lib}%s.so.*" % e)]
            exists.append(("lib", e, pats))
        for e in flatten(pc.get("include")):
            e = recipe.render(e)
            exists.append(("include", e, [rattler_glob("include/" + e)]))
        for e in flatten(pc.get("bin")):
            e = recipe.render(e)
            exists.append(("bin", e, [rattler_glob("bin/" + e)]))
        files = pc.get("files")
        if isinstance(files, dict):
            ex, nex = files.get("exists"), files.get("not_exists")
        else:
            ex, nex = files, None
        for e in flatten(ex):
            e = recipe.render(e)
            exists.append(("files", e, [rattler_glob(e)]))
        for e in flatten(nex):
            e = recipe.render(e)
            not_exists.append((e, rattler_glob(e)))
        for e in flatten(pc.get("site_packages")):
            e = recipe.render(e)
            site.append(e)
            if "/" in e:
                pats = [rattler_glob("lib/python*/site-packages/" + e)]
            else:
                rel = e.replace(".", "/")
                pats = [rattler_glob("lib/python*/site-packages/%s.py" % rel),
                        rattler_glob("lib/python*/site-packages/%s/__init__.py"
                                     % rel)]
            exists.append(("site_packages", e, pats))
    return exists, not_exists, site


SITE = re.compile(r"^lib/python[^/]*/site-packages/")


def script_file(output: Dict[str, Any]) -> Tuple[Optional[str], Dict[str, str]]:
    """(the build script's file name, its env) of an output."""
    script = (output.get("build") or {}).get("script")
    if isinstance(script, dict) and script.get("file"):
        f = str(script["file"])
        env = {k: str(v) for k, v in (script.get("env") or {}).items()}
        return (f if os.path.splitext(f)[1] else f + ".sh"), env
    if isinstance(script, str) and re.fullmatch(r"[\w./-]+\.sh", script):
        return script, {}
    return None, {}


def case_blocks(script_text: str) -> Dict[str, str]:
    """label -> body of the `case` branches of a shell script."""
    blocks: Dict[str, str] = {}
    for m in re.finditer(r"^\s*([\w|-]+)\)\s*\n(.*?)^\s*;;", script_text,
                         re.MULTILINE | re.DOTALL):
        for label in m.group(1).split("|"):
            blocks[label] = m.group(2)
    return blocks


def ship_patterns(body: str) -> List[str]:
    """The arguments of the `ship` calls of a case branch."""
    joined = re.sub(r"\\\n", " ", body)
    pats: List[str] = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("ship "):
            pats += [a.strip("'\"") for a in line.split()[1:]]
    return pats


# ---- the CMake project --------------------------------------------------------
def cmake_modules(source_dir: str, major: str) -> Dict[str, str]:
    """Transport modules core/CMakeLists.txt builds: target -> the file
    name (PREFIX + OUTPUT_NAME + SUFFIX, ${PROJECT_VERSION_MAJOR} filled in)."""
    path = os.path.join(source_dir, "core", "CMakeLists.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    mods: Dict[str, str] = {}
    for m in re.finditer(r"add_library\(\s*(\w+)\s+MODULE\b", text):
        target = m.group(1)
        props = re.search(r"set_target_properties\(\s*%s\s+PROPERTIES(.*?)\)"
                          % re.escape(target), text, re.DOTALL)
        body = props.group(1) if props else ""

        def prop(name: str, default: str) -> str:
            p = re.search(r"\b%s\s+(\"[^\"]*\"|\S+)" % name, body)
            return p.group(1).strip('"') if p else default
        name = (prop("PREFIX", "lib") + prop("OUTPUT_NAME", target)
                + prop("SUFFIX", ".so"))
        mods[target] = name.replace("${PROJECT_VERSION_MAJOR}", major)
    return mods


def install_tree(cmake: str, build_dir: str, rep: Report
                 ) -> Optional[Set[str]]:
    """Files (and symlinks) `cmake --install` puts in a fresh prefix, as
    paths relative to it, the install folders mapped to lib/ include/ bin/
    share/ share/man/ (as build_output.sh configures them)."""
    prefix = tempfile.mkdtemp(prefix="reshard-conda-check-")
    try:
        r = subprocess.run([cmake, "--install", build_dir, "--prefix", prefix],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0:
            rep.fail("`%s --install %s --prefix %s` failed (exit %d; build "
                     "the folder first):\n%s" % (cmake, build_dir, prefix,
                                                 r.returncode, r.stdout[-3000:]))
            return None
        files: Set[str] = set()
        for root, dirs, names in os.walk(prefix):
            for n in names + [d for d in dirs
                              if os.path.islink(os.path.join(root, d))]:
                files.add(os.path.relpath(os.path.join(root, n), prefix))
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    cache = cmake_cache(build_dir)
    mapping = []
    pydir = cache.get("RESHARD_PYTHON_INSTALL_DIR", "").strip("/")
    if pydir and not SITE.match(pydir + "/"):
        mapping.append((pydir + "/", "lib/python3/site-packages/"))
    for var, std in (("CMAKE_INSTALL_LIBDIR", "lib"),
                     ("CMAKE_INSTALL_INCLUDEDIR", "include"),
                     ("CMAKE_INSTALL_BINDIR", "bin"),
                     ("CMAKE_INSTALL_DATADIR", "share"),
                     ("CMAKE_INSTALL_MANDIR", "share/man")):
        d = cache.get(var, std).strip("/")
        if d and not os.path.isabs(cache.get(var, std)) and d != std:
            mapping.append((d + "/", std + "/"))
    mapping.sort(key=lambda m: -len(m[0]))

    def norm(p: str) -> str:
        for a, b in mapping:
            if p.startswith(a):
                return b + p[len(a):]
        return p
    return {norm(p) for p in files}


def pyproject(source_dir: str) -> Dict[str, Any]:
    """name and build-system requires of bindings/python/pyproject.toml."""
    path = os.path.join(source_dir, "bindings", "python", "pyproject.toml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    name = re.search(r'^\[project\][^\[]*?^name\s*=\s*"([^"]+)"', text,
                     re.MULTILINE | re.DOTALL)
    req = re.search(r"^requires\s*=\s*\[([^\]]*)\]", text, re.MULTILINE)
    return {"name": name.group(1) if name else None,
            "requires": re.findall(r'"([^"]+)"', req.group(1)) if req else []}


# ---- the checks ---------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--recipe", default=None,
                    help="default: SOURCE/packaging/conda/recipe.yaml")
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    build = os.path.abspath(a.build_dir)
    recipe_path = a.recipe or os.path.join(src, "packaging", "conda", "recipe.yaml")
    rep = Report("packaging.conda_recipe")
    if not os.path.exists(recipe_path):
        rep.fail("no conda recipe at %s" % recipe_path)
        return rep.finish()
    recipe = Recipe(recipe_path, load_yaml(recipe_path), rep)
    d = recipe.data
    version = header_version(src)
    major = version.split(".")[0]
    print("recipe %s\nproject version %s (capi/include/reshard/reshard.h)\n"
          % (recipe_path, version))

    # -- the recipe as a whole --
    rep.check(d.get("schema_version") == 1, "schema_version is 1",
              "it is %r" % d.get("schema_version"))
    cv = (d.get("context") or {}).get("version")
    rep.check(isinstance(cv, str) and cv == version,
              "context.version %r is the project version %s" % (cv, version),
              "recipe.yaml says %r, reshard.h says %s (the version is written "
              "once, in reshard.h: change the recipe)" % (cv, version))
    rv = recipe.render((d.get("recipe") or {}).get("version", ""))
    rep.check(rv == version, "recipe.version renders to %s" % version,
              "it renders to %r" % rv)
    for key in ("package", "requirements"):
        rep.check(key not in d, "no top-level %s (multi-output recipe)" % key,
                  "rattler-build forbids a top-level %s beside outputs" % key)
    spath = (d.get("source") or {}).get("path")
    rep.check(bool(spath) and os.path.isdir(os.path.join(recipe.dir, str(spath)))
              and os.path.samefile(os.path.join(recipe.dir, str(spath)), src),
              "source.path %r is the repository" % spath,
              "it does not lead from %s to %s" % (recipe.dir, src))

    # -- the license: the project's (LICENSE, packaging.license) --
    about = d.get("about") or {}
    rep.check(about.get("license") == "Apache-2.0",
              "about.license is Apache-2.0 (LICENSE)",
              "it is %r" % about.get("license"))
    lfiles = [str(e) for e in flatten(about.get("license_file"))]
    # rattler-build looks for a license file in the source, then the recipe
    # folder.
    found = [e for e in lfiles if os.path.isfile(os.path.join(src, e))
             or os.path.isfile(os.path.join(recipe.dir, e))]
    rep.check("LICENSE" in found and found == lfiles,
              "about.license_file %s (in the source)" % lfiles,
              "it is %r; it must name LICENSE, and every file it names must "
              "exist in %s or %s" % (lfiles, src, recipe.dir))

    outs = recipe.outputs()
    names = [str(o["package"].get("name")) for o in outs]
    rep.check(len(set(names)) == len(names) and bool(names),
              "outputs %s" % ", ".join(names), "output names repeat or none")
    by_name = {n: o for n, o in zip(names, outs)}

    # -- files the recipe names --
    scripts: Dict[str, Tuple[str, Dict[str, str]]] = {}
    for n, o in by_name.items():
        f, env = script_file(o)
        if f:
            p = os.path.join(recipe.dir, f)
            if rep.check(os.path.isfile(p), "%s: build script %s exists" % (n, f),
                         "no file %s" % p):
                scripts[n] = (p, env)
        for t in o.get("tests") or []:
            files = t.get("files") if isinstance(t, dict) else None
            if not isinstance(files, dict):
                continue
            for where, base in (("recipe", recipe.dir), ("source", src)):
                for e in flatten(files.get(where)):
                    p = os.path.join(base, str(e))
                    rep.check(os.path.exists(p), "%s: test file %s:%s exists"
                              % (n, where, e), "no %s" % p)

    # -- transport modules: one output each, named as CMake names the file --
    modules = cmake_modules(src, major)
    rep.check(bool(modules), "core/CMakeLists.txt builds transport modules: %s"
              % ", ".join(sorted(modules.values())), "found none")
    module_of_output: Dict[str, str] = {}
    for target, fname in sorted(modules.items()):
        pkg = re.sub(r"\.so(\..*)?$", "", fname)  # libreshard-mpi
        o = by_name.get(pkg)
        if not rep.check(o is not None, "module %s (%s) has the output %s"
                         % (fname, target, pkg),
                         "no output named %s in the recipe" % pkg):
            continue
        module_of_output[pkg] = fname
        exists, _, _ = contents_globs(recipe, o)
        listed = [e for sec, e, pats in exists
                  if any(p.match("lib/" + fname) for p in pats)]
        rep.check(bool(listed), "%s lists lib/%s" % (pkg, fname),
                  "its package_contents names %s, not lib/%s (CMake makes "
                  "OUTPUT_NAME+SUFFIX = %s)" % (
                      [e for _, e, _ in exists] or "nothing", fname, fname))
    for n in names:
        if re.match(r"^libreshard-", n) and n not in module_of_output:
            rep.fail("output %s looks like a transport module, but "
                     "core/CMakeLists.txt builds no module %s.so.%s"
                     % (n, n, major))

    # -- the install tree --
    print("\n`cmake --install %s`:" % build)
    tree = install_tree(a.cmake, build, rep)
    if tree is None:
        return rep.finish()
    for p in sorted(tree):
        print("      " + p)
    built_modules = {f for f in modules.values() if "lib/" + f in tree}
    cache = cmake_cache(build)

    claimed: Dict[str, List[str]] = {p: [] for p in tree}
    per_output: Dict[str, Set[str]] = {}
    for n, o in by_name.items():
        exists, not_exists, site = contents_globs(recipe, o)
        mine: Set[str] = set()
        absent_reason = None
        if n in module_of_output and module_of_output[n] not in built_modules:
            absent_reason = ("%s is not built in %s (its file name was "
                             "checked against core/CMakeLists.txt)"
                             % (module_of_output[n], build))
        for sec, e, pats in exists:
            text = "%s: package_contents %s %r" % (n, sec, e)
            if sec == "site_packages" or e.startswith("lib/python"):
                if not any(SITE.match(p) for p in tree):
                    continue  # no Python binding here: checked below
            hits = sorted({p for pat in pats for p in matching(pat, tree)})
            if hits:
                rep.ok("%s matches %s" % (text, ", ".join(hits)))
                mine.update(hits)
            elif absent_reason:
                rep.skip("%s: %s" % (text, absent_reason))
            elif sec == "bin" or e.startswith("share/"):
                if cache.get("RESHARD_BUILD_TOOLS", "ON").upper() in (
                        "OFF", "0", "FALSE", "NO"):
                    rep.skip("%s: the tools are not built in %s "
                             "(RESHARD_BUILD_TOOLS=OFF)" % (text, build))
                else:
                    rep.fail("%s matches no file `cmake --install` makes" % text)
            else:
                rep.fail("%s matches no file `cmake --install` makes" % text)
        for e, pat in not_exists:
            bad = matching(pat, mine)
            rep.check(not bad, "%s: not_exists %r excludes its own files"
                      % (n, e), "it matches %s, which the output lists" % bad)
            if not matching(pat, tree):
                rep.skip("%s: not_exists %r matches nothing in this install "
                         "(module not built here?)" % (n, e))
        per_output[n] = mine
        for p in mine:
            claimed[p].append(n)

    # every installed file: in exactly one output, or set aside with a reason
    not_packaged = (d.get("extra") or {}).get("not_packaged") or []
    aside = []
    for entry in not_packaged:
        g = entry.get("glob") if isinstance(entry, dict) else entry
        why = entry.get("why") if isinstance(entry, dict) else None
        rep.check(bool(why), "extra.not_packaged %r gives its reason" % g,
                  "add why: to it")
        aside.append((str(g), rattler_glob(str(g))))
        if not matching(rattler_glob(str(g)), tree):
            rep.skip("extra.not_packaged %r matches nothing in this install "
                     "(not built here?)" % g)
    problems, set_aside_n = 0, 0
    for p in sorted(tree):
        owners = claimed[p]
        set_aside = [g for g, pat in aside if pat.match(p)]
        if len(owners) == 1 and not set_aside:
            continue
        if not owners and set_aside:
            set_aside_n += 1
            continue
        problems += 1
        if len(owners) > 1:
            rep.fail("%s is in the package_contents of %s: an installed file "
                     "belongs to one output" % (p, " and ".join(owners)))
        elif owners:
            rep.fail("%s is in %s and in extra.not_packaged %s"
                     % (p, owners[0], set_aside))
        else:
            kind = ("header" if p.startswith("include/") else
                    "pkg-config file" if p.startswith("lib/pkgconfig/") else
                    "CMake package file" if p.startswith("lib/cmake/") else
                    "library or module" if p.startswith("lib/") else "file")
            rep.fail("installed %s %s is in no output's package_contents "
                     "(and not in extra.not_packaged)" % (kind, p))
    if not problems:
        rep.ok("every installed file is in exactly one output (%d) or set "
               "aside in extra.not_packaged (%d)"
               % (len(tree) - set_aside_n, set_aside_n))

    # build_output.sh ships, for each output, what its package_contents lists
    for n, (path, env) in sorted(scripts.items()):
        label = env.get("RESHARD_OUTPUT")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        blocks = case_blocks(text)
        if label is None:
            continue
        if not rep.check(label in blocks, "%s: %s has a branch %s)" % (
                n, os.path.basename(path), label),
                "RESHARD_OUTPUT=%s has no case branch" % label):
            continue
        pats = ship_patterns(blocks[label])
        if not pats:
            continue
        if "-G Ninja" in text:
            rep.check("ninja" in deps(by_name[n], "build"),
                      "%s: ninja in build requirements (the script uses "
                      "-G Ninja)" % n, "missing")
        shipped = {p for s in pats for p in matching(shell_glob(s), tree)}
        if n in module_of_output and module_of_output[n] not in built_modules:
            rep.skip("%s: what %s ships (%s) is not in this install: %s"
                     % (n, os.path.basename(path), " ".join(pats),
                        "module not built here"))
            continue
        if not shipped and (n == "reshard-tools" or any(
                s.startswith(("bin/", "share/")) for s in pats)):
            rep.skip("%s: what %s ships (%s) is not in this install (tools "
                     "not built here)" % (n, os.path.basename(path), " ".join(pats)))
            continue
        extra_ship = sorted(shipped - per_output[n])
        missing = sorted(per_output[n] - shipped)
        rep.check(not extra_ship and not missing,
                  "%s: %s ships exactly its package_contents (%d files)"
                  % (n, os.path.basename(path), len(shipped)),
                  "ships but does not list %s; lists but does not ship %s"
                  % (extra_ship or "nothing", missing or "nothing"))

    # -- the libreshard output --
    lib = by_name.get("libreshard")
    if rep.check(lib is not None, "output libreshard exists", "missing"):
        b = deps(lib, "build")
        for k in ("compiler:c", "cmake"):
            rep.check(k in b, "libreshard: %s in build requirements" % k, "missing")
        rx = deps(lib, "run_exports")
        pin = rx.get("pin:libreshard", "")
        m = re.search(r"(?:upper_bound|max_pin)\s*=\s*['\"]([x.]+)['\"]", pin)
        rep.check(bool(m) and m.group(1) == "x",
                  "libreshard: run_exports pin to the ABI major (upper_bound='x', "
                  "SONAME libreshard.so.%s)" % major,
                  "run_exports has %r; the SONAME changes only with the major "
                  "version (docs/ABI.md), so pin_subpackage('libreshard', "
                  "upper_bound='x')" % (pin or "no pin_subpackage('libreshard')"))
        exists, _, _ = contents_globs(recipe, lib)
        for f in ("libreshard.so.%s" % major, "libreshard.so.%s" % version):
            rep.check(any(p.match("lib/" + f) for _, _, ps in exists for p in ps),
                      "libreshard lists lib/%s" % f, "not in its package_contents")

    # -- modules: their engines, and libreshard of the same release --
    for pkg in module_of_output:
        o = by_name[pkg]
        run = deps(o, "run")
        rep.check("exact=true" in run.get("pin:libreshard", "").replace(
            " ", "").lower(), "%s: runs with exactly its libreshard "
            "(pin_subpackage('libreshard', exact=True))" % pkg,
            "run has %s: libreshard loads only the module of its own release "
            "(RSI_MODULE_ABI)" % (sorted(run.values()) or "nothing"))
        b, h = deps(o, "build"), deps(o, "host")
        rep.check("compiler:c" in b, "%s: compiler('c') in build" % pkg, "missing")
    mpi = by_name.get("libreshard-mpi")
    if mpi is not None:
        h, r, b = deps(mpi, "host"), deps(mpi, "run"), deps(mpi, "build")
        rep.check("openmpi" in h, "libreshard-mpi: openmpi in host",
                  "host has %s" % (sorted(h) or "nothing"))
        rep.check("openmpi" in r or "mpi" in r, "libreshard-mpi: openmpi in run",
                  "run has %s" % sorted(r))
        core = open(os.path.join(src, "core", "CMakeLists.txt"),
                    encoding="utf-8").read()
        if "libxxhash" in core:
            rep.check("xxhash" in h, "libreshard-mpi: xxhash in host (the MPI "
                      "module links libxxhash, core/CMakeLists.txt)", "missing")
        if "pkg_check_modules" in core:
            rep.check("pkg-config" in b, "libreshard-mpi: pkg-config in build "
                      "(core/CMakeLists.txt uses pkg_check_modules)", "missing")
    nccl = by_name.get("libreshard-nccl")
    if nccl is not None:
        h, b = deps(nccl, "host"), deps(nccl, "build")
        rep.check("compiler:cuda" in b or "cuda-nvcc" in b,
                  "libreshard-nccl: a CUDA compiler (compiler('cuda') / "
                  "cuda-nvcc) in build", "build has %s" % sorted(b))
        rep.check("compiler:cxx" in b, "libreshard-nccl: compiler('cxx') in "
                  "build (nvcc links with the host C++ compiler: libstdc++)",
                  "missing")
        for k in ("cuda-cudart-dev", "nccl"):
            rep.check(k in h, "libreshard-nccl: %s in host" % k,
                      "host has %s" % sorted(h))
        skip = " ".join(str(s) for s in flatten(
            (nccl.get("build") or {}).get("skip")))
        rep.check("cuda_compiler_version" in skip,
                  "libreshard-nccl: skipped without CUDA (%s)" % skip,
                  "build.skip should name cuda_compiler_version == \"None\"")

    # -- tools --
    tools = by_name.get("reshard-tools")
    tools_cmake = os.path.join(src, "tools", "CMakeLists.txt")
    if tools is not None and os.path.exists(tools_cmake):
        text = open(tools_cmake, encoding="utf-8").read()
        if "json-c" in text:
            rep.check("json-c" in deps(tools, "host"),
                      "reshard-tools: json-c in host (tools/CMakeLists.txt)",
                      "missing")

    # -- the Python package --
    pp = pyproject(src)
    py_outs = [n for n, o in by_name.items()
               if contents_globs(recipe, o)[2] or "python" in deps(o, "host")]
    py_outs = [n for n in py_outs if n not in module_of_output]
    if rep.check(bool(py_outs), "an output builds the Python package",
                 "no output has python in host and site_packages contents"):
        n = py_outs[0]
        o = by_name[n]
        rep.check(n == pp["name"], "Python output named %s, as pyproject.toml "
                  "names the project" % n,
                  "pyproject.toml names it %r" % pp["name"])
        h, b, r = deps(o, "host"), deps(o, "build"), deps(o, "run")
        for k in ("python", "pip"):
            rep.check(k in h, "%s: %s in host" % (n, k), "missing")
        rep.check("python" in r, "%s: python in run" % n, "missing")
        rep.check("swig" in b, "%s: swig in build (bindings/python runs SWIG)"
                  % n, "missing")
        rep.check("pin:libreshard" in h or "libreshard" in h,
                  "%s: libreshard in host (built against the libreshard output)"
                  % n, "host has %s" % sorted(h))
        for req in pp["requires"]:
            rname = dep_key(req)
            low = re.search(r">=\s*([\w.]+)", req)
            have = h.get(rname, "")
            ok = bool(have) and (not low or low.group(1) in have)
            rep.check(ok, "%s: host has %s (pyproject.toml build-system "
                      "requires %s)" % (n, have or rname, req),
                      "host has %r" % (have or None))
        if n in scripts:
            path, env = scripts[n]
            body = case_blocks(open(path, encoding="utf-8").read()).get(
                env.get("RESHARD_OUTPUT", ""), "")
            rep.check("RESHARD_PYTHON_LIBRARY=system" in body,
                      "%s: pip builds against the libreshard output "
                      "(RESHARD_PYTHON_LIBRARY=system)" % n,
                      "the build script's branch does not say so")
        # modules listed against bindings/python (and the build's staged
        # package, which also has the SWIG module and the extension)
        pkg_src = os.path.join(src, "bindings", "python")
        staged = os.path.join(build, "bindings", "python")
        have_staged = os.path.isdir(os.path.join(staged, "reshard"))
        pyc = open(os.path.join(pkg_src, "CMakeLists.txt"), encoding="utf-8").read()
        generated = set(re.findall(r"-module\s+(\w+)", pyc))
        _, _, site = contents_globs(recipe, o)
        for mod in site:
            rel = mod.replace(".", "/")
            cands = [rel + ".py", rel + "/__init__.py"]
            found = any(os.path.exists(os.path.join(base, c))
                        for base in ([pkg_src] + ([staged] if have_staged else []))
                        for c in cands)
            if not found and mod.split(".")[-1] in generated and not have_staged:
                rep.skip("%s: site_packages %s is made by SWIG (-module %s) "
                         "and the Python binding is not built in %s"
                         % (n, mod, mod.split(".")[-1], build))
                continue
            rep.check(found, "%s: site_packages %s is a module of the package"
                      % (n, mod), "no %s in bindings/python%s" % (
                          " or ".join(cands),
                          " or the build's staged package" if have_staged else ""))
        listed = set(site)
        # every module of bindings/python/reshard (the wheel ships them all)
        modules_src = sorted("reshard." + f[:-3] for f in os.listdir(
            os.path.join(pkg_src, "reshard")) if f.endswith(".py")
            and f != "__init__.py")
        for mod in ["reshard"] + modules_src:
            rep.check(mod in listed, "%s: site_packages lists %s" % (n, mod),
                      "bindings/python/reshard has it; add it to package_contents")
        exists, _, _ = contents_globs(recipe, o)
        for sec, e, pats in exists:
            if not e.startswith("lib/python"):
                continue
            rel = re.sub(r"^lib/python[^/]*/site-packages/", "", e)
            pat = rattler_glob(rel)
            pool = []
            for base in [pkg_src] + ([staged] if have_staged else []):
                for root, _, fs in os.walk(os.path.join(base, "reshard")):
                    pool += [os.path.relpath(os.path.join(root, f), base) for f in fs]
            if matching(pat, pool):
                rep.ok("%s: files %r matches %s" % (n, e, matching(pat, pool)[0]))
            elif not have_staged:
                rep.skip("%s: files %r: the Python binding is not built in %s"
                         % (n, e, build))
            else:
                rep.fail("%s: files %r matches nothing the Python package has"
                         % (n, e))

    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
