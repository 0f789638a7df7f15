/* A program built against an installed Trident, through find_package or pkg-config. */
#include <stdio.h>
#include <trident/trident.h>

int main(void) {
    td_tensor *t = td_arange(0, 5, 1, TD_F32, TD_CPU);
    double last = td_get(t, (int64_t[]){4});
    td_release(t);
    if (last != 4) {
        fprintf(stderr, "consumer: expected 4, got %g (%s)\n", last, td_last_error());
        return 1;
    }
    printf("consumer ok\n");
    return 0;
}
