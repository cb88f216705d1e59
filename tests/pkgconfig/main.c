/*
 * A minimal consumer of an installed opforge, built with nothing but
 * `pkg-config --cflags --libs opforge`: runs opf_relu on a small array and
 * checks the result. Exit status 0 on success, 1 on failure.
 */
#include <opforge.h>
#include <stdio.h>

int main(void) {
    float x[5] = {-2.0f, -0.5f, 0.0f, 1.5f, 3.0f};
    float y[5] = {9, 9, 9, 9, 9};
    const float want[5] = {0.0f, 0.0f, 0.0f, 1.5f, 3.0f};
    const int64_t shape[1] = {5};
    opf_tensor tx = opf_tensor_make(x, OPF_F32, 1, shape);
    opf_tensor ty = opf_tensor_make(y, OPF_F32, 1, shape);
    opf_status st = opf_relu(&tx, &ty);
    if (st != OPF_OK) {
        fprintf(stderr, "opf_relu failed: %s: %s\n", opf_status_name(st), opf_last_error());
        return 1;
    }
    for (int i = 0; i < 5; i++) {
        if (y[i] != want[i]) {
            fprintf(stderr, "opf_relu: y[%d] = %g, want %g\n", i, (double)y[i], (double)want[i]);
            return 1;
        }
    }
    printf("opforge %s: opf_relu ok (isa %s)\n", opf_version(), opf_isa_name(opf_get_isa()));
    return 0;
}
