// The staging of a bf16 operand as f16 on the tensor cores (matmul_coopmat_bf16.comp, whose top comment
// gives the scaling and its bounds; matmul_bf16_scale.comp, which writes the same f16 ahead of the
// kernel): a row of a (column of b) with key k (matmul_bf16_keys.comp) has exponent E = exp_of(k), and
// each of its elements x is staged as the f16 of x 2^(141 - E), exactly where representable.
// The includer declares `keys[]` (the keys buffer) first.

int exp_of(uint key) { return clamp(key >= 0x80u ? int(key >> 7) : findMSB(key) - 6, 15, 254); }
float scale_of(int e) { return uintBitsToFloat(uint(268 - e) << 23); }
uint low_of(int e) { return (uint(max(e - 28, 1)) << 7) - 1u; }
int exp_of_scale(float s) { return 268 - int(floatBitsToUint(s) >> 23); }

// bf16 bits h -> f16 bits of h 2^(141 - e), exactly where representable (the kernel's top comment)
uint to_f16_slow(uint h, int e) {
    uint sign = h & 0x8000u, ab = h & 0x7FFFu;
    if (ab >= 0x7F80u) return sign | 0x7C00u | ((ab & 0x7Fu) << 3); // inf, nan
    if (ab == 0u) return sign;
    int ex = int(ab >> 7);
    uint sig = ab & 0x7Fu;
    if (ex == 0) { // bf16 subnormal: normalize, sig x 2^(ex - 134) with bit 7 set
        int sh = 7 - findMSB(sig);
        sig <<= uint(sh);
        ex = 1 - sh;
    } else {
        sig |= 0x80u;
    }
    int e16 = ex + 29 - e; // <= 29
    if (e16 >= 1) return sign | (uint(e16) << 10) | ((sig & 0x7Fu) << 3);
    int r = -(e16 + 2); // f16 subnormal: sig x 2^(e16 + 2) units of 2^-24
    uint q = 0u;
    if (r <= 0) {
        q = sig << uint(-r);
    } else if (r < 9) {
        q = sig >> uint(r);
        uint rem = sig & ((1u << uint(r)) - 1u), half_ = 1u << uint(r - 1);
        if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
    }
    return sign | max(q, 1u);
}

// 8 bf16 (4 words, lanes lo / hi) -> 8 f16: lane scales s_lo[q], s_hi[q], slow-path bounds lw[q]; the
// fast path where no nonzero lane is below its bound (an inf or NaN lane then gives the f32 -> f16 pack's bits)
uvec4 to_f16(uvec4 w, vec4 s_lo, vec4 s_hi, uvec4 lw) {
    uvec4 ab = w & 0x7FFF7FFFu;
    uvec4 g = (ab | 0x80008000u) - 0x00010001u; // lane bit 15: ab != 0
    uvec4 g2 = g - lw;                          // lane bit 15: ab >= bound (no borrow out of a lane)
    uvec4 bad = g & ~g2 & 0x80008000u;
    uvec4 r;
    if (any(notEqual(bad, uvec4(0u)))) {
        [[unroll]] for (uint q = 0u; q < 4u; q++)
            r[q] = to_f16_slow(w[q] & 0xFFFFu, exp_of_scale(s_lo[q])) |
                   (to_f16_slow(w[q] >> 16, exp_of_scale(s_hi[q])) << 16);
    } else {
        [[unroll]] for (uint q = 0u; q < 4u; q++)
            r[q] = packHalf2x16(vec2(uintBitsToFloat(w[q] << 16) * s_lo[q],
                                     uintBitsToFloat(w[q] & 0xFFFF0000u) * s_hi[q]));
    }
    return r;
}

// the exponent E of key i of n (keys k0 + i; 0 past n)
int exp_at(uint k0, uint i, uint n) { return exp_of(i < n ? keys[k0 + i] : 0u); }

// one scale and bound for a run of index i (of n) whose lanes share it
void run_scale(uint k0, uint i, uint n, out float sc, out uint lw) {
    int e = exp_at(k0, i, n);
    sc = scale_of(e);
    lw = low_of(e) * 0x00010001u;
}

// the lane scales and bounds of runs starting at index i0 (of n): lanes 2q, 2q + 1
void lane_scales(uint k0, uint i0, uint n, out vec4 lo, out vec4 hi, out uvec4 lw) {
    [[unroll]] for (uint q = 0u; q < 4u; q++) {
        int e0 = exp_at(k0, i0 + 2u * q, n), e1 = exp_at(k0, i0 + 2u * q + 1u, n);
        lo[q] = scale_of(e0);
        hi[q] = scale_of(e1);
        lw[q] = low_of(e0) | (low_of(e1) << 16);
    }
}

