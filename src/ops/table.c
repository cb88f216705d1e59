/*
 * table.c — the built-in op table: the declarations listed in ops.inc,
 * resolved once by opf_ops_resolve, exactly as a user's table is.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "ops.h"

static const opf_op_table *_Atomic opf_builtin_table;

const opf_op_table *opf_builtin_ops(void) {
    const opf_op_table *table = atomic_load(&opf_builtin_table);
    if (table != NULL) {
        return table;
    }
    /* The declarations live in one file per op family; the resolver wants
     * them in one array (it keeps no pointer to the array). */
    const opf_op_decl decls[] = {
#define OPF_OP(row) opf_decl_##row,
#include "ops.inc"
#undef OPF_OP
        {0},
    };
    const opf_ops_decl decl = {OPF_TABLE_ABI_VERSION, "opforge", decls};
    const opf_op_table *none = NULL;
    table = opf_ops_resolve(&decl);
    if (table != NULL && !atomic_compare_exchange_strong(&opf_builtin_table, &none, table)) {
        opf_ops_release(table);
        table = none;
    }
    return table;
}

const opf_op_def *opf_builtin_row(opf_builtin_id id) {
    const opf_op_table *table = opf_builtin_ops();
    return table != NULL ? table->ops[id] : NULL;
}

__attribute__((destructor)) static void opf_builtin_table_release(void) {
    opf_ops_release(atomic_exchange(&opf_builtin_table, NULL));
}
