/* ops.h — the declarations of the built-in ops (see ops.inc) and their rows. */
#ifndef OPF_OPS_OPS_H
#define OPF_OPS_OPS_H

#include "opforge.h"

#define OPF_OP(row) extern const opf_op_decl opf_decl_##row;
#include "ops.inc"
#undef OPF_OP

/* Row indices of the built-in table, in ops.inc order. */
typedef enum opf_builtin_id {
#define OPF_OP(row) OPF_ROW_##row,
#include "ops.inc"
#undef OPF_OP
    OPF_ROW_COUNT
} opf_builtin_id;

/* A row of the built-in table (resolved on first use). NULL only if the
 * built-in declarations are wrong, which the C tests rule out. */
const opf_op_def *opf_builtin_row(opf_builtin_id id);

#endif
