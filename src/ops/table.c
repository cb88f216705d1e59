/* table.c — the built-in op table, assembled from ops.inc. */
#include "ops.h"

static const opf_op_def *const opf_builtin_rows[] = {
#define OPF_OP(row) &opf_op_##row,
#include "ops.inc"
#undef OPF_OP
};

static const opf_op_table opf_builtin_table = {
    .abi_version = OPF_TABLE_ABI_VERSION,
    .name = "opforge",
    .num_ops = (int64_t)(sizeof opf_builtin_rows / sizeof opf_builtin_rows[0]),
    .ops = opf_builtin_rows,
};

const opf_op_table *opf_builtin_ops(void) { return &opf_builtin_table; }
