#!/usr/bin/env python3
"""Lists the import circles between the files of one crate.

For each crate root of the workspace (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) this builds
the graph file -> module of the same crate the file uses, from `use crate::...` items and
`crate::x::...` paths in code outside `#[cfg(test)]` items (test modules, in a block or in a
file of their own, are left out). A path names the deepest module that has a file of its own:
`crate::check::judge::Verdict` is `check/judge.rs`, `crate::check::Run` is `check/mod.rs`
(shown as `check`). Items of the crate root (`crate::Error` re-exported by `lib.rs`) count for
nothing, and so do the root's own `mod` and `pub use` lines; `--through-root` follows the
root's named re-exports to the module that defines the item instead.

It prints, per crate, each strongly connected component of more than one file (a circle), and
with `-v` the `use` lines that close it. It exits 0 whatever it finds; `--check` exits 1 when
a circle is listed.

usage: import-circles.py [-v] [--through-root] [--check] [DIR...]
       (DIR: a crate directory or a workspace; default: the workspace of this script)
"""
import os
import re
import sys

TEST_ATTR = re.compile(r"#\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b")
INNER_TEST_ATTR = re.compile(r"#!\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b")
MOD_DECL = re.compile(r"\bmod\s+(r#)?(\w+)\s*;")
USE_ITEM = re.compile(r"(?<![\w$])use\s+")
CRATE_PATH = re.compile(r"(?<![\w$:])crate((?:\s*::\s*\w+)+)")
ITEM_KW = re.compile(r"\s*(?:pub\s*(?:\([^)]*\))?\s*)?(\w+)")
TEST_MOD_DECL = re.compile(r"\s*(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(?:r#)?(\w+)\s*;")
RAW_STR = re.compile(r'b?r(#*)"')
CHAR_LIT = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]*\}|.)'|[^\\']'")


def strip(src):
    """The source with comments, string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        else:
            m = RAW_STR.match(src, i) if c in "br" else None
            if m and not _word_before(src, i):
                end = '"' + m.group(1)
                j = src.find(end, m.end())
                j = n if j < 0 else j + len(end)
                out.append(blank(src[i:j]))
                i = j
            elif c == '"' or (c == "b" and src.startswith('b"', i) and not _word_before(src, i)):
                j = i + (2 if c == "b" else 1)
                while j < n and src[j] != '"':
                    j += 2 if src[j] == "\\" else 1
                j += 1
                out.append(blank(src[i:j]))
                i = j
            elif c == "'" or (c == "b" and src.startswith("b'", i) and not _word_before(src, i)):
                j = i + (2 if c == "b" else 1)
                m = CHAR_LIT.match(src, j)
                if m:  # a char literal; otherwise a lifetime or a label
                    out.append(blank(src[i:m.end()]))
                    i = m.end()
                else:
                    out.append(src[i:j])
                    i = j
            else:
                out.append(c)
                i += 1
    return "".join(out)


def _word_before(src, i):
    return i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")


def item_end(code, i):
    """Where the item starting at `i` ends (after its `;` or its closing brace)."""
    kw = ITEM_KW.match(code, i)
    is_use = kw is not None and kw.group(1) == "use"
    depth = 0
    j, n = i, len(code)
    while j < n:
        c = code[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and c == "}" and not is_use:
                return j + 1
        elif c == ";" and depth == 0:
            return j + 1
        j += 1
    return n


def bracket_end(code, i):
    """Where the bracketed group opening at `i` ends."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] in "([{":
            depth += 1
        elif code[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def drop_test_items(code):
    """The code without its `#[cfg(test)]` items, and the names of test modules in files."""
    test_mods = set()
    while True:
        m = TEST_ATTR.search(code)
        if not m:
            return code, test_mods
        j = bracket_end(code, m.start() + 1)  # the attribute, then any further ones
        while code[j:].lstrip().startswith("#["):
            k = len(code) - len(code[j:].lstrip())
            j = bracket_end(code, k + 1)
        end = item_end(code, j)
        decl = TEST_MOD_DECL.match(code, j, end)
        if decl:
            test_mods.add(decl.group(1))
        code = code[: m.start()] + blank(code[m.start(): end]) + code[end:]


def blank(s):
    return "".join("\n" if c == "\n" else " " for c in s)


def use_paths(tree):
    """The full paths of a use tree (`a::{b, c::d as e, f::*}`), each a list of segments."""
    out = []

    def walk(t, prefix):
        i = t.find("{")
        if i < 0:
            out.append(prefix + [x for x in t.split("::") if x])
            return
        head = [x for x in t[:i].split("::") if x]
        for part in split_top(t[i + 1: t.rfind("}")]):
            if part:
                walk(part, prefix + head)

    walk(re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree)), [])
    return out


def split_top(s):
    parts, depth, cur = [], 0, []
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def line_of(code, i):
    return code.count("\n", 0, i) + 1


def crate_refs(code):
    """(line, [segments after `crate`], is_pub_use) for each use of a `crate::` path."""
    refs = []
    spans = []
    for m in USE_ITEM.finditer(code):
        end = item_end(code, m.start())
        tree = code[m.end(): end].rstrip().rstrip(";")
        tree = re.sub(r"\s+as\s+\w+", "", tree)
        is_pub = bool(re.search(r"\bpub\s*(?:\([^)]*\))?\s*$", code[max(0, m.start() - 30): m.start()]))
        for path in use_paths(tree):
            if path and path[0] in ("crate", "::crate"):
                refs.append((line_of(code, m.start()), path[1:], is_pub))
        spans.append((m.start(), end))
    rest = code
    for a, b in spans:
        rest = rest[:a] + blank(rest[a:b]) + rest[b:]
    for m in CRATE_PATH.finditer(rest):
        segs = [x.strip() for x in m.group(1).split("::") if x.strip()]
        refs.append((line_of(rest, m.start()), segs, False))
    return refs


class Crate:
    def __init__(self, name, root):
        self.name = name  # shown name, e.g. crates/baseline or capture (bin ioblame-capture)
        self.root = root  # the root file
        self.files = {}  # module path tuple -> file
        self.code = {}  # module path tuple -> stripped code without test items
        self.load(root, ())

    def load(self, path, modpath):
        try:
            with open(path, encoding="utf-8") as f:
                src = f.read()
        except OSError:
            return
        code = strip(src)
        if INNER_TEST_ATTR.search(code):
            return
        code, test_mods = drop_test_items(code)
        self.files[modpath] = path
        self.code[modpath] = code
        base = os.path.basename(path)
        if modpath == () or base == "mod.rs":
            d = os.path.dirname(path)
        else:
            d = os.path.splitext(path)[0]
        for m in MOD_DECL.finditer(code):
            name = m.group(2)
            if name in test_mods:
                continue
            for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
                if os.path.exists(cand):
                    self.load(cand, modpath + (name,))
                    break

    def show(self, modpath):
        return "::".join(modpath) if modpath else "(root)"

    def resolve(self, segs):
        best = ()
        for k in range(1, len(segs) + 1):
            if tuple(segs[:k]) in self.files:
                best = tuple(segs[:k])
            else:
                break
        return best

    def root_exports(self):
        """Name -> module for the root's named re-exports (`pub use x::{A, B as C}`)."""
        exports = {}
        code = self.code.get((), "")
        for m in USE_ITEM.finditer(code):
            if not re.search(r"\bpub\s*(?:\([^)]*\))?\s*$", code[max(0, m.start() - 30): m.start()]):
                continue
            end = item_end(code, m.start())
            tree = code[m.end(): end].rstrip().rstrip(";")
            renames = dict((b, a) for a, b in re.findall(r"(\w+)\s+as\s+(\w+)", tree))
            for path in use_paths(tree):
                if path and path[0] in ("crate", "self"):
                    path = path[1:]
                if not path or path[-1] == "*":
                    continue
                target = self.resolve(path)
                if target:
                    exports[path[-1]] = target
            for alias, orig in renames.items():
                if orig in exports:
                    exports[alias] = exports[orig]
        return exports

    def graph(self, through_root):
        exports = self.root_exports() if through_root else {}
        edges = {m: {} for m in self.files if m != ()}
        for mod, code in self.code.items():
            if mod == ():
                continue
            for line, segs, _ in crate_refs(code):
                target = self.resolve(segs)
                if target == () and through_root and segs and segs[0] in exports:
                    target = exports[segs[0]]
                if target == () or target == mod:
                    continue
                # a module using its own submodule through `crate::` is still a use
                edges[mod].setdefault(target, []).append(line)
        return edges


def sccs(edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(c for c in out if len(c) > 1)


def crate_roots(d):
    src = os.path.join(d, "src")
    roots = []
    for name in ("lib.rs", "main.rs"):
        if os.path.exists(os.path.join(src, name)):
            roots.append(os.path.join(src, name))
    bind = os.path.join(src, "bin")
    if os.path.isdir(bind):
        for e in sorted(os.listdir(bind)):
            p = os.path.join(bind, e)
            if e.endswith(".rs"):
                roots.append(p)
            elif os.path.exists(os.path.join(p, "main.rs")):
                roots.append(os.path.join(p, "main.rs"))
    return roots


def crate_dirs(d):
    """The crate directories under `d` (a crate, or a workspace's members)."""
    if os.path.isdir(os.path.join(d, "src")):
        return [d]
    out = []
    for sub in ("crates", "."):
        base = os.path.join(d, sub)
        if not os.path.isdir(base):
            continue
        for e in sorted(os.listdir(base)):
            p = os.path.join(base, e)
            if os.path.isfile(os.path.join(p, "Cargo.toml")) and os.path.isdir(os.path.join(p, "src")):
                if e not in ("fuzz", "target"):
                    out.append(p)
    return out


def main():
    args = sys.argv[1:]
    verbose = "-v" in args
    through_root = "--through-root" in args
    check = "--check" in args
    dirs = [a for a in args if not a.startswith("-")]
    if any(a.startswith("-") and a not in ("-v", "--through-root", "--check") for a in args):
        sys.exit(__doc__)
    if not dirs:
        dirs = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    found = 0
    for top in dirs:
        base = top if not os.path.isdir(os.path.join(top, "src")) else os.path.dirname(top)
        for d in crate_dirs(top):
            roots = crate_roots(d)
            for root in roots:
                name = os.path.relpath(d, base)
                if len(roots) > 1:
                    name += " [%s]" % os.path.relpath(root, d)
                crate = Crate(name, root)
                edges = crate.graph(through_root)
                for comp in sccs(edges):
                    found += 1
                    print("%s: %s" % (name, " <-> ".join(crate.show(m) for m in comp)))
                    if verbose:
                        members = set(comp)
                        for m in comp:
                            for t in sorted(edges[m]):
                                if t in members:
                                    lines = ",".join(str(x) for x in edges[m][t])
                                    where = os.path.relpath(crate.files[m], base)
                                    print("    %s -> %s  (%s:%s)" % (crate.show(m), crate.show(t), where, lines))
    if found == 0:
        print("no import circles")
    sys.exit(1 if check and found else 0)


if __name__ == "__main__":
    main()
