/*
 * slots.h — the fixed pools of callbacks the C adapters register.
 *
 * A framework calls back a C function with no pointer of ours (a torch boxed
 * kernel, a TF shape function, an XLA FFI handler), so each registered row
 * takes one of a fixed set of functions that differ only in the slot number
 * they pass on. OPF_SLOTS_128(M) and OPF_SLOTS_256(M) expand M(tag, index)
 * for every index; tag is a token unique to the index (its base-4 digits
 * behind an 's'), to name the function. Shared by every adapter.
 */
#ifndef OPF_ADAPTERS_SLOTS_H
#define OPF_ADAPTERS_SLOTS_H

#define OPF_SLOTS_4(M, t, n) M(t##0, (n)*4) M(t##1, (n)*4 + 1) M(t##2, (n)*4 + 2) M(t##3, (n)*4 + 3)
#define OPF_SLOTS_16(M, t, n)                                                                                          \
    OPF_SLOTS_4(M, t##0, (n)*4)                                                                                        \
    OPF_SLOTS_4(M, t##1, (n)*4 + 1) OPF_SLOTS_4(M, t##2, (n)*4 + 2) OPF_SLOTS_4(M, t##3, (n)*4 + 3)
#define OPF_SLOTS_64(M, t, n)                                                                                          \
    OPF_SLOTS_16(M, t##0, (n)*4)                                                                                       \
    OPF_SLOTS_16(M, t##1, (n)*4 + 1) OPF_SLOTS_16(M, t##2, (n)*4 + 2) OPF_SLOTS_16(M, t##3, (n)*4 + 3)
#define OPF_SLOTS_128(M) OPF_SLOTS_64(M, s0, 0) OPF_SLOTS_64(M, s1, 1)
#define OPF_SLOTS_256(M) OPF_SLOTS_128(M) OPF_SLOTS_64(M, s2, 2) OPF_SLOTS_64(M, s3, 3)

#endif
