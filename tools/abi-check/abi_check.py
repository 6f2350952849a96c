#!/usr/bin/env python3
"""abi-check: compare the DAT 2.0 (uDAPL) header ABI of two include trees and,
optionally, the dynamic symbol interface of two shared libraries.

Stdlib only.  Needs clang (JSON AST dumps) and gcc (preprocessing, compiling
and running generated probe programs).  See README.md next to this file.

Output: one line per difference
    DIFF <category> <name>: ours=<...> ref=<...>
(plus WARN lines for tolerated differences), then
    abi-check: N passed, M failed
Exit status 0 iff M == 0.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Translation unit used for the header checks.  <netinet/in.h> is needed
# because the reference dat_ib_extensions.h embeds a struct sockaddr_in6 but
# dat_platform_specific.h only includes <sys/socket.h> (the reference udat.h
# tells consumers to include <netinet/in.h> first).  <dat2/dat_registry.h>
# brings in udat_redirection.h / dat_redirection.h, which define
# struct dat_provider (the provider function table).
TU_INCLUDES = [
    "netinet/in.h",
    "dat2/udat.h",
    "dat2/dat_ib_extensions.h",
    "dat2/dat_registry.h",
]

# (name, flags).  All of them are C.  DAT_EXTENSIONS is forced on by
# udat_config.h (#ifndef DAT_EXTENSIONS / #define DAT_EXTENSIONS 1) and all
# uses are #ifdef, so -DDAT_EXTENSIONS / -UDAT_EXTENSIONS variations cannot
# change the reference; the default C dialect and strict C99 are checked.
DEFAULT_CONFIGS = [
    ("default", []),
    ("c99", ["-std=c99"]),
]
# Extra compile-only configurations (does the TU compile at all?).
COMPILE_ONLY_CONFIGS = [
    ("c++", ["-x", "c++", "-std=c++11"]),
]

CC = os.environ.get("ABI_CHECK_CC", "gcc")
CXX = os.environ.get("ABI_CHECK_CXX", "g++")
CLANG = os.environ.get("ABI_CHECK_CLANG", "clang")

GEN = "abi_gen.c"


def run(cmd, cwd=None, check=False, inp=None):
    p = subprocess.run(cmd, cwd=cwd, input=inp, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace")
    if check and p.returncode != 0:
        raise RuntimeError("command failed: %s\n%s" % (" ".join(cmd), p.stderr[-4000:]))
    return p


def is_dat2(path):
    return path is not None and "/dat2/" in path.replace("\\", "/")


def norm_ws(s):
    return re.sub(r"\s+", "", s or "")


_DEFAULT_INC = None


def default_include_dirs():
    global _DEFAULT_INC
    if _DEFAULT_INC is None:
        p = run([CC, "-E", "-v", "-x", "c", "/dev/null"])
        dirs, on = [], False
        for line in p.stderr.splitlines():
            if line.startswith("#include <...> search starts here"):
                on = True
                continue
            if line.startswith("End of search list"):
                break
            if on:
                dirs.append(os.path.realpath(line.strip()))
        _DEFAULT_INC = dirs
    return _DEFAULT_INC


def include_flags(inc):
    inc = os.path.realpath(inc)
    if inc in default_include_dirs():
        return []
    # -isystem: searched before /usr/include; warnings in these headers are
    # suppressed just like for the reference headers (both are then "system").
    return ["-isystem", inc]


def tu_text(extra=""):
    return "".join("#include <%s>\n" % h for h in TU_INCLUDES) + extra


# --------------------------------------------------------------------------
# Preprocessor: macros defined in dat2 headers
# --------------------------------------------------------------------------

DEF_RE = re.compile(r"#define\s+([A-Za-z_]\w*)(\(([^)]*)\))?\s?(.*)$")


def collect_macros(work, flags, inc):
    """Returns (macros, dat2_files). macros: name -> (params|None, body)."""
    with open(os.path.join(work, "tu.c"), "w") as f:
        f.write(tu_text())
    p = run([CC] + flags + include_flags(inc) + ["-E", "-dD", "tu.c"], cwd=work)
    cur = None
    macros = {}
    dat2_names = set()
    files = set()
    for line in p.stdout.splitlines():
        if line.startswith("# ") and '"' in line:
            m = re.match(r'# \d+ "([^"]*)"', line)
            if m:
                cur = m.group(1)
                if is_dat2(cur):
                    files.add(os.path.realpath(cur))
            continue
        if line.startswith("#define"):
            m = DEF_RE.match(line)
            if not m:
                continue
            name = m.group(1)
            params = None
            if m.group(2) is not None:
                params = [x.strip() for x in m.group(3).split(",") if x.strip()]
            if is_dat2(cur):
                dat2_names.add(name)
            macros[name] = (params, m.group(4).strip())
        elif line.startswith("#undef"):
            parts = line.split()
            if len(parts) > 1:
                macros.pop(parts[1], None)
    out = {n: macros[n] for n in dat2_names if n in macros}
    return out, files, p.returncode, p.stderr


# --------------------------------------------------------------------------
# clang JSON AST
# --------------------------------------------------------------------------

class Ast:
    def __init__(self, work, flags, inc, extra, tag):
        src = "%s.c" % tag
        with open(os.path.join(work, src), "w") as f:
            f.write(tu_text(extra))
        p = run([CLANG] + flags + include_flags(inc) +
                ["-Xclang", "-ast-dump=json", "-fsyntax-only", "-w", src], cwd=work)
        self.errors = [l for l in p.stderr.splitlines() if ": error:" in l]
        try:
            self.root = json.loads(p.stdout)
        except ValueError:
            self.root = {"inner": []}
            self.errors.append("clang produced no AST: " + p.stderr[-500:])
        self.src = src
        self._locate()

    def _locate(self):
        """Assign a file to every top-level decl (clang elides repeated file
        names, so track the last printed one in document order)."""
        self.top = []  # (node, file)
        cur = [None]

        def upd(l):
            if isinstance(l, dict) and "file" in l:
                cur[0] = l["file"]

        def walk(o):
            if isinstance(o, dict):
                if "file" in o and ("offset" in o or "line" in o):
                    cur[0] = o["file"]
                for k, v in o.items():
                    if k == "includedFrom":
                        continue
                    walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)

        for n in self.root.get("inner", []):
            loc = n.get("loc", {})
            if "spellingLoc" in loc:
                upd(loc["spellingLoc"])
                upd(loc["expansionLoc"])
            else:
                upd(loc)
            self.top.append((n, cur[0]))
            walk(n)


def first_type_child(n):
    inner = [c for c in n.get("inner", []) if c.get("kind", "").endswith("Type")]
    return inner


class Model:
    """Declarations of the dat2 headers extracted from one AST."""

    def __init__(self, ast):
        self.ast = ast
        self.records = []          # RecDef for top-level records in dat2
        self.rec_by_name = {}      # "struct tag" -> RecDef (dat2 only)
        self.rec_by_id = {}        # id -> RecDef (all dat2 + nested anon)
        self.enums = []            # (key, expr, [const names])
        self.typedefs = []         # (name, node)
        self.functions = []        # (name, node)
        self.vars = []             # (name, node)
        self.anon_name = {}        # decl id -> typedef name
        self.defined_records = set()  # "struct tag" for all complete records
        top_dat2 = [(n, f) for (n, f) in ast.top if is_dat2(f)]
        # typedef names for anonymous tags
        for n, f in ast.top:
            if n.get("kind") == "TypedefDecl":
                t = n.get("inner", [None])[0]
                while t and t.get("kind") in ("ElaboratedType", "ParenType"):
                    if "ownedTagDecl" in t and not t["ownedTagDecl"].get("name"):
                        self.anon_name.setdefault(t["ownedTagDecl"]["id"], n["name"])
                    t = (t.get("inner") or [None])[0]
                if t and t.get("kind") in ("RecordType", "EnumType"):
                    d = t.get("decl", {})
                    if not d.get("name"):
                        self.anon_name.setdefault(d.get("id"), n["name"])

        def all_records(n):
            if n.get("kind") == "RecordDecl":
                if n.get("completeDefinition") and n.get("name"):
                    self.defined_records.add("%s %s" % (n.get("tagUsed", "struct"), n["name"]))
                for c in n.get("inner", []):
                    all_records(c)
        for n, f in ast.top:
            all_records(n)

        def add_record(n):
            tag = n.get("tagUsed", "struct")
            if n.get("name"):
                key = "%s %s" % (tag, n["name"])
                expr = key
            elif n["id"] in self.anon_name:
                key = "%s <%s>" % (tag, self.anon_name[n["id"]])
                expr = self.anon_name[n["id"]]
            else:
                return
            rd = RecDef(self, n, key, expr)
            self.records.append(rd)
            self.rec_by_name[key] = rd
            self.rec_by_id[n["id"]] = rd
            for c in n.get("inner", []):
                if c.get("kind") == "RecordDecl" and c.get("name") and c.get("completeDefinition"):
                    add_record(c)

        for n, f in top_dat2:
            k = n.get("kind")
            if k == "RecordDecl" and n.get("completeDefinition"):
                add_record(n)
            elif k == "EnumDecl":
                consts = [c["name"] for c in n.get("inner", []) if c.get("kind") == "EnumConstantDecl"]
                if n.get("name"):
                    key = expr = "enum %s" % n["name"]
                elif n["id"] in self.anon_name:
                    key = "enum <%s>" % self.anon_name[n["id"]]
                    expr = self.anon_name[n["id"]]
                else:
                    key = "enum <anon:%s>" % (consts[0] if consts else "?")
                    expr = None
                self.enums.append((key, expr, consts))
            elif k == "TypedefDecl":
                self.typedefs.append((n["name"], n))
            elif k == "FunctionDecl":
                self.functions.append((n["name"], n))
            elif k == "VarDecl":
                self.vars.append((n["name"], n))
        for rd in list(self.records):
            rd.flatten()

    # canonical type string of a JSON type tree
    def canon(self, t):
        if t is None:
            return "?"
        k = t.get("kind", "")
        inner = t.get("inner", [])
        tch = [c for c in inner if c.get("kind", "").endswith("Type")]
        if k in ("TypedefType", "ElaboratedType", "ParenType", "AttributedType",
                 "MacroQualifiedType", "TypeOfType", "AdjustedType"):
            return self.canon(tch[0]) if tch else self.qt(t)
        if k in ("TypeOfExprType", "DecayedType"):
            return self.canon(tch[-1]) if tch else self.qt(t)
        if k == "QualType":
            return "%s %s" % (t.get("qualifiers", ""), self.canon(tch[0] if tch else None))
        if k == "BuiltinType":
            return t["type"]["qualType"]
        if k == "PointerType":
            return "ptr<%s>" % self.canon(tch[0] if tch else None)
        if k == "ConstantArrayType":
            return "array[%s]<%s>" % (t.get("size"), self.canon(tch[0] if tch else None))
        if k == "IncompleteArrayType":
            return "array[]<%s>" % self.canon(tch[0] if tch else None)
        if k in ("RecordType", "EnumType"):
            d = t.get("decl", {})
            qt = t.get("type", {}).get("qualType", "")
            tag = qt.split()[0] if qt.split() and qt.split()[0] in ("struct", "union", "enum") else ("enum" if k == "EnumType" else "struct")
            if d.get("name"):
                return "%s %s" % (tag, d["name"])
            return "%s <%s>" % (tag, self.anon_name.get(d.get("id"), "anon"))
        if k == "FunctionProtoType":
            ret = self.canon(tch[0]) if tch else "?"
            params = [self.canon(c) for c in tch[1:]]
            if t.get("variadic"):
                params.append("...")
            return "fn(%s)->%s" % (", ".join(params), ret)
        if k == "FunctionNoProtoType":
            return "fn(<noproto>)->%s" % (self.canon(tch[0]) if tch else "?")
        return self.qt(t)

    @staticmethod
    def qt(t):
        ty = t.get("type", {})
        return ty.get("desugaredQualType") or ty.get("qualType") or "?"


class RecDef:
    def __init__(self, model, node, key, expr):
        self.m = model
        self.node = node
        self.key = key
        self.expr = expr
        self.fields = []   # list of dicts: path(list), acc(list), node, probe

    def flatten(self):
        self._flat(self.node, [], [])

    def _flat(self, node, ppath, pacc):
        last_anon_rec = None
        anon_k = 0
        for c in node.get("inner", []):
            k = c.get("kind")
            if k == "RecordDecl" and not c.get("name"):
                last_anon_rec = c
            elif k == "FieldDecl":
                qt = c.get("type", {}).get("qualType", "")
                inline = last_anon_rec is not None and ("(unnamed" in qt or "(anonymous" in qt)
                if c.get("name"):
                    f = {"path": ppath + [c["name"]], "acc": pacc + [c["name"]], "node": c,
                         "bitfield": bool(c.get("isBitfield"))}
                    self.fields.append(f)
                    if inline:
                        # named field of an inline anonymous struct/union type
                        sub = RecDef(self.m, last_anon_rec, self.key + "." + ".".join(f["path"]),
                                     "__typeof__(((%s *)0)->%s)" % (self.expr, ".".join(f["acc"])))
                        self.m.rec_by_id.setdefault(last_anon_rec["id"], sub)
                        sub.flatten()
                else:
                    # C11 anonymous member: its fields are members of this record
                    if inline:
                        self._flat(last_anon_rec, ppath + ["<anon%d>" % anon_k], pacc)
                    anon_k += 1
                if inline:
                    last_anon_rec = None


# --------------------------------------------------------------------------
# Compiling generated programs with error-line pruning
# --------------------------------------------------------------------------

def compile_pruned(work, cmd_prefix, header, lines, footer, exe=None, max_iter=8):
    """Compile header + lines + footer; drop lines that produce errors and
    retry.  Returns (set of surviving line indices, stderr of last attempt,
    ok)."""
    alive = set(range(len(lines)))
    hdr_n = header.count("\n")
    stderr = ""
    for _ in range(max_iter):
        order = sorted(alive)
        text = header + "".join(lines[i].replace("\n", " ") + "\n" for i in order) + footer
        with open(os.path.join(work, GEN), "w") as f:
            f.write(text)
        out = ["-o", exe] if exe else ["-fsyntax-only"]
        p = run(cmd_prefix + [GEN] + out, cwd=work)
        stderr = p.stderr
        if p.returncode == 0:
            return alive, stderr, True
        bad = set()
        for m in re.finditer(r"(?:^|\s)" + re.escape(GEN) + r":(\d+):(?:\d+:)?", stderr):
            ln = int(m.group(1)) - hdr_n - 1
            if 0 <= ln < len(order):
                bad.add(order[ln])
        if not bad:
            return set(), stderr, False
        alive -= bad
    return set(), stderr, False


# --------------------------------------------------------------------------
# One side, one configuration
# --------------------------------------------------------------------------

def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def analyse(side, inc, cfg_name, flags, keep=None):
    work = tempfile.mkdtemp(prefix="abi-%s-%s-" % (side, cfg_name.replace("+", "p")))
    try:
        return _analyse(work, side, inc, cfg_name, flags)
    finally:
        if keep:
            dst = os.path.join(keep, "%s-%s" % (side, cfg_name))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(work, dst)
        shutil.rmtree(work, ignore_errors=True)


def _analyse(work, side, inc, cfg_name, flags):
    items = {}   # (category, name) -> value string
    warn_cats = {}
    inc_real = os.path.realpath(inc)

    # ---- macros / headers actually used
    macros, files, rc, err = collect_macros(work, flags, inc)
    for fpath in sorted(files):
        base = os.path.basename(fpath)
        where = "own-tree" if fpath.startswith(inc_real + os.sep) else "FALLBACK:" + fpath
        items[("header-used", base)] = where if side == "ours" else "own-tree"

    # ---- AST pass 1 and probe pass
    ast1 = Ast(work, flags, inc, "", "pass1")
    m1 = Model(ast1)
    probe = []
    pid = 0
    for rd in list(m1.rec_by_id.values()):
        for f in rd.fields:
            if f["bitfield"]:
                continue
            probe.append("typedef __typeof__(((%s *)0)->%s) __abi_p%d;\n" % (rd.expr, ".".join(f["acc"]), pid))
            f["pid"] = pid
            pid += 1
    fn_pid = {}
    for name, n in m1.functions + m1.vars:
        probe.append("typedef __typeof__(%s) __abi_p%d;\n" % (name, pid))
        fn_pid[name] = pid
        pid += 1
    ast2 = Ast(work, flags, inc, "".join(probe), "pass2")
    m = Model(ast2)
    ptypes = {}
    for n, f in ast2.top:
        if n.get("kind") == "TypedefDecl" and n.get("name", "").startswith("__abi_p"):
            tch = first_type_child(n)
            ptypes[int(n["name"][7:])] = m.canon(tch[0]) if tch else "?"
    # transfer probe ids by record key / field path (same source, same order)
    m1_fields = {}
    for rd in m1.rec_by_id.values():
        for f in rd.fields:
            m1_fields[(rd.key, tuple(f["path"]))] = f.get("pid")
    for rd in m.rec_by_id.values():
        for f in rd.fields:
            p = m1_fields.get((rd.key, tuple(f["path"])))
            if f["bitfield"]:
                qt = f["node"].get("type", {})
                f["canon"] = "bitfield<%s>" % (qt.get("desugaredQualType") or qt.get("qualType"))
            else:
                f["canon"] = ptypes.get(p, "?")
    compile_errors = ast2.errors

    # ---- records: field types, and the runtime layout program lines
    prog = []      # (category, name, C statement printing value)

    def P(cat, name, fmt, *args):
        prog.append((cat, name, 'printf("%%s\\t%%s\\t%s\\n", %s, %s%s);' % (
            fmt, c_str(cat), c_str(name), "".join(", " + a for a in args))))

    rec_dat2_names = set(m.rec_by_name)

    def visit(top, rd, path, acc, depth):
        for f in rd.fields:
            fpath = path + [p for p in f["path"]]
            facc = acc + f["acc"]
            name = top.key + "." + ".".join(fpath).replace(".[", "[")
            accs = ".".join(facc).replace(".[", "[")
            items[("field-type", name)] = f["canon"]
            if f["bitfield"]:
                P("field", name, "bitoffset=%d bitwidth=%d",
                  "__abi_bits(({ %s __s; memset(&__s, 0, sizeof __s); __s.%s = -1; __s; }), 0)" % (top.expr, accs),
                  "__abi_bits(({ %s __s; memset(&__s, 0, sizeof __s); __s.%s = -1; __s; }), 1)" % (top.expr, accs))
                continue
            P("field", name, "offset=%lu size=%lu",
              "(unsigned long)offsetof(%s, %s)" % (top.expr, accs),
              "(unsigned long)sizeof(((%s *)0)->%s)" % (top.expr, accs))
            if depth > 12:
                continue
            c = f["canon"]
            sub_path, sub_acc = fpath, facc
            while c.startswith("array["):
                mm = re.match(r"array\[(\d*)\]<(.*)>$", c)
                if not mm:
                    break
                c = mm.group(2)
                sub_path = sub_path + ["[0]"]
                sub_acc = sub_acc + ["[0]"]
            sub = None
            if c.startswith(("struct ", "union ")):
                if "<" in c:
                    # anonymous: find the nested record by looking up the field node
                    sub = nested_anon(rd, f)
                    if sub is None and c in rec_dat2_names:
                        sub = m.rec_by_name[c]
                else:
                    sub = m.rec_by_name.get(c)
            if sub is not None and sub is not rd:
                visit(top, sub, sub_path, sub_acc, depth + 1)

    def nested_anon(rd, f):
        # nested RecDefs registered under key rd.key + "." + path
        want = rd.key + "." + ".".join(f["path"])
        for r in m.rec_by_id.values():
            if r.key == want:
                return r
        c = f["canon"]
        return m.rec_by_name.get(c)

    for rd in m.records:
        P("record", rd.key, "size=%lu align=%lu",
          "(unsigned long)sizeof(%s)" % rd.expr, "(unsigned long)__alignof__(%s)" % rd.expr)
        visit(rd, rd, [], [], 0)

    # ---- enums
    for key, expr, consts in m.enums:
        items[("enum-members", key)] = ",".join(consts)
        if expr:
            P("enum", key, "size=%lu align=%lu",
              "(unsigned long)sizeof(%s)" % expr, "(unsigned long)__alignof__(%s)" % expr)
        for cn in consts:
            P("enum-const", cn, "%lld", "(long long)(%s)" % cn)

    # ---- typedefs
    for name, n in m.typedefs:
        tch = first_type_child(n)
        c = m.canon(tch[0]) if tch else "?"
        items[("typedef", name)] = c
        complete = True
        if c.startswith("fn(") or c == "void" or c.startswith("array[]"):
            complete = False
        mm = re.match(r"^(?:const |volatile )*(struct|union) (\S+)$", c)
        if mm and "<" not in mm.group(2) and ("%s %s" % (mm.group(1), mm.group(2))) not in m.defined_records:
            complete = False
        if complete:
            P("typedef-size", name, "size=%lu align=%lu",
              "(unsigned long)sizeof(%s)" % name, "(unsigned long)__alignof__(%s)" % name)

    # ---- functions / variables
    for name, n in m.functions:
        items[("function", name)] = ptypes.get(fn_pid.get(name), "?")
    for name, n in m.vars:
        items[("variable", name)] = ptypes.get(fn_pid.get(name), "?")

    # ---- macros: set, kind, classification
    names = sorted(macros)
    for nm in names:
        params, body = macros[nm]
        items[("macro", nm)] = "object-like" if params is None else "function-like(%d)" % len(params)
    obj = [n for n in names if macros[n][0] is None and macros[n][1].strip()]
    cls_lines = []
    for i, nm in enumerate(obj):
        cls_lines.append("typedef char __abi_ci_%d[(%s) ? 1 : 1];" % (i, nm))
    for i, nm in enumerate(obj):
        cls_lines.append("static const char __abi_cs_%d[] = %s;" % (i, nm))
    base_cmd = [CC] + flags + include_flags(inc)
    header = tu_text("#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n")
    alive, _, _ = compile_pruned(work, base_cmd + ["-pedantic-errors", "-Wno-unused"],
                                 header, cls_lines, "")
    int_macros = [obj[i] for i in range(len(obj)) if i in alive]
    str_macros = [obj[i - len(obj)] for i in range(len(obj), 2 * len(obj)) if i in alive]
    for nm in int_macros:
        prog.append(("macro-value", nm,
                     'if ((%s) < 0) printf("%%s\\t%%s\\t%%c%%d:%%lld\\n", "macro-value", %s, \'i\', (int)(8*sizeof(%s)), (long long)(%s)); '
                     'else printf("%%s\\t%%s\\t%%c%%d:%%llu\\n", "macro-value", %s, ((__typeof__(%s))-1 < 0) ? \'i\' : \'u\', (int)(8*sizeof(%s)), (unsigned long long)(%s));'
                     % (nm, c_str(nm), nm, nm, c_str(nm), nm, nm, nm)))
    for nm in str_macros:
        if nm in int_macros:
            continue
        P("macro-value", nm, "string:%s", "__abi_esc(%s)" % nm)

    # ---- expansions (object-like non-int/non-string, and function-like)
    exp_lines = []
    exp_names = []
    for nm in names:
        params, body = macros[nm]
        if params is None:
            if nm in int_macros or nm in str_macros:
                continue
            exp_lines.append("@@ABI@@ %d @@ %s @@END@@\n" % (len(exp_names), nm))
        else:
            args = []
            for j, pa in enumerate(params):
                if pa.endswith("..."):
                    if pa != "...":
                        args.append("__abi_a%d" % j)
                    args += ["__abi_va0", "__abi_va1"]
                else:
                    args.append("__abi_a%d" % j)
            exp_lines.append("@@ABI@@ %d @@ %s(%s) @@END@@\n" % (len(exp_names), nm, ", ".join(args)))
        exp_names.append(nm)
    with open(os.path.join(work, "exp.c"), "w") as f:
        f.write(tu_text("".join(exp_lines)))
    p = run(base_cmd + ["-E", "-P", "exp.c"], cwd=work)
    for line in p.stdout.splitlines():
        mm = re.match(r"\s*@@ABI@@\s*(\d+)\s*@@(.*)@@END@@\s*$", line)
        if mm:
            nm = exp_names[int(mm.group(1))]
            cat = "macro-value" if macros[nm][0] is None else "macro-expansion"
            items[(cat, nm)] = "expands:" + " ".join(mm.group(2).split())

    # ---- build & run the value program
    prelude = header + r'''
static int __abi_bits_impl(const unsigned char *p, size_t n, int want_width)
{
    int first = -1, count = 0; size_t i; int b;
    for (i = 0; i < n; i++) for (b = 0; b < 8; b++)
        if (p[i] & (1u << b)) { if (first < 0) first = (int)(i * 8 + b); count++; }
    return want_width ? count : first;
}
#define __abi_bits(v, w) ({ __typeof__(v) __v = (v); __abi_bits_impl((const unsigned char *)&__v, sizeof __v, (w)); })
static const char *__abi_esc(const char *s)
{
    static char buf[4096]; size_t o = 0;
    for (; *s && o < sizeof buf - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '\t' || c == '\n' || c < 32 || c > 126) o += (size_t)sprintf(buf + o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0; return buf;
}
int main(void)
{
'''
    lines = [s for (_, _, s) in prog]
    exe = os.path.join(work, "abi_probe")
    alive, stderr, ok = compile_pruned(work, base_cmd + ["-w", "-O0"], prelude, lines,
                                       "return 0;\n}\n", exe=exe)
    for i, (cat, name, _) in enumerate(prog):
        if i not in alive:
            items.setdefault((cat, name), "<does-not-compile>")
    if ok:
        p = run([exe])
        for line in p.stdout.splitlines():
            parts = line.split("\t", 2)
            if len(parts) == 3:
                items[(parts[0], parts[1])] = parts[2]
    else:
        compile_errors = compile_errors + ["value program failed to build: " + stderr[-800:]]

    # compile status of this configuration
    items[("compile", "tu")] = "ok" if not compile_errors and rc == 0 else \
        "errors: " + (compile_errors[0] if compile_errors else err.strip().splitlines()[0])
    return items


def compile_only(side, inc, cfg_name, flags):
    work = tempfile.mkdtemp(prefix="abi-cc-")
    try:
        with open(os.path.join(work, "tu.c"), "w") as f:
            f.write(tu_text())
        cc = CXX if "c++" in flags else CC
        p = run([cc] + flags + include_flags(inc) + ["-fsyntax-only", "tu.c"], cwd=work)
        if p.returncode == 0:
            return {("compile", "tu"): "ok"}
        first = [l for l in p.stderr.splitlines() if "error" in l][:1]
        return {("compile", "tu"): "errors: " + (first[0] if first else p.stderr.strip()[:200])}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------
# Library checks
# --------------------------------------------------------------------------

LINKER_NOISE = {"_init", "_fini", "__bss_start", "_edata", "_end", "__bss_start__",
                "__end__", "_bss_end__", "__data_start", "data_start", "__dso_handle",
                "_IO_stdin_used", "__libc_csu_init", "__libc_csu_fini"}


def lib_symbols(path):
    p = run(["nm", "-D", "--with-symbol-versions", "--defined-only", path])
    if p.returncode != 0:
        raise RuntimeError("nm failed on %s: %s" % (path, p.stderr.strip()))
    syms, verdefs = {}, set()
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if len(parts) == 2:
            typ, name = parts
        else:
            typ, name = parts[1], parts[2]
        if "@" in name:
            base, ver = re.split(r"@@?", name, maxsplit=1)
            default = "@@" in name
        else:
            base, ver, default = name, "", False
        if typ == "A" and not ver:
            verdefs.add(base)
            continue
        if base in LINKER_NOISE:
            continue
        kind = "func" if typ in "TtWwi" else ("data" if typ in "DdBbRrVvGgSsCu" else typ)
        syms.setdefault(base, []).append("%s%s %s" % ("@@" if default else ("@" if ver else ""), ver, kind))
    return {k: ",".join(sorted(v)) for k, v in syms.items()}, verdefs


def lib_soname(path):
    p = run(["readelf", "-d", path])
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]*)\]", p.stdout)
    return m.group(1) if m else "<none>"


def compare_libs(ours, ref):
    items_o, items_r, notes = {}, {}, []
    so, vo = lib_symbols(ours)
    sr, vr = lib_symbols(ref)
    for k, v in so.items():
        items_o[("symbol", k)] = v
    for k, v in sr.items():
        items_r[("symbol", k)] = v
    for v in vo | vr:
        if v in vo and v in vr:
            items_o[("version-def", v)] = items_r[("version-def", v)] = "present"
        else:
            notes.append("WARN version-def %s: present only in %s (ignored)" % (v, "ours" if v in vo else "ref"))
    items_o[("soname", "DT_SONAME")] = lib_soname(ours)
    items_r[("soname", "DT_SONAME")] = lib_soname(ref)
    return items_o, items_r, notes


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------

MISSING = "<missing>"
CALL_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")
MEMBER_RE = re.compile(r"(?:->|\.)\s*([A-Za-z_]\w*)")
C_KEYWORDS = {"sizeof", "if", "while", "for", "switch", "return", "__typeof__", "typeof",
              "__builtin_offsetof", "_Alignof", "__alignof__", "__extension__"}


def called(exp):
    """What a function-like macro expansion calls: the set of called
    functions, the set of members accessed, and the order in which the
    macro's arguments are used."""
    calls = {c for c in CALL_RE.findall(exp) if c not in C_KEYWORDS}
    members = set(MEMBER_RE.findall(exp))
    argseq = tuple(re.findall(r"\b__abi_(?:a\d+|va\d+)\b", exp))
    return calls, members, argseq


def compare_items(ours, ref):
    """Returns list of (status, cat, name, ours, ref) with status in
    PASS/DIFF/WARN."""
    out = []
    for key in sorted(set(ours) | set(ref)):
        cat, name = key
        o, r = ours.get(key, MISSING), ref.get(key, MISSING)
        if o == r:
            out.append(("PASS", cat, name, o, r))
            continue
        status = "DIFF"
        if cat == "macro-expansion" and o != MISSING and r != MISSING:
            if norm_ws(o) == norm_ws(r):
                status = "PASS"
            elif called(o) == called(r):
                status = "WARN"
        elif cat == "macro-value" and o.startswith("expands:") and r.startswith("expands:"):
            if norm_ws(o) == norm_ws(r):
                status = "PASS"
        out.append((status, cat, name, o, r))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours-include", required=True)
    ap.add_argument("--ref-include", required=True)
    ap.add_argument("--ours-lib")
    ap.add_argument("--ref-lib")
    ap.add_argument("--config", action="append", default=[], metavar="NAME:FLAGS",
                    help="extra configuration, e.g. 'gnu89:-std=gnu89' (repeatable)")
    ap.add_argument("--only-default", action="store_true", help="check only the default configuration")
    ap.add_argument("--json", metavar="FILE", help="also write a JSON report ('-' = stdout, replaces text output)")
    ap.add_argument("--show-warnings", action="store_true", default=True)
    ap.add_argument("--no-warnings", dest="show_warnings", action="store_false")
    ap.add_argument("--keep-temp", metavar="DIR", help="keep generated files here (debugging)")
    args = ap.parse_args()

    if bool(args.ours_lib) != bool(args.ref_lib):
        ap.error("--ours-lib and --ref-lib must be given together")
    for tool in (CC, CLANG):
        if shutil.which(tool) is None:
            print("abi-check: required tool %s not found" % tool, file=sys.stderr)
            return 2
    if not os.path.isfile(os.path.join(args.ref_include, "dat2", "udat.h")):
        print("abi-check: %s/dat2/udat.h not found" % args.ref_include, file=sys.stderr)
        return 2

    configs = list(DEFAULT_CONFIGS[:1] if args.only_default else DEFAULT_CONFIGS)
    for c in args.config:
        name, _, fl = c.partition(":")
        configs.append((name, fl.split()))
    cc_configs = [] if args.only_default else list(COMPILE_ONLY_CONFIGS)

    results = []   # (config, {key: val} ours, ref)
    notes = []

    # header file sets
    def hdr_set(inc):
        d = os.path.join(inc, "dat2")
        return {f for f in os.listdir(d) if f.endswith(".h")} if os.path.isdir(d) else set()
    ho, hr = hdr_set(args.ours_include), hdr_set(args.ref_include)
    results.append(("", {("header", h): "present" for h in ho}, {("header", h): "present" for h in hr}))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(4, os.cpu_count() or 4)) as ex:
        futs = {}
        for cname, fl in configs:
            for side, inc in (("ours", args.ours_include), ("ref", args.ref_include)):
                futs[(cname, side)] = ex.submit(analyse, side, inc, cname, fl, args.keep_temp)
        for cname, fl in cc_configs:
            for side, inc in (("ours", args.ours_include), ("ref", args.ref_include)):
                futs[(cname, side)] = ex.submit(compile_only, side, inc, cname, fl)
        for cname, _ in configs + cc_configs:
            o = futs[(cname, "ours")].result()
            r = futs[(cname, "ref")].result()
            if cname in dict(cc_configs) and r[("compile", "tu")] != "ok":
                notes.append("WARN compile [%s]: reference does not compile in this configuration (skipped): %s"
                             % (cname, r[("compile", "tu")]))
                continue
            results.append((cname, o, r))

    if args.ours_lib:
        lo, lr, ln = compare_libs(args.ours_lib, args.ref_lib)
        notes += ln
        results.append(("", lo, lr))

    # merge configurations: identical outcome in every config -> one item
    merged = {}
    for cname, o, r in results:
        for st in compare_items(o, r):
            status, cat, name, ov, rv = st
            merged.setdefault((cat, name), []).append((cname, status, ov, rv))
    final = []
    for (cat, name), lst in sorted(merged.items()):
        outcomes = {(s, ov, rv) for (_, s, ov, rv) in lst}
        if len(outcomes) == 1:
            s, ov, rv = lst[0][1:]
            final.append((s, cat, name, ov, rv))
        else:
            for cname, s, ov, rv in lst:
                final.append((s, cat, "%s [%s]" % (name, cname) if cname else name, ov, rv))

    passed = sum(1 for f in final if f[0] in ("PASS", "WARN"))
    failed = sum(1 for f in final if f[0] == "DIFF")
    text_out = args.json != "-"
    if text_out:
        for n in notes:
            if args.show_warnings:
                print(n)
        for s, cat, name, ov, rv in final:
            if s == "DIFF" or (s == "WARN" and args.show_warnings):
                print("%s %s %s: ours=%s ref=%s" % (s, cat, name, ov, rv))
        print("abi-check: %d passed, %d failed" % (passed, failed))
    if args.json:
        rep = {
            "passed": passed, "failed": failed,
            "configs": [c for c, _ in configs] + [c for c, _ in cc_configs],
            "notes": notes,
            "items": [{"status": s, "category": cat, "name": name, "ours": ov, "ref": rv}
                      for s, cat, name, ov, rv in final],
        }
        if args.json == "-":
            json.dump(rep, sys.stdout, indent=1)
            print()
        else:
            with open(args.json, "w") as f:
                json.dump(rep, f, indent=1)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError) as e:
        print("abi-check: error: %s" % e, file=sys.stderr)
        sys.exit(2)
