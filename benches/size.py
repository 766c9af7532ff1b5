#!/usr/bin/env python3
"""Adds up the code each `probe_*` entry point of the size probe reaches.

Reads a staticlib built with function sections (Rust's default): every function and every
constant lives in a section of its own, and a call or an address taken is a relocation from one
section to a symbol in another. Starting from a probe's section, it follows every relocation
(calls, vtables, literal pools) and sums the sizes of the code sections it reaches. Shared code
(core's formatting, compiler builtins) is counted in every probe that reaches it.

usage: size.py LLVM_BIN_DIR LIBRARY.a [BUDGET_SPEC ...]   (BUDGET_SPEC: probe_name=bytes)
Exits 1 if portable-atomic's global lock table is linked in, and (with SIZE_STRICT=1) if a
budget is exceeded.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict


def run(tool, *args):
    return subprocess.run([f"{bin_dir}/{tool}", *args], check=True, capture_output=True,
                          text=True).stdout


bin_dir, lib = sys.argv[1], sys.argv[2]
budgets = dict(arg.split("=", 1) for arg in sys.argv[3:])
strict = os.environ.get("SIZE_STRICT") == "1"

# Symbol -> (object, section) and section -> size, per object member of the archive.
sym_section = {}
section_size = {}
member = None
for line in run("llvm-objdump", "-h", lib).splitlines():
    m = re.match(r"^(.+?\.o)\)?:\s+file format", line)
    if m:
        member = m.group(1)
        continue
    m = re.match(r"^\s*\d+\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s*(\S*)", line)
    if m and member:
        section_size[(member, m.group(1))] = int(m.group(2), 16)

for line in run("llvm-objdump", "-t", lib).splitlines():
    m = re.match(r"^(.+?\.o)\)?:\s+file format", line)
    if m:
        member = m.group(1)
        continue
    # 00000000 g     F .text.probe_x	0000001e probe_x
    m = re.match(r"^[0-9a-f]+\s+([lgw! ]+)\s*([FOdf ]*)\s+(\S+)\s+[0-9a-f]+\s+(.*)$", line)
    if m and member:
        flags, section, name = m.group(1), m.group(3), m.group(4).strip()
        # Hidden symbols (compiler builtins such as `__aeabi_uldivmod`) print with a prefix.
        name = name.removeprefix(".hidden ").strip()
        if section in ("*UND*", "*ABS*") or not name:
            continue
        glob = "g" in flags or "w" in flags
        key = name if glob else (member, name)
        sym_section.setdefault(key, (member, section))

edges = defaultdict(set)
current = None
for line in run("llvm-objdump", "-r", lib).splitlines():
    m = re.match(r"^(.+?\.o)\)?:\s+file format", line)
    if m:
        member = m.group(1)
        continue
    m = re.match(r"^RELOCATION RECORDS FOR \[(.+)\]:", line)
    if m:
        current = (member, m.group(1).replace(".rel.", ".", 1) if m.group(1).startswith(".rel.")
                   else m.group(1))
        continue
    m = re.match(r"^[0-9a-f]+\s+R_\S+\s+(.+)$", line)
    if m and current:
        target = m.group(1).strip()
        target = re.sub(r"[+-]0x[0-9a-f]+$", "", target)
        dest = sym_section.get(target) or sym_section.get((member, target))
        if dest is None and target.startswith("."):
            dest = (member, target)
        if dest:
            edges[current].add(dest)


def demangle(names):
    out = run("llvm-cxxfilt", *names) if names else ""
    return out.splitlines()


def reach(start):
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


failed = False
over = False
probes = sorted(k for k in sym_section if isinstance(k, str) and k.startswith("probe_")
                and sym_section[k][1].startswith(".text"))
print(f"{'entry point':44} {'code bytes':>10}  {'functions':>9}  budget")
for probe in probes:
    sections = reach(sym_section[probe])
    code = sorted((section_size.get(s, 0), s[1]) for s in sections if s[1].startswith(".text"))
    total = sum(size for size, _ in code)
    budget = budgets.get(probe)
    verdict = ""
    if budget is not None:
        ok = total <= int(budget)
        verdict = f"<= {budget}: {'ok' if ok else 'OVER'}"
        over |= not ok
    print(f"{probe:44} {total:>10}  {len(code):>9}  {verdict}")
    if "-v" in budgets or budget is not None and total > int(budget):
        for size, section in sorted(code, reverse=True)[:12]:
            print(f"    {size:>6}  {section}")

sizes = [k for k in sym_section if isinstance(k, str) and k == "PROBE_SIZES"]
if sizes:
    _, section = sym_section["PROBE_SIZES"]
    words = []
    for line in run("llvm-objdump", "-s", "-j", section, lib).splitlines():
        m = re.match(r"^\s*[0-9a-f]{4,}\s+((?:[0-9a-f]{8}\s?){1,4})", line)
        if m:
            words += [int.from_bytes(bytes.fromhex(w), "little") for w in m.group(1).split()]
    names = ["TokenBucketLimiter", "TokenBucketLimiter<_, NoQueue>", "FixedWindowLimiter",
             "SlidingWindowLimiter<_, 16>", "ConcurrencyLimiter",
             "ConcurrencyLimiter<_, NoQueue>"]
    print("object sizes (state word + options + wait queue + statistics):",
          ", ".join(f"{n} {w} B" for n, w in zip(names, words)))

lock_table = [k for k in sym_section if "fallback" in str(k) and "LOCKS" in str(k)]
seqlock = [k for k in sym_section if "seq_lock" in str(k) or "fallback4lock" in str(k)]
if lock_table or seqlock:
    print("portable-atomic's global lock fallback is linked in:", str((lock_table + seqlock)[0])[-80:])
    failed = True
else:
    print("portable-atomic's global lock fallback: absent")
if over:
    print("code-size budget exceeded" + ("" if strict else " (reported; SIZE_STRICT=1 makes it fail)"))
sys.exit(1 if failed or (over and strict) else 0)
