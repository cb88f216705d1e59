/*
 * cublaslt.c — loads cuBLASLt at run time (see cublaslt.h).
 *
 * Search order, first that loads wins:
 *   1. $OPFORGE_CUBLASLT, a full path to libcublasLt.so.13 (pip's
 *      nvidia-cublas package puts it under site-packages/nvidia/.../lib);
 *   2. "libcublasLt.so.13": found if the process already has it loaded (e.g.
 *      by PyTorch), else via LD_LIBRARY_PATH and the ld.so cache;
 *   3. $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
 * A library of another major version is rejected (the declarations in
 * cublaslt.h follow cuBLASLt 13).
 */
#include "cublaslt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* With <cublasLt.h> at hand, check every declaration against it. */
#if defined(__has_include)
#if __has_include(<cublasLt.h>)
#include <stddef.h>
#include <cublasLt.h>
_Static_assert((int)OPF_LT_SUCCESS == (int)CUBLAS_STATUS_SUCCESS, "cublasStatus_t");
_Static_assert((int)OPF_LT_NOT_SUPPORTED == (int)CUBLAS_STATUS_NOT_SUPPORTED, "cublasStatus_t");
_Static_assert((int)OPF_LT_OP_N == (int)CUBLAS_OP_N && (int)OPF_LT_OP_T == (int)CUBLAS_OP_T, "cublasOperation_t");
_Static_assert((int)OPF_LT_R_32F == (int)CUDA_R_32F && (int)OPF_LT_R_64F == (int)CUDA_R_64F, "cudaDataType");
_Static_assert((int)OPF_LT_COMPUTE_32F == (int)CUBLAS_COMPUTE_32F && (int)OPF_LT_COMPUTE_64F == (int)CUBLAS_COMPUTE_64F,
               "cublasComputeType_t");
_Static_assert((int)OPF_LT_DESC_TRANSA == (int)CUBLASLT_MATMUL_DESC_TRANSA &&
                   (int)OPF_LT_DESC_TRANSB == (int)CUBLASLT_MATMUL_DESC_TRANSB &&
                   (int)OPF_LT_DESC_EPILOGUE == (int)CUBLASLT_MATMUL_DESC_EPILOGUE &&
                   (int)OPF_LT_DESC_BIAS_POINTER == (int)CUBLASLT_MATMUL_DESC_BIAS_POINTER,
               "cublasLtMatmulDescAttributes_t");
_Static_assert((int)OPF_LT_EPILOGUE_DEFAULT == (int)CUBLASLT_EPILOGUE_DEFAULT &&
                   (int)OPF_LT_EPILOGUE_RELU == (int)CUBLASLT_EPILOGUE_RELU &&
                   (int)OPF_LT_EPILOGUE_BIAS == (int)CUBLASLT_EPILOGUE_BIAS &&
                   (int)OPF_LT_EPILOGUE_RELU_BIAS == (int)CUBLASLT_EPILOGUE_RELU_BIAS,
               "cublasLtEpilogue_t");
_Static_assert((int)OPF_LT_PREF_MAX_WORKSPACE_BYTES == (int)CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
                   (int)OPF_LT_PREF_MIN_ALIGNMENT_A_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
                   (int)OPF_LT_PREF_MIN_ALIGNMENT_B_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
                   (int)OPF_LT_PREF_MIN_ALIGNMENT_C_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
                   (int)OPF_LT_PREF_MIN_ALIGNMENT_D_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
               "cublasLtMatmulPreferenceAttributes_t");
_Static_assert(sizeof(opf_lt_algo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
_Static_assert(sizeof(opf_lt_heuristic) == sizeof(cublasLtMatmulHeuristicResult_t) &&
                   offsetof(opf_lt_heuristic, workspace_size) ==
                       offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                   offsetof(opf_lt_heuristic, state) == offsetof(cublasLtMatmulHeuristicResult_t, state),
               "cublasLtMatmulHeuristicResult_t");
_Static_assert(CUBLAS_VER_MAJOR == OPF_LT_MAJOR, "cublaslt.h follows another cuBLAS major version");
#endif
#endif

enum { OPF_LT_MAX_DEVICES = 64 };

static pthread_once_t opf_lt_once = PTHREAD_ONCE_INIT;
static opf_lt_api opf_lt;
static int opf_lt_loaded;
static char opf_lt_why[1024]; /* why loading failed */

static pthread_mutex_t opf_lt_lock = PTHREAD_MUTEX_INITIALIZER;
static opf_lt_handle opf_lt_handles[OPF_LT_MAX_DEVICES]; /* guarded by opf_lt_lock */

/* Appends the strings to opf_lt_why (truncating: the note is a hint). */
static void opf_lt_note(const char *a, const char *b, const char *c) {
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        size_t used = strlen(opf_lt_why);
        strncat(opf_lt_why, parts[i], sizeof opf_lt_why - used - 1);
    }
}

/* dlopen `path`; on failure appends dlerror() to opf_lt_why. */
static void *opf_lt_try(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *err = dlerror();
        opf_lt_note("; ", path, ": ");
        opf_lt_note(err != NULL ? err : "not loadable", "", "");
    }
    return lib;
}

static void *opf_lt_open(void) {
    const char *env = getenv("OPFORGE_CUBLASLT");
    if (env != NULL && env[0] != '\0') {
        void *lib = opf_lt_try(env);
        if (lib != NULL) {
            return lib;
        }
    }
    void *lib = opf_lt_try("libcublasLt.so.13");
    if (lib != NULL) {
        return lib;
    }
    const char *home = getenv("CUDA_HOME");
    if (home != NULL && home[0] != '\0') {
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/lib64/libcublasLt.so.13", home);
        if (n > 0 && (size_t)n < sizeof path && (lib = opf_lt_try(path)) != NULL) {
            return lib;
        }
    }
    return opf_lt_try("/usr/local/cuda/lib64/libcublasLt.so.13");
}

/* Looks up `name` into *slot; 0 (and a note) if missing. The cast from the
 * object pointer dlsym returns is what POSIX prescribes for functions. */
#define OPF_LT_SYM(lib, slot, name)                                                                                    \
    (((slot) = (__typeof__(slot))dlsym((lib), (name))) != NULL || (opf_lt_note("; missing symbol ", (name), ""), 0))

static void opf_lt_load(void) {
    void *lib = opf_lt_open();
    if (lib == NULL) {
        return;
    }
    opf_lt_api api;
    int ok = OPF_LT_SYM(lib, api.create, "cublasLtCreate");
    ok = OPF_LT_SYM(lib, api.status_string, "cublasLtGetStatusString") && ok;
    ok = OPF_LT_SYM(lib, api.version, "cublasLtGetVersion") && ok;
    ok = OPF_LT_SYM(lib, api.desc_create, "cublasLtMatmulDescCreate") && ok;
    ok = OPF_LT_SYM(lib, api.desc_destroy, "cublasLtMatmulDescDestroy") && ok;
    ok = OPF_LT_SYM(lib, api.desc_set, "cublasLtMatmulDescSetAttribute") && ok;
    ok = OPF_LT_SYM(lib, api.layout_create, "cublasLtMatrixLayoutCreate") && ok;
    ok = OPF_LT_SYM(lib, api.layout_destroy, "cublasLtMatrixLayoutDestroy") && ok;
    ok = OPF_LT_SYM(lib, api.pref_create, "cublasLtMatmulPreferenceCreate") && ok;
    ok = OPF_LT_SYM(lib, api.pref_destroy, "cublasLtMatmulPreferenceDestroy") && ok;
    ok = OPF_LT_SYM(lib, api.pref_set, "cublasLtMatmulPreferenceSetAttribute") && ok;
    ok = OPF_LT_SYM(lib, api.heuristic, "cublasLtMatmulAlgoGetHeuristic") && ok;
    ok = OPF_LT_SYM(lib, api.matmul, "cublasLtMatmul") && ok;
    if (!ok) {
        dlclose(lib);
        return;
    }
    size_t version = api.version(); /* major * 10000 + minor * 100 + patch */
    if (version / 10000 != OPF_LT_MAJOR) {
        char found[32];
        snprintf(found, sizeof found, "%zu", version);
        opf_lt_note("; the cuBLASLt found has version ", found, ", not 13.x");
        dlclose(lib);
        return;
    }
    opf_lt = api;
    opf_lt_loaded = 1;
}

opf_status opf_cublaslt_get(const char *op, int device, const opf_lt_api **api, opf_lt_handle *handle) {
    pthread_once(&opf_lt_once, opf_lt_load);
    if (!opf_lt_loaded) {
        return opf_fail(OPF_E_UNSUPPORTED, op,
                        "cannot load cuBLASLt 13 (set OPFORGE_CUBLASLT to the full path of libcublasLt.so.13)%s",
                        opf_lt_why);
    }
    if (device < 0 || device >= OPF_LT_MAX_DEVICES) {
        return opf_fail(OPF_E_UNSUPPORTED, op, "device %d: at most %d CUDA devices are supported", device,
                        OPF_LT_MAX_DEVICES);
    }
    pthread_mutex_lock(&opf_lt_lock);
    opf_lt_status st = OPF_LT_SUCCESS;
    if (opf_lt_handles[device] == NULL) {
        st = opf_lt.create(&opf_lt_handles[device]);
        if (st != OPF_LT_SUCCESS) {
            opf_lt_handles[device] = NULL;
        }
    }
    *handle = opf_lt_handles[device];
    pthread_mutex_unlock(&opf_lt_lock);
    if (st != OPF_LT_SUCCESS) {
        return opf_fail(OPF_E_INTERNAL, op, "cublasLtCreate failed on device %d: %s", device,
                        opf_cublaslt_status_name(st));
    }
    *api = &opf_lt;
    return OPF_OK;
}

const char *opf_cublaslt_status_name(opf_lt_status status) {
    /* opf_lt is written once, inside pthread_once, before opf_lt_loaded. */
    if (opf_lt_loaded) {
        return opf_lt.status_string(status);
    }
    return "cuBLASLt status (library not loaded)";
}
