/*
 * runtime.cc — the CUDA emulator's runtime (see cuda_runtime_api.h): one
 * device ("opforge CUDA emulator", 2 multiprocessors, so that grids are small
 * and grid-stride loops take several steps), host memory as device memory,
 * streams that run work when it is enqueued, and stream capture into graphs
 * that replay the recorded launches (memory freed on a stream while it is
 * captured belongs to the graph until the graph is destroyed, as a CUDA
 * graph's allocations do). A launch on the legacy default stream
 * while a stream is captured fails, as CUDA's global capture mode makes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(__x86_64__) || defined(OPF_EMU_UCONTEXT)
#define EMU_UCONTEXT 1
#include <ucontext.h>
#else
#define EMU_UCONTEXT 0
#endif

#include <vector>

#include "cuda_runtime.h"
#include "opforge.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

struct opf_emu_graph {
    std::vector<std::function<void()>> launches;
    /* Freed on the stream while it was captured: the graph's memory, which
     * its launches use on every replay; freed with the captured graph. */
    std::vector<void *> owned;
};

struct opf_emu_stream {
    opf_emu_graph *capture; /* non-NULL while captured */
};

static cudaError_t last_error = cudaSuccess;
static int current_device = 0;
static int captures = 0; /* streams being captured */

static cudaError_t fail(cudaError_t err) {
    last_error = err;
    return err;
}

void opf_emu_set_thread(dim3 grid, dim3 block, unsigned int b, unsigned int t) {
    gridDim = grid;
    blockDim = block;
    blockIdx = uint3{b, 0, 0};
    threadIdx = uint3{t, 0, 0};
}

/* --- a block's threads, and their barriers ------------------------------------------------------------------------ */

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

/* --- switching between a block's threads ---
 *
 * On x86-64 a switch saves the callee-saved registers on the current stack
 * and moves to the other stack: a few instructions, where swapcontext makes
 * two system calls (for the signal mask) and, under ASan, clears the shadow
 * of the whole target stack on every switch. (MXCSR and the x87 control
 * word, callee-saved too, are left alone: no kernel changes them.)
 * Elsewhere (or built with -DOPF_EMU_UCONTEXT), ucontext. */
#if !EMU_UCONTEXT
extern "C" void opf_emu_switch(void **save_sp, void *load_sp);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".local opf_emu_switch\n"
        ".type opf_emu_switch, @function\n"
        "opf_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size opf_emu_switch, .-opf_emu_switch\n"
        ".popsection\n");

namespace {
struct emu_context {
    void *sp;
};

/* A context that, switched to, calls entry (which never returns) on the
 * stack [stack, stack + size): six zeroed registers, then entry as the
 * return address, placed so that entry starts with the stack aligned as
 * after a call. */
void emu_context_make(emu_context *c, char *stack, size_t size, void (*entry)(void)) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)(top - 8); /* entry's "return address" slot: (sp + 8) % 16 == 0 */
    *--sp = (void *)entry;
    for (int r = 0; r < 6; r++) {
        *--sp = NULL;
    }
    c->sp = sp;
}

void emu_context_switch(emu_context *from, emu_context *to) { opf_emu_switch(&from->sp, to->sp); }
} // namespace
#else
namespace {
struct emu_context {
    ucontext_t uc;
};

void emu_context_make(emu_context *c, char *stack, size_t size, void (*entry)(void)) {
    if (getcontext(&c->uc) != 0) {
        fprintf(stderr, "CUDA emulator: getcontext failed\n");
        abort();
    }
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL; /* entry never returns */
    makecontext(&c->uc, entry, 0);
}

void emu_context_switch(emu_context *from, emu_context *to) {
    if (swapcontext(&from->uc, &to->uc) != 0) {
        fprintf(stderr, "CUDA emulator: swapcontext failed\n");
        abort();
    }
}
} // namespace
#endif

namespace {

enum emu_state { EMU_RUNNABLE, EMU_AT_BARRIER, EMU_DONE };

struct emu_thread {
    emu_context context;
    emu_state state;
};

enum : size_t { EMU_STACK_BYTES = 256 << 10, EMU_SLOT_BYTES = 16 };

/* The block being run: its threads, the scheduler's context, and the slots
 * of __shfl_xor_sync's exchanges. */
struct emu_block {
    dim3 grid, block;
    unsigned int index;
    const std::function<void()> *thread;
    emu_context scheduler;
    std::vector<emu_thread> threads;
    unsigned int current;
    bool coroutines; /* false once thread 0 has finished without a barrier */
    std::vector<unsigned char> slots;
};

emu_block *running = NULL;
std::vector<std::vector<char>> stacks; /* one per thread of the largest block so far, kept */
#if EMU_ASAN
/* The scheduler's stack, as ASan reports it on each switch to a thread. */
const void *scheduler_bottom = NULL;
size_t scheduler_size = 0;
#endif

[[noreturn]] void emu_abort(const char *what) {
    fprintf(stderr, "CUDA emulator: %s (block %u, thread %u)\n", what, running != NULL ? running->index : 0u,
            running != NULL ? running->current : 0u);
    abort();
}

/* A thread's first frame: it runs the kernel, then hands its stack back to
 * the scheduler for good. */
void emu_entry(void) {
    emu_block *b = running;
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &scheduler_bottom, &scheduler_size);
#endif
    (*b->thread)();
    b->threads[b->current].state = EMU_DONE;
#if EMU_ASAN
    __sanitizer_start_switch_fiber(NULL, scheduler_bottom, scheduler_size); /* this stack is done with */
#endif
    emu_context_switch(&b->threads[b->current].context, &b->scheduler);
    emu_abort("a finished thread was resumed");
}

/* Runs thread t until it reaches a barrier or finishes. */
void emu_resume(emu_block *b, unsigned int t) {
    b->current = t;
    opf_emu_set_thread(b->grid, b->block, b->index, t);
#if EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, stacks[t].data(), EMU_STACK_BYTES);
#endif
    emu_context_switch(&b->scheduler, &b->threads[t].context);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

void emu_start(emu_block *b, unsigned int t) {
    emu_thread &th = b->threads[t];
    emu_context_make(&th.context, stacks[t].data(), EMU_STACK_BYTES, emu_entry);
    th.state = EMU_RUNNABLE;
}

/* The current thread waits at a barrier of its block. */
void emu_barrier(void) {
    emu_block *b = running;
    if (b == NULL) {
        emu_abort("a barrier outside a kernel");
    }
    if (!b->coroutines) {
        emu_abort("a barrier that thread 0 of the block did not reach");
    }
    const unsigned int t = b->current;
    b->threads[t].state = EMU_AT_BARRIER;
#if EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, scheduler_bottom, scheduler_size);
#endif
    emu_context_switch(&b->threads[t].context, &b->scheduler);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &scheduler_bottom, &scheduler_size);
#endif
    opf_emu_set_thread(b->grid, b->block, b->index, t);
}

} // namespace

void opf_emu_run_block(dim3 grid, dim3 block, unsigned int index, const std::function<void()> &thread) {
    emu_block b;
    b.grid = grid;
    b.block = block;
    b.index = index;
    b.thread = &thread;
    b.threads.resize(block.x);
    b.current = 0;
    b.coroutines = true;
    b.slots.assign((size_t)block.x * EMU_SLOT_BYTES, 0);
    while (stacks.size() < block.x) {
        stacks.emplace_back(EMU_STACK_BYTES);
    }
    emu_block *const outer = running;
    running = &b;
    emu_start(&b, 0);
    emu_resume(&b, 0);
    if (b.threads[0].state == EMU_DONE) { /* no barrier: the others as plain calls */
        b.coroutines = false;
        for (unsigned int t = 1; t < block.x; t++) {
            b.current = t;
            opf_emu_set_thread(grid, block, index, t);
            thread();
        }
    } else {
        for (unsigned int t = 1; t < block.x; t++) {
            emu_start(&b, t);
        }
        for (;;) {
            for (unsigned int t = 0; t < block.x; t++) {
                if (b.threads[t].state == EMU_RUNNABLE) {
                    emu_resume(&b, t);
                }
            }
            unsigned int waiting = 0;
            for (const emu_thread &th : b.threads) {
                waiting += th.state == EMU_AT_BARRIER;
            }
            if (waiting == 0) {
                break;
            }
            if (waiting != block.x) {
                emu_abort("a barrier that some threads of the block reached and others finished without");
            }
            for (emu_thread &th : b.threads) {
                th.state = EMU_RUNNABLE;
            }
        }
    }
    running = outer;
}

void __syncthreads(void) { emu_barrier(); }

void opf_emu_exchange(const void *mine, void *theirs, size_t size, int lane_mask) {
    emu_block *b = running;
    if (b == NULL || size > EMU_SLOT_BYTES) {
        emu_abort("a shuffle outside a kernel, or of more than 16 bytes");
    }
    const unsigned int t = b->current, other = t ^ (unsigned int)lane_mask;
    if (other >= b->block.x) {
        emu_abort("a shuffle with a thread outside the block");
    }
    memcpy(&b->slots[(size_t)t * EMU_SLOT_BYTES], mine, size);
    emu_barrier();
    memcpy(theirs, &b->slots[(size_t)other * EMU_SLOT_BYTES], size);
    emu_barrier();
}

cudaError_t opf_emu_enqueue(cudaStream_t stream, const std::function<void()> &launch) {
    if (stream != NULL && stream->capture != NULL) {
        stream->capture->launches.push_back(launch);
        return cudaSuccess;
    }
    if (stream == NULL && captures > 0) {
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    launch();
    return cudaSuccess;
}

extern "C" {

cudaError_t cudaGetLastError(void) {
    cudaError_t err = last_error;
    last_error = cudaSuccess;
    return err;
}

const char *cudaGetErrorString(cudaError_t error) { return error == cudaSuccess ? "no error" : "emulated error"; }

const char *cudaGetErrorName(cudaError_t error) { return error == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (device != 0) {
        return fail(cudaErrorInvalidDevice);
    }
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    if (attr != cudaDevAttrMultiProcessorCount || device != 0) {
        return fail(cudaErrorInvalidValue);
    }
    *value = 2;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (device != 0) {
        return fail(cudaErrorInvalidDevice);
    }
    memset(prop, 0, sizeof *prop);
    strcpy(prop->name, "opforge CUDA emulator");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 2;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = (size_t)8 << 30;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
    *ptr = aligned_alloc(256, (size + 255) / 256 * 256 + 256);
    return *ptr != NULL ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *ptr) {
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
    (void)stream;
    return cudaMalloc(ptr, size);
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
    (void)pool;
    (void)stream;
    return cudaMalloc(ptr, size);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
    if (stream != NULL && stream->capture != NULL) { /* a graph's allocation: lives as long as the graph */
        stream->capture->owned.push_back(ptr);
        return cudaSuccess;
    }
    return cudaFree(ptr);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    (void)kind;
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
    memset(ptr, value, count);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    (void)flags;
    *stream = new opf_emu_stream{NULL};
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    return stream != NULL && stream->capture != NULL ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    (void)mode;
    if (stream == NULL || stream->capture != NULL) {
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    stream->capture = new opf_emu_graph;
    captures++;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    if (stream == NULL || stream->capture == NULL) {
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    *graph = stream->capture;
    stream->capture = NULL;
    captures--;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)flags;
    *exec = new opf_emu_graph{graph->launches, {}}; /* the memory stays the graph's */
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    for (const std::function<void()> &launch : exec->launches) {
        opf_emu_enqueue(stream, launch);
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    for (void *ptr : graph->owned) {
        free(ptr);
    }
    delete graph;
    return cudaSuccess;
}

/* opforge's memory pool (src/cuda/pool.c): none here, so scratch comes from
 * cudaMallocAsync, as where pools are not supported. */
cudaMemPool_t opf_cuda_scratch_pool(int device, cudaStream_t stream);
cudaMemPool_t opf_cuda_scratch_pool(int device, cudaStream_t stream) {
    (void)device;
    (void)stream;
    return NULL;
}

/* What the emulated library lacks: no cuBLASLt, hence no dense on "CUDA". */
opf_status opf_cuda_dense_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                  const opf_attr_value *attrs, void *stream);
opf_status opf_cuda_dense_grad_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                       const opf_attr_value *attrs, void *stream);

opf_status opf_cuda_dense_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                  const opf_attr_value *attrs, void *stream) {
    (void)inputs;
    (void)outputs;
    (void)attrs;
    (void)stream;
    return opf_error(OPF_E_UNSUPPORTED, "the CUDA emulator has no dense");
}

opf_status opf_cuda_dense_grad_compute(const opf_tensor *const *inputs, const opf_tensor *const *outputs,
                                       const opf_attr_value *attrs, void *stream) {
    return opf_cuda_dense_compute(inputs, outputs, attrs, stream);
}
}
