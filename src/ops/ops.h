/* ops.h — the rows of the built-in op table (see ops.inc). */
#ifndef OPF_OPS_OPS_H
#define OPF_OPS_OPS_H

#include "opforge.h"

#define OPF_OP(row) extern const opf_op_def opf_op_##row;
#include "ops.inc"
#undef OPF_OP

#endif
