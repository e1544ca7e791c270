#!/usr/bin/env python3
"""The machine code (SASS) of the kernels the planner chooses, without a GPU.

  kernel_sass.py images PROGRAM DIR [ARCH] [--quick] [--only TEXT]...
      runs CudaNonLocalMeansKernelImages (PROGRAM) into DIR (created) and disassembles every cubin
      into DIR/NNN.sass (--only: just the configurations whose description holds every TEXT);
  kernel_sass.py compare DIR_A DIR_B [--common]
      compares two such folders configuration by configuration (by description): which kernels
      changed, with their instruction counts, registers and stack. Exit status 1 if any changed or
      is missing (--common: only the configurations in both, e.g. a --quick folder against a full one);
  kernel_sass.py mix DIR [SUBSTRING ...]
      for each configuration whose description holds every SUBSTRING: each kernel's instruction count
      and the instruction mix of its longest loop (the widest backward branch).

cuobjdump and nvdisasm come from PATH, or from CUOBJDUMP and NVDISASM_PATH; a toolkit without them
can take PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (their nvidia/cu13/bin).
Typical use, a refactoring of a kernel that must not change its machine code:

  python3 benchmarks/kernel_sass.py images build/bin/CudaNonLocalMeansKernelImages /tmp/before
  (edit, rebuild)
  python3 benchmarks/kernel_sass.py images build/bin/CudaNonLocalMeansKernelImages /tmp/after
  python3 benchmarks/kernel_sass.py compare /tmp/before /tmp/after
"""
import collections
import os
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,6})\*/\s+([^;]*);\s*(/\*\s*0x[0-9a-f]+\s*\*/)?")
BRANCH_TARGET = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def cuobjdump():
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        sys.exit("cuobjdump not found: put it on PATH or name it in CUOBJDUMP (PyPI: nvidia-cuda-cuobjdump)")
    return tool


def read_index(folder):
    """description -> file name (without suffix)."""
    index = {}
    with open(os.path.join(folder, "index.txt")) as f:
        for line in f:
            name, description = line.rstrip("\n").split("\t", 1)
            index[description] = os.path.splitext(name)[0]
    return index


def images(program, folder, arch, options):
    os.makedirs(folder, exist_ok=True)
    subprocess.run([program, folder, arch] + options, check=True)
    tool = cuobjdump()
    for description, stem in read_index(folder).items():
        cubin = os.path.join(folder, stem + ".cubin")
        if not os.path.exists(cubin):
            continue  # PTX (an architecture NVRTC does not know)
        for option, suffix in (("-sass", ".sass"), ("-res-usage", ".res")):
            text = subprocess.run([tool, option, cubin], check=True, capture_output=True, text=True).stdout
            with open(os.path.join(folder, stem + suffix), "w") as f:
                f.write(text)


def functions(folder, stem):
    """kernel name -> list of (address, instruction text, encoding)."""
    with open(os.path.join(folder, stem + ".sass")) as f:
        text = f.read()
    result = {}
    for part in re.split(r"\n\s+Function : ", text)[1:]:
        name = part.split("\n", 1)[0].strip()
        result[name] = [
            (int(m.group(1), 16), m.group(2).strip(), m.group(3) or "") for m in INSTRUCTION.finditer(part)
        ]
    return result


def resources(folder, stem):
    """kernel name -> "REG:n STACK:n" (cuobjdump -res-usage)."""
    path = os.path.join(folder, stem + ".res")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read()
    found = re.findall(r"Function (\w+):\s*\n\s*(REG:\d+ STACK:\d+)", text)
    return dict(found)


def describe_change(name, old, new, old_resources, new_resources):
    """One kernel's change: instructions, its longest loop's instructions, registers and stack."""
    return (
        f"{name}: {len(old)} -> {len(new)} instructions, longest loop {len(longest_loop(old))} -> "
        f"{len(longest_loop(new))}, {old_resources.get(name, '?')} -> {new_resources.get(name, '?')}"
    )


def compare(a, b, common):
    ia, ib = read_index(a), read_index(b)
    same = changed = 0
    kernels_changed = collections.Counter()
    descriptions = set(ia) & set(ib) if common else set(ia) | set(ib)
    for description in sorted(descriptions):
        if description not in ia or description not in ib:
            print(f"only in {'the first' if description in ia else 'the second'}: {description}")
            changed += 1
            continue
        fa, fb = functions(a, ia[description]), functions(b, ib[description])
        if fa == fb:
            same += 1
            continue
        changed += 1
        ra, rb = resources(a, ia[description]), resources(b, ib[description])
        print(f"changed: {description}")
        for name in sorted(set(fa) | set(fb)):
            if fa.get(name) != fb.get(name):
                kernels_changed[name] += 1
                print("  " + describe_change(name, fa.get(name, []), fb.get(name, []), ra, rb))
    print(f"{same} configurations with the same machine code, {changed} changed or missing")
    if kernels_changed:
        print("kernels changed: " + ", ".join(f"{n} in {c}" for n, c in kernels_changed.most_common()))
    return 0 if changed == 0 else 1


def opcode(text):
    words = text.split()
    op = words[1] if words[0].startswith("@") else words[0]
    base = op.split(".")[0]
    width = next((w for w in (".128", ".64") if w in op), "")
    return base + width


def longest_loop(instructions):
    """The instructions of the widest backward branch's range that holds no EXIT (a branch back from
    out-of-line code after the exit, such as the collective path of a shuffle, is not a loop)."""
    exits = [address for address, text, _ in instructions if opcode(text) == "EXIT"]
    loops = []
    for address, text, _ in instructions:
        m = BRANCH_TARGET.search(text)
        if m and int(m.group(1), 16) < address and not any(int(m.group(1), 16) <= e <= address for e in exits):
            loops.append((int(m.group(1), 16), address))
    if not loops:
        return []
    lo, hi = max(loops, key=lambda l: l[1] - l[0])
    return [text for address, text, _ in instructions if lo <= address <= hi]


def mix(folder, substrings):
    for description, stem in read_index(folder).items():
        if not all(s in description for s in substrings) or not os.path.exists(os.path.join(folder, stem + ".sass")):
            continue
        print(description)
        for name, instructions in sorted(functions(folder, stem).items()):
            loop = longest_loop(instructions)
            counts = collections.Counter(opcode(t) for t in loop)
            top = ", ".join(f"{op} {n}" for op, n in counts.most_common())
            print(f"  {name}: {len(instructions)} instructions; longest loop {len(loop)}: {top}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "images":
        rest = argv[3:]
        arch = rest.pop(0) if rest and rest[0].isdigit() else "90"
        images(argv[1], argv[2], arch, rest)
        return 0
    if len(argv) in (3, 4) and argv[0] == "compare" and argv[3:] in ([], ["--common"]):
        return compare(argv[1], argv[2], argv[3:] == ["--common"])
    if len(argv) >= 2 and argv[0] == "mix":
        mix(argv[1], argv[2:])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
