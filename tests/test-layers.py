#!/usr/bin/env python3
"""test-layers BUILD_DIR FOLDER... --glib-free FOLDER... [--python PACKAGE_DIR] — the layers of DESIGN.md,
read from the objects the build made (nm), so that what is checked is what links:

- within each target named (meson's object folder of a program or library,
  relative to BUILD_DIR), no two source files call each other, directly or
  around a circle (each circle is printed with a symbol of every edge);
- nothing in the targets after --glib-free calls GLib, GTK or cairo;
- in the Python package after --python (the hook), no two modules import
  each other, directly or around a circle, at the top or inside a function.
"""
import ast
import glob
import os
import subprocess
import sys

GUI_PREFIXES = ("g_", "gtk_", "gdk_", "gsk_", "adw_", "pango_", "cairo_")


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRGSVW":
            defined.add(name)
    return defined, undefined


def objects(build, folder):
    objs = sorted(glob.glob(os.path.join(build, folder, "*.o")))
    if not objs:
        sys.exit(f"test-layers: no objects in {folder} (not built, or the target moved: update this test)")
    return {os.path.basename(o)[:-len(".c.o")] if o.endswith(".c.o") else os.path.basename(o): symbols(o)
            for o in objs}


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def python_imports(pkg):
    """{module: {modules of the package it imports}}, every import of the
    package's own modules (relative, or by the package's name), wherever
    in the file it is."""
    name = os.path.basename(os.path.normpath(pkg))
    mods = {os.path.basename(f)[:-3] for f in glob.glob(os.path.join(pkg, "*.py"))}
    graph = {}
    for m in sorted(mods):
        tree = ast.parse(open(os.path.join(pkg, m + ".py"), encoding="utf-8").read())
        got = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level == 1 or node.module == name):
                if node.level == 1 and node.module:
                    got.add(node.module.split(".")[0])
                else:
                    got.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                got.update(a.name.split(".")[1] for a in node.names if a.name.startswith(name + "."))
        graph[m] = {g for g in got if g in mods and g != m}
    return graph


def main():
    build = sys.argv[1]
    names = sys.argv[2:]
    pkg = None
    if "--python" in names:
        i = names.index("--python")
        pkg, names = names[i + 1], names[:i] + names[i + 2:]
    cut = names.index("--glib-free") if "--glib-free" in names else len(names)
    acyclic, glib_free = names[:cut], names[cut + 1:]
    if not acyclic or not glib_free:
        sys.exit("usage: test-layers BUILD_DIR FOLDER... --glib-free FOLDER...")
    failures = 0
    for folder in acyclic:
        objs = objects(build, folder)
        owner = {s: o for o, (d, _) in objs.items() for s in d}
        edges = {o: {} for o in objs}
        for o, (_, u) in objs.items():
            for s in sorted(u):
                t = owner.get(s)
                if t is not None and t != o:
                    edges[o].setdefault(t, s)
        for comp in circles({o: set(e) for o, e in edges.items()}):
            failures += 1
            calls = ", ".join(f"{a} -> {b} ({edges[a][b]})" for a in comp for b in comp if b in edges[a])
            print(f"not ok: {folder}: files call each other in a circle: {calls}")
        print(f"ok: {folder}: {len(objs)} files, no circle")
    for folder in glib_free:
        for o, (_, u) in objects(build, folder).items():
            bad = sorted(s for s in u if s.startswith(GUI_PREFIXES))
            if bad:
                failures += 1
                print(f"not ok: {folder}: {o} calls {', '.join(bad[:5])} (GLib/GTK/cairo below ui/)")
        print(f"ok: {folder}: no GLib, GTK or cairo")
    if pkg is not None:
        graph = python_imports(pkg)
        for comp in circles(graph):
            failures += 1
            edges = ", ".join(f"{a} -> {b}" for a in comp for b in comp if b in graph[a])
            print(f"not ok: {pkg}: modules import each other in a circle: {edges}")
        print(f"ok: {pkg}: {len(graph)} modules, no import circle")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
