#!/usr/bin/env python3
"""Turns runs of both benchmarks into the markdown tables of benches/RESULTS.md (see run.sh).

    python3 benches/report.py --iai TARGET/iai CRITERION_DIR [CRITERION_DIR...]

Reads criterion's medians from each CRITERION_DIR/<group>/<bench>/new/{benchmark,estimates}.json
(a copy of TARGET/criterion per run) and, with several runs, keeps for each benchmark the lowest
of its medians: on a shared machine, interference only ever adds time. Reads iai-callgrind's
instruction counts from TARGET/iai/tollgate/instructions/*/*/callgrind.*.out (the `summary:`
line's first event, Ir). Prints markdown on stdout. Only the standard library.
"""

import argparse
import glob
import json
import os

ARGS = argparse.ArgumentParser()
ARGS.add_argument("--iai", required=True, help="iai-callgrind's output directory (TARGET/iai)")
ARGS.add_argument("--pairs", nargs="*", default=[],
                  help="criterion directories of the paired rounds (run.sh's second phase)")
ARGS.add_argument("criterion", nargs="+", help="criterion output directories, one per run")
ARGS = ARGS.parse_args()


def load(root):
    out = {}
    for path in glob.glob(os.path.join(root, "**", "new", "benchmark.json"), recursive=True):
        with open(path) as f:
            bench = json.load(f)
        with open(path.replace("benchmark.json", "estimates.json")) as f:
            out[bench["full_id"]] = json.load(f)["median"]["point_estimate"]
    return out


def medians():
    out = {}
    for root in ARGS.criterion:
        for key, v in load(root).items():
            out[key] = min(v, out.get(key, v))
    return out


def instructions():
    out = {}
    pattern = os.path.join(ARGS.iai, "tollgate", "instructions", "*", "*", "callgrind.*.out")
    for path in glob.glob(pattern):
        with open(path) as f:
            for line in f:
                if line.startswith("summary:"):
                    out[os.path.basename(os.path.dirname(path))] = int(line.split()[1])
                    break
    return out


T = medians()
I = instructions()
CLOCKS = ["manual", "std", "coarse"]


def ns(v):
    return "—" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def x(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}x"


def row(cells):
    print("| " + " | ".join(cells) + " |")


def table_floor():
    print("### The floor (one thread)\n")
    row(["floor", "median ns"])
    row(["---", "---:"])
    names = [
        ("clock/manual", "`ManualClock::now` (one atomic load)"),
        ("clock/coarse", "`CoarseClock::now` (one relaxed load)"),
        ("clock/std", "`StdClock::now`"),
        ("clock/std-instant-now", "`std::time::Instant::now`"),
        ("clock/governor-quanta", "governor's default clock (`QuantaClock`, TSC)"),
        ("cas64", "`AtomicU64` load + compare_exchange"),
        ("cas128", "`AtomicU128` load + compare_exchange (portable-atomic)"),
        ("cas64+counter", "`AtomicU64` load + CAS + one relaxed `fetch_add` elsewhere"),
    ]
    for c in CLOCKS:
        names += [
            (f"{c}+cas64", f"{c} clock + `AtomicU64` load + CAS"),
            (f"{c}+cas128", f"{c} clock + `AtomicU128` load + CAS"),
        ]
    names += [
        ("manual+div+cas128", "manual clock + one u64 division + `AtomicU128` load + CAS"),
        ("manual+cas128+counter", "manual clock + `AtomicU128` load + CAS + `fetch_add`"),
    ]
    for key, label in names:
        v = T.get("floor/" + key)
        if v is not None:
            row([label, ns(v)])
    print()


def table_single():
    print("### One thread: each call on a private limiter\n")
    print("Ratios: to the floor of the same clock (its read + one load + CAS on a 64-bit word; on a")
    print("128-bit word in the next column), to governor's `check()` on the same clock, and for the")
    print("concurrency rows to tokio's `Semaphore::try_acquire` + drop.\n")
    row(["operation", "clock", "median ns", "× floor64", "× floor128", "× governor", "× tokio"])
    row(["---", "---", "---:", "---:", "---:", "---:", "---:"])
    tokio_ar = T.get("st/tokio_semaphore/acquire+release")
    tokio_d = T.get("st/tokio_semaphore/denied")
    for c in CLOCKS:
        f64, f128 = T.get(f"floor/{c}+cas64"), T.get(f"floor/{c}+cas128")
        for verdict in ["allowed", "denied"]:
            gov = T.get(f"st/governor/{verdict}/{c}")
            for lim in ["token_bucket", "fixed_window", "sliding_window"]:
                v = T.get(f"st/{lim}/{verdict}/{c}")
                row([f"{lim} {verdict}", c, ns(v), x(v, f64), x(v, f128), x(v, gov), ""])
            row([f"**governor {verdict}**", c, ns(gov), x(gov, f64), x(gov, f128), "1.00x", ""])
        for op, label, tok in [
            ("acquire+release", "concurrency acquire+release (back to full)", tokio_ar),
            ("acquire+release-held", "concurrency acquire+release (another lease held)", tokio_ar),
            ("denied", "concurrency denied", tokio_d),
        ]:
            v = T.get(f"st/concurrency/{op}/{c}")
            row([label, c, ns(v), x(v, f64), x(v, f128), "", x(v, tok)])
    for verdict in ["allowed", "denied"]:
        for clock, label in [("fake", "FakeRelativeClock"), ("quanta", "QuantaClock (default)")]:
            gov = T.get(f"st/governor/{verdict}/{clock}")
            fl = T.get("floor/manual+cas64") if clock == "fake" else None
            row([f"**governor {verdict}**", label, ns(gov), x(gov, fl), "", "", ""])
    row(["**tokio Semaphore try_acquire+drop**", "—", ns(tokio_ar), x(tokio_ar, T.get("floor/cas64")),
         "", "", "1.00x"])
    row(["**tokio Semaphore denied**", "—", ns(tokio_d), "", "", "", "1.00x"])
    print()


def table_two():
    print("### Two threads on one shared limiter\n")
    print("Median wall time for each of the two threads to make one call (both run at once), and the")
    print("combined throughput; ratio > 1 in the last columns means more throughput than the peer.\n")
    row(["operation", "clock", "median ns / 2 calls", "M calls/s", "throughput ÷ governor",
         "throughput ÷ tokio"])
    row(["---", "---", "---:", "---:", "---:", "---:"])
    for key, label in [
        ("manual+cas64", "floor: manual clock + `AtomicU64` load + CAS (governor's skeleton)"),
        ("manual+cas128", "floor: manual clock + `AtomicU128` load + CAS"),
        ("manual+cas128+counter", "floor: … + `fetch_add` on the same cache line (ours, allowed)"),
        ("manual+cas128+counter-apart", "floor: … + `fetch_add` on a line of its own"),
        ("manual+load", "floor: manual clock + load, no write (governor's denial)"),
        ("manual+load+counter", "floor: … + `fetch_add` on the same line (ours, denied)"),
        ("manual+load+counter-apart", "floor: … + `fetch_add` on a line of its own"),
    ]:
        v = T.get("mt2/floor/" + key)
        row([label, "manual", ns(v), "—" if v is None else f"{2e3 / v:.0f}", "", ""])

    def mops(v):
        return "—" if v is None else f"{2e3 / v:.0f}"

    def tput(a, b):
        return "—" if a is None or b is None else f"{b / a:.2f}x"

    tokio_ar = T.get("mt2/tokio_semaphore/acquire+release")
    tokio_d = T.get("mt2/tokio_semaphore/denied")
    for c in ["manual", "coarse"]:
        for verdict in ["allowed", "denied"]:
            gov = T.get(f"mt2/governor/{verdict}/{c}")
            for lim in ["token_bucket", "fixed_window", "sliding_window"]:
                v = T.get(f"mt2/{lim}/{verdict}/{c}")
                row([f"{lim} {verdict}", c, ns(v), mops(v), tput(v, gov), ""])
            row([f"**governor {verdict}**", c, ns(gov), mops(gov), "1.00x", ""])
        for op, label, tok in [
            ("acquire+release", "concurrency acquire+release", tokio_ar),
            ("acquire+release-held", "concurrency acquire+release (another lease held)", tokio_ar),
            ("denied", "concurrency denied", tokio_d),
        ]:
            v = T.get(f"mt2/concurrency/{op}/{c}")
            row([label, c, ns(v), mops(v), "", tput(v, tok)])
    for verdict in ["allowed", "denied"]:
        gov = T.get(f"mt2/governor/{verdict}/quanta")
        row([f"**governor {verdict}**", "QuantaClock (default)", ns(gov), mops(gov), "", ""])
    row(["**tokio Semaphore try_acquire+drop**", "—", ns(tokio_ar), mops(tokio_ar), "", "1.00x"])
    row(["**tokio Semaphore denied**", "—", ns(tokio_d), mops(tokio_d), "", "1.00x"])
    print()


def table_instructions():
    print("### Instructions per call (iai-callgrind, ManualClock / FakeRelativeClock)\n")
    row(["operation", "instructions", "× floor (clock + cas64)", "× governor (same verdict)",
         "× tokio"])
    row(["---", "---:", "---:", "---:", "---:"])
    floor = I.get("floor_clock_cas64.manual_cas64")
    rows = [
        ("floor_cas64.cas64", "floor: `AtomicU64` load + CAS", None, None),
        ("floor_cas128.cas128", "floor: `AtomicU128` load + CAS", None, None),
        ("floor_clock_cas64.manual_cas64", "floor: ManualClock read + `AtomicU64` load + CAS",
         None, None),
    ]
    for verdict in ["allowed", "denied"]:
        for lim in ["token_bucket", "fixed_window", "sliding_window"]:
            rows.append((f"{lim}.{verdict}", f"{lim} {verdict}",
                         f"governor_fake_clock.{verdict}", None))
    rows += [
        ("concurrency.acquire_release", "concurrency acquire+release (back to full)", None,
         "tokio_semaphore.acquire_release"),
        ("concurrency.acquire_release_held", "concurrency acquire+release (another lease held)",
         None, "tokio_semaphore.acquire_release"),
        ("concurrency.denied", "concurrency denied", None, "tokio_semaphore.denied"),
        ("governor_fake_clock.allowed", "**governor check allowed** (FakeRelativeClock)", None,
         None),
        ("governor_fake_clock.denied", "**governor check denied** (FakeRelativeClock)", None,
         None),
        ("tokio_semaphore.acquire_release", "**tokio Semaphore try_acquire+drop**", None, None),
        ("tokio_semaphore.denied", "**tokio Semaphore denied**", None, None),
    ]
    for key, label, gov, tok in rows:
        v = I.get(key)
        g = I.get(gov) if gov else None
        t = I.get(tok) if tok else None
        row([label, "—" if v is None else str(v), x(v, floor), x(v, g) if gov else "",
             x(v, t) if tok else ""])
    print()


def table_targets():
    """Issue 10's targets, from the paired rounds: in each round every benchmark below ran once,
    within about a minute of the others; a ratio is computed within each round, and the table
    gives the median over the rounds and the range."""
    rounds = [load(d) for d in ARGS.pairs]
    if not rounds:
        return
    print("### The targets, paired rounds\n")
    print(f"{len(rounds)} round(s); in each, every benchmark below ran once, within about a minute.")
    print("Each ratio is taken within a round (time of the first ÷ time of the second; for")
    print("throughput the inverse); the table gives the median over the rounds and, in brackets,")
    print("the lowest and highest.\n")
    row(["target", "ours", "against", "median ratio [range]", "goal", "met"])
    row(["---", "---", "---", "---:", "---:", "---"])

    def ratio(a, b, goal, label, invert=False):
        rs = sorted(r[a] / r[b] for r in rounds if a in r and b in r)
        if invert:
            rs = sorted(1 / v for v in rs)
        if not rs:
            row([label, a, b, "not measured", "", ""])
            return
        med = rs[len(rs) // 2] if len(rs) % 2 else (rs[len(rs) // 2 - 1] + rs[len(rs) // 2]) / 2
        ok = med >= goal if invert else med <= goal
        sign = "≥" if invert else "≤"
        row([label, a, b, f"{med:.2f}x [{rs[0]:.2f}–{rs[-1]:.2f}]", f"{sign} {goal}x",
             "yes" if ok else "**no**"])

    for verdict in ["allowed", "denied"]:
        for c in CLOCKS:
            for lim in ["token_bucket", "fixed_window"]:
                goal = 1.1 if verdict == "allowed" else 1.2
                ratio(f"st/{lim}/{verdict}/{c}", f"st/governor/{verdict}/{c}", goal,
                      f"{verdict}: time ≤ {goal}x governor's, equal clock")
    for verdict in ["allowed", "denied"]:
        for c in ["manual", "coarse"]:
            for lim in ["token_bucket", "fixed_window"]:
                goal = 1.0 if verdict == "allowed" else 0.8
                ratio(f"mt2/{lim}/{verdict}/{c}", f"mt2/governor/{verdict}/{c}", goal,
                      f"two threads {verdict}: throughput ≥ {goal}x governor's", invert=True)
    for c in CLOCKS:
        ratio(f"st/sliding_window/allowed/{c}", f"st/token_bucket/allowed/{c}", 1.5,
              "sliding window allowed ≤ 1.5x token bucket")
    for c in ["manual", "coarse"]:
        for op in ["acquire+release", "acquire+release-held"]:
            ratio(f"st/concurrency/{op}/{c}", "st/tokio_semaphore/acquire+release", 0.7,
                  "concurrency acquire+release ≤ 0.7x tokio")
    for op in ["acquire+release", "acquire+release-held"]:
        ratio(f"st/concurrency/{op}/std", "st/tokio_semaphore/acquire+release", 1.0,
              "concurrency acquire+release, StdClock ≤ 1.0x tokio")
    for c in ["manual", "coarse"]:
        for op in ["acquire+release", "acquire+release-held"]:
            ratio(f"st/concurrency/{op}/{c}", "floor/sub+add", 1.3,
                  "concurrency acquire+release ≤ 1.3x the floor (fetch_sub + fetch_add)")
    for c in CLOCKS:
        ratio(f"st/concurrency/denied/{c}", "st/tokio_semaphore/denied", 2.0,
              "concurrency denied ≤ 2x tokio's denial")
    print()
    if I:
        print("Instructions (iai-callgrind, deterministic): target ≤ 45 for an allowed token bucket /")
        print("fixed window decision (governor: "
              f"{I.get('governor_fake_clock.allowed', '—')}).\n")
        row(["call", "instructions", "goal", "met"])
        row(["---", "---:", "---:", "---"])
        for lim in ["token_bucket", "fixed_window"]:
            v = I.get(f"{lim}.allowed")
            row([f"{lim} allowed", "—" if v is None else str(v), "≤ 45",
                 "—" if v is None else ("yes" if v <= 45 else "**no**")])
        print()


table_targets()
table_floor()
table_single()
table_two()
table_instructions()
