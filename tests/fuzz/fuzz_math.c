/*
** libFuzzer: the math block language and its type checker. The input is
** 4 bytes of shapes, then the source: td_math_compile, then a run with every
** name it reads bound (shapes and dtypes drawn from the 4 bytes, small enough
** that running stays cheap), and for a one-element float result
** td_math_value_and_grad with respect to the first float tensor. Any error
** is fine; a crash, a leak or a hang is not.
*/
#include "fuzz_util.h"

FUZZ_INITIALIZE_WITH_SETUP

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || size > 4096) return 0;
    char *src = malloc(size - 4 + 1);
    if (!src) return 0;
    memcpy(src, data + 4, size - 4);
    src[size - 4] = 0;
    td_math_block *b = NULL;
    if (td_math_compile(src, NULL, &b) == TD_OK) {
        td_scope_begin();
        int n = td_math_n_inputs(b);
        td_math_binding bd[32];
        const char *wrt = NULL;
        for (int i = 0; i < n && i < 32; i++) {
            uint8_t c = data[i % 4] >> (i / 4 % 2 * 4); /* 4 bits per name */
            int nd = c % 3;
            int64_t shape[2] = {1 + (c >> 2) % 3, 1 + (c >> 1) % 3};
            bd[i] = (td_math_binding){.name = td_math_input_name(b, i), .scalar = 0.5};
            if ((c & 15) == 15) continue; /* a number */
            td_dtype dt = (c & 8) && nd == 1 ? TD_I64 : TD_F32;
            bd[i].tensor =
                dt == TD_I64 ? td_zeros(nd, shape, TD_I64, TD_CPU) : td_rand(nd, shape, 1, 0, TD_F32, TD_CPU);
            if (dt == TD_F32 && !wrt) wrt = bd[i].name;
        }
        int n_out = td_math_n_outputs(b);
        td_tensor *out[8] = {0};
        if (n <= 32 && td_math_run(b, bd, n, out) == TD_OK && n_out >= 1 && out[0] && td_numel(out[0]) == 1 &&
            td_dtype_is_float(td_tensor_dtype(out[0])) && wrt) {
            td_tensor *v, *g;
            (void)td_math_value_and_grad(b, bd, n, 1, &wrt, &v, &g);
        }
        td_scope_end();
        td_math_free(b);
    }
    td_clear_error();
    free(src);
    return 0;
}
