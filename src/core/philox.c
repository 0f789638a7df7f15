/*
** Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
** SC'11): a counter-based generator, so element i of a stream is a pure
** function of (seed, offset + i/4) and every backend can reproduce it.
**
** key   = (lo32(seed), hi32(seed)); counter = (lo32(c), hi32(c), 0, 0)
** round: (c0,c1,c2,c3) -> (hi(M1*c2)^c1^k0, lo(M1*c2), hi(M0*c0)^c3^k1, lo(M0*c0))
**        then k0 += W0, k1 += W1; ten rounds.
*/
#include <pthread.h>

#include "internal.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void td_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* ---- the default generator ---- */

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static td_rng_state rng = {0x5EEDull, 0};

void td_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&rng_lock);
    rng = (td_rng_state){seed, 0};
    pthread_mutex_unlock(&rng_lock);
}

td_rng_state td_rng_get_state(void) {
    pthread_mutex_lock(&rng_lock);
    td_rng_state s = rng;
    pthread_mutex_unlock(&rng_lock);
    return s;
}

void td_rng_set_state(td_rng_state s) {
    pthread_mutex_lock(&rng_lock);
    rng = s;
    pthread_mutex_unlock(&rng_lock);
}

td_rng_state td_rng_reserve(uint64_t n) {
    pthread_mutex_lock(&rng_lock);
    td_rng_state s = rng;
    rng.offset += (n + 3) / 4; /* four 32-bit words per counter */
    pthread_mutex_unlock(&rng_lock);
    return s;
}
