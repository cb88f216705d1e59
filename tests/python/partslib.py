"""A user library in several files (OPF_OP_PART, OPF_EXPORT_OP_PARTS): a
header naming two parts, a file per part and the file that exports them."""

from __future__ import annotations

from pathlib import Path

PARTS_H = """
#include <opforge.h>
OPF_OP_PART(scale_ops);
OPF_OP_PART(shift_ops);
"""
SCALE_C = """
#include "parts.h"
OPF_ELTWISE_KERNEL(scale3, (x), (y), y = 3 * x;)
const opf_op_decl scale_ops[] = {
    {"scale3(x) -> y", .doc = "3 x", .grad = "dx = scale3(dy)", .eltwise = &scale3},
    {0},
};
"""
SHIFT_C = """
#include "parts.h"
OPF_ELTWISE_KERNEL(shifted, (x), (y), y = x + (T)SHIFT;)
const opf_op_decl shift_ops[] = {
    {"shift_scale(x) -> y", .doc = "3 x + SHIFT", .grad = "dx = scale3(dy)", .eltwise = &shifted},
    {0},
};
"""
TABLE_C = """
#include "parts.h"
OPF_EXPORT_OP_PARTS("parted", scale_ops, shift_ops)
"""


def write_parts(directory: Path, shift: float = 1.0) -> list[Path]:
    """The table file and its two parts (shift_scale adds ``shift``)."""
    (directory / "parts.h").write_text(PARTS_H)
    (directory / "scale.c").write_text(SCALE_C)
    (directory / "shift.c").write_text(SHIFT_C.replace("x + (T)SHIFT", f"3 * x + (T){shift!r}"))
    (directory / "table.c").write_text(TABLE_C)
    return [directory / "table.c", directory / "scale.c", directory / "shift.c"]
