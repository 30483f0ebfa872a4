#!/usr/bin/env python3
"""Two facts about the tree's shape that `make test` keeps true (core/README.md, "Adding an op").

1. No function outside tests and bench/ is longer than MAX_LINES lines (from the line of its
   opening brace's signature to its closing brace; functions are found as Google style writes
   them: a definition starting in column 0 whose body closes with a '}' in column 0).
2. No op-type string comparison (`type() == "..."`, `.type != "..."`) outside core/ops' op and
   family files and the registry: the facts of an op live in its record (core/ops/ops.h). The
   executor's pattern matcher over local instructions (core/ir/step_fusion.cc) and the other
   known exceptions are listed in ALLOWED with the reason; a new one fails the check.

Run from the repository root. Prints one line per offence and exits 1 when there is any.
"""
import os
import re
import sys

MAX_LINES = 120
SOURCE_DIRS = ["client", "coordinator", "core", "examples", "fuzz", "kernels", "models",
               "monitoring", "python", "rpc", "runtime", "testing", "text", "tools", "util",
               "worker"]
# Files whose op-type comparisons are allowed: core/ops' op, family and registry files, and the
# matchers still to move into records (each named with why).
OP_FILE = re.compile(r"^core/ops/(op_|ops_|ops\.cc|gradients_|lower_|reference_kernels)")
ALLOWED = {
    # pattern matchers over lowered instructions or optimizer graphs, to become record facts
    "core/ir/step_fusion.cc",
    "core/lowering/lower_accumulate.cc",
    "core/planning/memory_model.cc",
    "coordinator/coordinator_metrics.cc",
}
COMPARISON = re.compile(r"""(\btype\(\)|\.type|->type)\s*(==|!=)\s*"[a-z_]""")


def strip(text):
    """Text with comments and string/char literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"(', i):
            j = text.find(')"', i + 3)
            j = n if j < 0 else j + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, lines):
    """(name line, length) of every column-0 function body longer than MAX_LINES."""
    found = []
    start = None
    for k, line in enumerate(lines):
        if start is None:
            # A body opening at column 0 code: the signature's last line ends with '{'.
            if line.rstrip().endswith("{") and not line.startswith((" ", "\t", "#", "}")) \
                    and "(" in "".join(lines[max(0, k - 3):k + 1]) \
                    and not re.match(r"^(namespace|class|struct|enum|union|extern)\b", line) \
                    and not re.search(r"=\s*\{$", line.rstrip()):
                start = k
            elif line.startswith((" ", "\t")) and line.rstrip().endswith("{") and k > 0 \
                    and re.match(r"^[A-Za-z]", lines[k - 1]) and not lines[k - 1].rstrip().endswith((";", "{", "}")) \
                    and "(" in lines[k - 1] and re.search(r"\)\s*(const)?\s*(override)?\s*\{$", line.rstrip()):
                start = k - 1
        elif line.startswith("}"):
            if k - start + 1 > MAX_LINES:
                found.append((start + 1, k - start + 1))
            start = None
    return found


def main():
    offences = []
    for top in SOURCE_DIRS:
        for root, _, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")) or f.endswith("_test.cc"):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    raw = fh.read()
                lines = strip(raw).split("\n")
                for line_no, length in long_functions(path, lines):
                    offences.append(f"{path}:{line_no}: function of {length} lines "
                                    f"(at most {MAX_LINES}; split it)")
                if OP_FILE.match(path) or path in ALLOWED or "testing" in path.split("/") \
                        or f.startswith("test_"):
                    continue
                for k, line in enumerate(raw.split("\n")):
                    if COMPARISON.search(line.split("//")[0]):
                        offences.append(f"{path}:{k + 1}: op-type comparison outside core/ops' "
                                        "records (make it a fact of the op's record)")
    for o in offences:
        print("check_code_shape: " + o)
    if not offences:
        print(f"check_code_shape: no function over {MAX_LINES} lines; no op-type comparison "
              "outside core/ops' records")
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
