// Philox4x32-10 (Salmon et al., SC'11), identical to td_philox4x32 in
// src/core/philox.c: key = seed, counter = (lo, hi, 0, 0) of a 64-bit counter.
#ifndef PHILOX_GLSL
#define PHILOX_GLSL

uvec4 philox4x32(uvec2 seed, uvec2 counter) {
    uint c0 = counter.x, c1 = counter.y, c2 = 0u, c3 = 0u, k0 = seed.x, k1 = seed.y;
    for (int round = 0; round < 10; round++) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c0, hi0, lo0);
        umulExtended(0xCD9E8D57u, c2, hi1, lo1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return uvec4(c0, c1, c2, c3);
}

// 64-bit counter offset + c, as (lo, hi) words
uvec2 counter_add(uvec2 offset, uint c) {
    uint lo = offset.x + c;
    return uvec2(lo, offset.y + (lo < c ? 1u : 0u));
}

float philox_uniform(uint w) { return float(w >> 8) * 5.9604644775390625e-8; } // (w >> 8) * 2^-24

#endif
