/* error.h — setting the calling thread's last-error message. */
#ifndef OPF_CORE_ERROR_H
#define OPF_CORE_ERROR_H

#include "opforge.h"

#if defined(__GNUC__)
#define OPF_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define OPF_PRINTF(fmt_index, first_arg)
#endif

/* Records "<op>: <message>" as the thread's last error and returns status.
 * `op` is the label of what failed: a row's qualname ("opforge.add") or a C
 * entry point ("opf_op_run"). */
opf_status opf_fail(opf_status status, const char *op, const char *fmt, ...) OPF_PRINTF(3, 4);

/* After a compute function failed with `status`: gives its message (set with
 * opf_error, or none) the prefix "<op>: ". */
void opf_error_attribute(opf_status status, const char *op);

/* Clears the thread's last error (called on entry by every public function). */
void opf_clear_error(void);

/* Whether a table, op, argument or attribute name is lower_snake_case, what
 * every framework accepts (table.c; the declarations are held to it too). */
int opf_is_identifier(const char *name);

#endif
