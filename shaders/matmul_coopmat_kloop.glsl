// The K loop of matmul_coopmat.comp and matmul_coopmat_bf16.comp (so that the bf16 kernel's emulated variant,
// which lavapipe runs, exercises the f16 kernel's loop too), included in their main() where the accumulators
// acc[FM][FN] are zeroed; it uses their load_tiles(k0, ao, bo, avec, bvec, slot), store_tiles(stage, slot), the
// fragment macros, ao, bo, avec, bvec and the subgroup block's corner wm, wn. Tile kt is A's columns (B's rows)
// kt BK .. +BK; NK tiles. On its return every subgroup has done its last reads of the stages (the epilogue may
// overwrite them).
// PIPE 0 (TILE bits 25-26; the rule before PIPE): tile kt + 1 is loaded into registers (slot 0) while tile kt is
// multiplied, then stored into the other stage (one barrier per step), or with STAGES 1 into the same one after
// a barrier: the loads have one step's multiplies to arrive in.
// PIPE P >= 1: P register slots hold tiles in flight, tile t in slot t % P, so each load has P steps' multiplies
// to arrive in (the slot index is constant in the loop unrolled P times). Step kt, STAGES 2 (one barrier):
// store tile kt + 1 from its slot into stage (kt + 1) % 2 (read last in step kt - 1, before its barrier), load
// tile kt + 1 + P into that slot, multiply stage kt % 2, barrier. STAGES 1 (two barriers): store tile kt from
// its slot, load tile kt + P into it, barrier, multiply, barrier.
// Registers: P (BM + BN) BK / 8 / WG uvec4s per invocation for the slots.
#define KSTEP(s)                                                                                                   \
    [[unroll]] for (uint kk = 0u; kk < BK; kk += LK) {                                                             \
        HALF fa[FM];                                                                                               \
        HALFB fb[FN];                                                                                              \
        [[unroll]] for (uint i = 0u; i < FM; i++) {                                                                \
            if (A_T != 0u)                                                                                         \
                CM_LOAD_T(fa[i], ((s) * STAGE + kk * LDA + wm + i * LM) / 8u, LDA / 8u);                           \
            else                                                                                                   \
                CM_LOAD(fa[i], ((s) * STAGE + (wm + i * LM) * LDA + kk) / 8u, LDA / 8u);                           \
        }                                                                                                          \
        [[unroll]] for (uint j = 0u; j < FN; j++) {                                                                \
            if (B_T != 0u)                                                                                         \
                CM_LOAD_T(fb[j], ((s) * STAGE + A_SZ + (wn + j * LN) * LDB + kk) / 8u, LDB / 8u);                  \
            else                                                                                                   \
                CM_LOAD(fb[j], ((s) * STAGE + A_SZ + kk * LDB + wn + j * LN) / 8u, LDB / 8u);                      \
        }                                                                                                          \
        [[unroll]] for (uint i = 0u; i < FM; i++)                                                                  \
            [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = CM_MULADD(fa[i], fb[j], acc[i][j]);              \
    }
{
    uint NK = (pc.K + BK - 1u) / BK;
    if (PIPE == 0u) {
        load_tiles(0u, ao, bo, avec, bvec, 0u);
        store_tiles(0u, 0u);
        barrier();
        uint s = 0u;
        for (uint kt = 0u; kt < NK; kt++) {
            bool more = kt + 1u < NK;
            if (more) load_tiles((kt + 1u) * BK, ao, bo, avec, bvec, 0u);
            KSTEP(s)
            uint nxt = STAGES == 2u ? s ^ 1u : 0u;
            if (STAGES == 1u) barrier(); // one stage: every subgroup has read it
            if (more) store_tiles(nxt, 0u);
            barrier();
            s = nxt;
        }
    } else {
        const uint D = STAGES - 1u; // slots hold tiles kt + D .. kt + D + P - 1 at step kt
        if (STAGES == 2u) {
            load_tiles(0u, ao, bo, avec, bvec, 0u);
            store_tiles(0u, 0u);
        }
        [[unroll]] for (uint p = 0u; p < PIPE; p++)
            if (D + p < NK) load_tiles((D + p) * BK, ao, bo, avec, bvec, (D + p) % PIPE);
        if (STAGES == 2u) barrier();
        for (uint k0 = 0u; k0 < NK; k0 += PIPE) {
            [[unroll]] for (uint p = 0u; p < PIPE; p++) {
                uint kt = k0 + p, slot = (p + D) % PIPE; // k0 % PIPE == 0: the slot of tile kt + D
                uint st = PIPE % 2u == 0u ? p & 1u : kt & 1u; // tile kt's stage (STAGES 2), constant for even P
                if (kt < NK) {
                    if (STAGES == 2u) {
                        if (kt + 1u < NK) store_tiles(st ^ 1u, slot);
                        if (kt + 1u + PIPE < NK) load_tiles((kt + 1u + PIPE) * BK, ao, bo, avec, bvec, slot);
                        KSTEP(st)
                    } else {
                        store_tiles(0u, slot);
                        if (kt + PIPE < NK) load_tiles((kt + PIPE) * BK, ao, bo, avec, bvec, slot);
                        barrier();
                        KSTEP(0u)
                    }
                    barrier();
                }
            }
        }
    }
}
#undef KSTEP
