#!/usr/bin/env python3
"""Where a kernel's warps stall, by reason and by instruction, from an Nsight Compute source page.

Usage: python3 benchmarks/ncu_stalls.py SOURCE.csv [TOP]

SOURCE.csv is the per-instruction page of a report made with source counters, e.g. on the device:

  ncu --set full --import-source yes -o REPORT --kernel-name nlm_fast -c 1 PROGRAM ARGS...
  ncu --import REPORT.ncu-rep --page source --print-source sass --csv > SOURCE.csv

Prints the warp-state samples by stall reason (share of all samples; "selected" is the share of
samples in which the warp issued), then per opcode (the mnemonic before its first '.') the share of
the executed instructions and of the samples (opcodes under 0.05 % of both left out), and the TOP (default 0) instructions with the most
samples. Runs without a GPU and without Nsight Compute.
"""
import collections
import csv
import sys


def opcode(sass):
    words = sass.split()
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names = rows[header]
    column = {name: i for i, name in enumerate(names)}
    reasons = [n for n in names if n.startswith("stall_") and "Not Issued" not in n]
    samples_of = column["Warp Stall Sampling (All Samples)"]
    executed_of = column["Instructions Executed"]
    by_reason = collections.Counter()
    samples = collections.Counter()
    executed = collections.Counter()
    hottest = []
    for r in rows[header + 1:]:
        if len(r) < len(names) or r[0] == "Address":
            continue
        op = opcode(r[1])
        s = int(r[samples_of] or 0)
        samples[op] += s
        executed[op] += int(r[executed_of] or 0)
        hottest.append((s, r[0], r[1].strip()))
        for reason in reasons:
            by_reason[reason] += int(r[column[reason]] or 0)
    total_samples = sum(samples.values()) or 1
    total_executed = sum(executed.values()) or 1
    print(f"{total_samples} samples, {total_executed} instructions executed (warp level)")
    print("stall reason                 share of samples")
    for reason, v in by_reason.most_common():
        if v:
            print(f"  {reason[len('stall_'):]:26s} {v / total_samples:7.1%}")
    print("opcode      executed  samples")
    for op, v in executed.most_common():
        if v / total_executed >= 0.0005 or samples[op] / total_samples >= 0.0005:
            print(f"  {op:9s} {v / total_executed:7.1%} {samples[op] / total_samples:8.1%}")
    for s, address, sass in sorted(hottest, reverse=True)[:top]:
        print(f"  {s / total_samples:6.2%}  {address}  {sass}")


if __name__ == "__main__":
    main()
