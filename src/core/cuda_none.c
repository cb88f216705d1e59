/* cuda_none.c — the CUDA queries of a build without CUDA (no nvcc found). */
#include "opforge.h"

int opf_cuda_device_count(void) { return 0; }
