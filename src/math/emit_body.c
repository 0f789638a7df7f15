/*
** The body of a fused region's GPU kernel, shared by emit_cuda.c and
** emit_glsl.c: per domain element i, the domain index digits the loads need,
** one line per instruction (the math of each op beside it), and the stores.
** The languages differ in types, in the half conversions and in a few
** functions, which the helpers each emitter prepends define:
**   td_erf, td_gelu, td_tanh, td_pow, td_softplus (f32; CUDA also f64),
**   TD_NAN, TD_INF.
*/
#include "math/emit_body.h"

#include <math.h>
#include <string.h>

const char *td_ki_type(bool cuda, td_dtype dt) {
    switch (dt) {
    case TD_F32: return "float";
    case TD_F64: return "double";
    case TD_F16:
    case TD_BF16: return cuda ? "unsigned short" : "uint16_t";
    case TD_I32: return "int";
    case TD_I64: return cuda ? "long long" : "int64_t";
    default: return cuda ? "unsigned char" : "uint8_t";
    }
}

/* buffer element x of dtype dt as the compute type T */
static void load_expr(FILE *f, bool cuda, td_dtype dt, const char *T, const char *x) {
    switch (dt) {
    case TD_F16: fprintf(f, "%s(td_f16_to_f32(%s(%s)))", T, cuda ? "" : "uint", x); break;
    case TD_BF16: fprintf(f, "%s(td_bf16_to_f32(%s(%s)))", T, cuda ? "" : "uint", x); break;
    case TD_BOOL: fprintf(f, "%s(%s != %s(0) ? 1 : 0)", T, x, cuda ? "" : "uint8_t"); break;
    default: fprintf(f, "%s(%s)", T, x); break;
    }
}

/* value v of the compute type as a buffer element of dtype dt (raw: GLSL f16 / bf16 as a uint of the bits) */
static void store_expr(FILE *f, bool cuda, td_dtype dt, const char *v, bool raw) {
    const char *st = td_ki_type(cuda, dt);
    switch (dt) {
    case TD_F16: fprintf(f, "%s(td_f32_to_f16(float(%s)))", cuda ? "(unsigned short)" : raw ? "" : st, v); break;
    case TD_BF16: fprintf(f, "%s(td_f32_to_bf16(float(%s)))", cuda ? "(unsigned short)" : raw ? "" : st, v); break;
    case TD_BOOL: fprintf(f, "%s(%s != 0 ? 1 : 0)", cuda ? "(unsigned char)" : st, v); break;
    default: fprintf(f, cuda ? "(%s)(%s)" : "%s(%s)", st, v); break;
    }
}

bool td_ki_emit_supported(const td_kernel_ir *ir, bool cuda) {
    if (!cuda && ir->n >= ((int64_t)1 << 32)) return false; /* 32-bit indices in GLSL */
    if (cuda || ir->compute != TD_F64) return true;
    for (int v = 0; v < ir->n_insns; v++) { /* GLSL has double arithmetic and sqrt only */
        const td_ki_insn *p = &ir->insns[v];
        if (p->op != TD_KI_EW) continue;
        switch (p->ew) {
        case TD_MEW_EXP:
        case TD_MEW_LOG:
        case TD_MEW_SIN:
        case TD_MEW_COS:
        case TD_MEW_TANH:
        case TD_MEW_SIGMOID:
        case TD_MEW_GELU:
        case TD_MEW_SILU:
        case TD_MEW_SOFTPLUS:
        case TD_MEW_ERF:
        case TD_MEW_POW: return false;
        default: break;
        }
    }
    return true;
}

bool td_ki_vectorizes(const td_kernel_ir *ir, int vec) {
    if (ir->n % vec || ir->n < vec) return false;
    for (int v = 0; v < ir->n_insns; v++) {
        const td_ki_insn *p = &ir->insns[v];
        bool scalar = true;
        for (int d = 0; d < ir->ndim; d++) scalar &= p->strides[d] == 0;
        if (p->op == TD_KI_LOAD && !scalar && !td_ki_contiguous(ir, p)) return false;
    }
    return true;
}

void td_ki_emit_element(FILE *f, const td_kernel_ir *ir, bool cuda, const char *ind, const char *idx_t, bool vec) {
    const char *T = ir->compute == TD_F64 ? "double" : "float";
    char x[64];
    /* index digits of the dims some load walks: c_d = i / (shape[d+1] * ...) % shape[d] */
    for (int d = 0; d < ir->ndim; d++) {
        bool used = false;
        for (int v = 0; v < ir->n_insns; v++)
            used |= ir->insns[v].op == TD_KI_LOAD && ir->insns[v].strides[d] && ir->ndim > 1 &&
                    !td_ki_contiguous(ir, &ir->insns[v]);
        if (!used) continue;
        int64_t inner = 1;
        for (int e = d + 1; e < ir->ndim; e++) inner *= ir->shape[e];
        fprintf(f, "%s%s c%d = i", ind, idx_t, d);
        if (inner > 1) fprintf(f, " / %lldu", (long long)inner);
        if (d > 0) fprintf(f, " %% %lldu", (long long)ir->shape[d]);
        fprintf(f, ";\n");
    }
    for (int v = 0; v < ir->n_insns; v++) {
        const td_ki_insn *p = &ir->insns[v];
        fprintf(f, "%s%s v%d = ", ind, T, v);
        if (p->op == TD_KI_LOAD) {
            int n = 0;
            if (td_ki_contiguous(ir, p))
                snprintf(x, sizeof x, vec ? "l%d[e]" : "b%d[i]", p->buf);
            else {
                n = snprintf(x, sizeof x, "b%d[", p->buf);
                bool any = false;
                for (int d = 0; d < ir->ndim && n < (int)sizeof x - 24; d++)
                    if (p->strides[d]) {
                        n += snprintf(x + n, sizeof x - (size_t)n, "%s%s", any ? " + " : "", ir->ndim == 1 ? "i" : "");
                        if (ir->ndim > 1) n += snprintf(x + n, sizeof x - (size_t)n, "c%d", d);
                        if (p->strides[d] != 1)
                            n += snprintf(x + n, sizeof x - (size_t)n, " * %lldu", (long long)p->strides[d]);
                        any = true;
                    }
                snprintf(x + n, sizeof x - (size_t)n, "%s]", any ? "" : "0");
            }
            load_expr(f, cuda, ir->buf_dtype[p->buf], T, x);
            fprintf(f, ";\n");
            continue;
        }
        if (p->op == TD_KI_CONST) {
            if (isnan(p->value))
                fprintf(f, "%s(TD_NAN);\n", T);
            else if (isinf(p->value))
                fprintf(f, "%s(%sTD_INF);\n", T, p->value < 0 ? "-" : "");
            else
                fprintf(f, "%s(%.17g);\n", T, p->value);
            continue;
        }
        char a[3][16];
        for (int k = 0; k < p->n_a; k++) snprintf(a[k], sizeof a[k], "v%d", p->a[k]);
        const char *A = a[0], *B = a[1], *C = a[2];
        switch ((td_math_ew)p->ew) {
        case TD_MEW_NEG: fprintf(f, "-%s", A); break;
        case TD_MEW_ABS: fprintf(f, "%s(%s)", cuda ? "fabs" : "abs", A); break;
        case TD_MEW_EXP: fprintf(f, "exp(%s)", A); break;
        case TD_MEW_LOG: fprintf(f, "log(%s)", A); break;
        case TD_MEW_SQRT: fprintf(f, "sqrt(%s)", A); break;
        case TD_MEW_RSQRT: fprintf(f, "%s(1) / sqrt(%s)", T, A); break;
        case TD_MEW_SIN: fprintf(f, "sin(%s)", A); break;
        case TD_MEW_COS: fprintf(f, "cos(%s)", A); break;
        case TD_MEW_TANH: fprintf(f, "td_tanh(%s)", A); break;
        case TD_MEW_SIGMOID: fprintf(f, "%s(1) / (%s(1) + exp(-%s))", T, T, A); break; /* 1 / (1 + e^-x) */
        case TD_MEW_RELU: fprintf(f, "%s < %s(0) ? %s(0) : %s", A, T, T, A); break;    /* NaN stays NaN */
        case TD_MEW_GELU: fprintf(f, "td_gelu(%s)", A); break; /* x Phi(x) = x/2 erfc(-x / sqrt 2) */
        case TD_MEW_SILU: fprintf(f, "%s / (%s(1) + exp(-%s))", A, T, A); break;
        case TD_MEW_SOFTPLUS: fprintf(f, "td_softplus(%s)", A); break;
        case TD_MEW_ERF: fprintf(f, "td_erf(%s)", A); break;
        case TD_MEW_SIGN: fprintf(f, "%s > %s(0) ? %s(1) : %s < %s(0) ? %s(-1) : %s", A, T, T, A, T, T, A); break;
        case TD_MEW_CAST: /* round to the cast's dtype */
            if (p->dtype == TD_F16)
                fprintf(f, "%s(td_f16_to_f32(td_f32_to_f16(float(%s))))", T, A);
            else if (p->dtype == TD_BF16)
                fprintf(f, "%s(td_bf16_to_f32(td_f32_to_bf16(float(%s))))", T, A);
            else if (p->dtype == TD_F32)
                fprintf(f, "%s(float(%s))", T, A);
            else if (p->dtype == TD_BOOL)
                fprintf(f, "%s != %s(0) ? %s(1) : %s(0)", A, T, T, T);
            else if (p->dtype == TD_F64)
                fprintf(f, "%s", A);
            else
                fprintf(f, "%s(%s(%s))", T, cuda ? "(long long)" : "int", A);
            break;
        case TD_MEW_ADD: fprintf(f, "%s + %s", A, B); break;
        case TD_MEW_SUB: fprintf(f, "%s - %s", A, B); break;
        case TD_MEW_MUL: fprintf(f, "%s * %s", A, B); break;
        case TD_MEW_DIV: fprintf(f, "%s / %s", A, B); break;
        case TD_MEW_POW: fprintf(f, "td_pow(%s, %s)", A, B); break;
        case TD_MEW_MIN: /* NaN propagates */
            fprintf(f, "isnan(%s) || isnan(%s) ? %s + %s : min(%s, %s)", A, B, A, B, A, B);
            break;
        case TD_MEW_MAX: fprintf(f, "isnan(%s) || isnan(%s) ? %s + %s : max(%s, %s)", A, B, A, B, A, B); break;
        case TD_MEW_LT: fprintf(f, "%s < %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_LE: fprintf(f, "%s <= %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_GT: fprintf(f, "%s > %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_GE: fprintf(f, "%s >= %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_EQ: fprintf(f, "%s == %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_NE: fprintf(f, "%s != %s ? %s(1) : %s(0)", A, B, T, T); break;
        case TD_MEW_WHERE: fprintf(f, "%s != %s(0) ? %s : %s", A, T, B, C); break;
        case TD_MEW_CLAMP: /* min(max(x, lo), hi), NaN x stays NaN */
            fprintf(f, "%s < %s ? (%s > %s ? %s : %s) : %s > %s ? %s : %s", A, B, B, C, C, B, A, C, C, A);
            break;
        case TD_MEW_COUNT: break;
        }
        fprintf(f, ";\n");
    }
    for (int s = 0; s < ir->n_stores; s++) {
        snprintf(x, sizeof x, "v%d", ir->store_value[s]);
        fprintf(f, vec ? "%ss%d[e] = " : "%sb%d[i] = ", ind, ir->store_buf[s]);
        store_expr(f, cuda, ir->buf_dtype[ir->store_buf[s]], x, vec && !cuda);
        fprintf(f, ";\n");
    }
}

/* dst[idx] = acc (mean: acc / K) in the reduction output's dtype */
static void store_reduced(FILE *f, const td_kernel_ir *ir, bool cuda, const char *ind, const char *dst, const char *idx,
                          const char *acc) {
    char v[96];
    if (ir->red_op == TD_MRED_MEAN)
        snprintf(v, sizeof v, "%s / %s(%lld)", acc, ir->compute == TD_F64 ? "double" : "float", (long long)ir->k);
    else
        snprintf(v, sizeof v, "%s", acc);
    fprintf(f, "%s%s[%s] = ", ind, dst, idx);
    store_expr(f, cuda, ir->buf_dtype[ir->red_buf], v, false);
    fprintf(f, ";\n");
}

int64_t td_ki_reduce_groups(const td_kernel_ir *ir, int part, int wg) {
    int64_t outputs = ir->outer * ir->inner, g;
    if (ir->columns)
        g = part == 0 ? ir->outer * ((ir->inner + wg - 1) / wg) * ir->split : (outputs + wg - 1) / wg;
    else
        g = part == 0 ? outputs * ir->split : outputs;
    return g < 1 ? 1 : g < 65535 ? g : 65535;
}

/* column scheme: each thread one output (oo, j), its loop over a chunk of k walks j's column (coalesced) */
static void emit_columns(FILE *f, const td_kernel_ir *ir, bool cuda, int part, const char *I, int wg) {
    const char *T = ir->compute == TD_F64 ? "double" : "float";
    const char *wid = cuda ? "blockIdx.x" : "gl_WorkGroupID.x", *nwg = cuda ? "gridDim.x" : "gl_NumWorkGroups.x";
    long long P = (long long)ir->split, K = (long long)ir->k, inner = (long long)ir->inner;
    long long jb = (inner + wg - 1) / wg, chunk = (K + P - 1) / P, outputs = (long long)ir->outer * inner;
    fprintf(f, "    %s t = %s;\n", I, cuda ? "threadIdx.x" : "gl_LocalInvocationID.x");
    if (part == 1) { /* the partials [outer, P, inner] of output o summed over P */
        fprintf(f, "    for (%s o = %s * %du + t; o < %lldu; o += %s * %du) {\n", I, wid, wg, outputs, nwg, wg);
        fprintf(f, "        %s oo = o / %lldu, j = o %% %lldu;\n        %s acc = %s(TD_RED_INIT);\n", I, inner, inner,
                T, T);
        fprintf(f, "        for (%s p = 0u; p < %lldu; p++) acc = td_comb(acc, b0[(oo * %lldu + p) * %lldu + j]);\n", I,
                P, P, inner);
        store_reduced(f, ir, cuda, "        ", "b1", "o", "acc");
        fprintf(f, "    }\n}\n");
        return;
    }
    fprintf(f, "    for (%s q = %s; q < %lldu; q += %s) {\n", I, wid, (long long)ir->outer * jb * P, nwg);
    fprintf(f, "        %s p = q %% %lldu, oo = q / %lldu / %lldu, j = q / %lldu %% %lldu * %du + t;\n", I, P, P, jb, P,
            jb, wg);
    fprintf(f, "        if (j >= %lldu) continue;\n", inner);
    fprintf(f, "        %s k1 = p * %lldu + %lldu < %lldu ? p * %lldu + %lldu : %lldu;\n", I, chunk, chunk, K, chunk,
            chunk, K);
    fprintf(f, "        %s acc = %s(TD_RED_INIT);\n", T, T);
    fprintf(f, "        for (%s k = p * %lldu; k < k1; k++) {\n", I, chunk);
    fprintf(f, "            %s i = (oo * %lldu + k) * %lldu + j;\n", I, K, inner);
    td_ki_emit_element(f, ir, cuda, "            ", I, false);
    fprintf(f, "            acc = td_comb(acc, v%d);\n        }\n", ir->red_value);
    if (P > 1) /* the partial, raw, into the extra last binding [outer, P, inner] */
        fprintf(f, "        b%d[(oo * %lldu + p) * %lldu + j] = acc;\n", ir->n_bufs, P, inner);
    else {
        char dst[16], idx[48];
        snprintf(dst, sizeof dst, "b%d", ir->red_buf);
        snprintf(idx, sizeof idx, "oo * %lldu + j", inner);
        store_reduced(f, ir, cuda, "        ", dst, idx, "acc");
    }
    fprintf(f, "    }\n}\n");
}

void td_ki_emit_reduce(FILE *f, const td_kernel_ir *ir, bool cuda, int part, const char *I, int wg) {
    if (ir->columns) {
        emit_columns(f, ir, cuda, part, I, wg);
        return;
    }
    const char *T = ir->compute == TD_F64 ? "double" : "float";
    const char *wid = cuda ? "blockIdx.x" : "gl_WorkGroupID.x", *nwg = cuda ? "gridDim.x" : "gl_NumWorkGroups.x";
    const char *sync = cuda ? "__syncthreads()" : "barrier()";
    long long outputs = (long long)(ir->outer * ir->inner), P = (long long)ir->split;
    long long chunk = (long long)((ir->k + ir->split - 1) / ir->split);
    fprintf(f, "    %s t = %s;\n", I, cuda ? "threadIdx.x" : "gl_LocalInvocationID.x");
    if (part == 0) { /* q: an output o and a chunk p of its k */
        fprintf(f, "    for (%s q = %s; q < %lldu; q += %s) {\n", I, wid, outputs * P, nwg);
        fprintf(f, "        %s o = q / %lldu, k0 = q %% %lldu * %lldu, oo = o / %lldu, j = o %% %lldu;\n", I, P, P,
                chunk, (long long)ir->inner, (long long)ir->inner);
        fprintf(f, "        %s k1 = k0 + %lldu < %lldu ? k0 + %lldu : %lldu;\n", I, chunk, (long long)ir->k, chunk,
                (long long)ir->k);
        fprintf(f, "        %s acc = %s(TD_RED_INIT);\n", T, T);
        fprintf(f, "        for (%s k = k0 + t; k < k1; k += %du) {\n", I, wg);
        fprintf(f, "            %s i = (oo * %lldu + k) * %lldu + j;\n", I, (long long)ir->k, (long long)ir->inner);
        td_ki_emit_element(f, ir, cuda, "            ", I, false);
        fprintf(f, "            acc = td_comb(acc, v%d);\n        }\n", ir->red_value);
    } else { /* the chunks' partials of output o */
        fprintf(f, "    for (%s o = %s; o < %lldu; o += %s) {\n", I, wid, outputs, nwg);
        fprintf(f, "        %s acc = %s(TD_RED_INIT);\n", T, T);
        fprintf(f, "        for (%s p = t; p < %lldu; p += %du) acc = td_comb(acc, b0[o * %lldu + p]);\n", I, P, wg, P);
    }
    fprintf(f, "        red[t] = acc;\n        %s;\n", sync);
    fprintf(f, "        for (%s s = %du; s > 0u; s >>= 1) {\n", I, wg / 2);
    fprintf(f, "            if (t < s) red[t] = td_comb(red[t], red[t + s]);\n            %s;\n        }\n", sync);
    fprintf(f, "        if (t == 0u) {\n");
    char dst[16];
    snprintf(dst, sizeof dst, "b%d", part == 1 ? 1 : ir->red_buf);
    if (part == 0 && P > 1) /* the partial, raw, into the extra last binding */
        fprintf(f, "            b%d[q] = red[0];\n", ir->n_bufs);
    else
        store_reduced(f, ir, cuda, "            ", dst, "o", "red[0]");
    fprintf(f, "        }\n        %s;\n    }\n}\n", sync);
}

void td_ki_emit_combine(FILE *f, const td_kernel_ir *ir, bool cuda, const char *T) {
    /* the reduction's combine and identity (NaN propagates through amax / amin) */
    fprintf(f, "%s%s td_comb(%s a, %s b) { ", cuda ? "__device__ inline " : "", T, T, T);
    if (ir->red_op == TD_MRED_AMAX)
        fprintf(f, "return isnan(a) || isnan(b) ? a + b : max(a, b); }\n");
    else if (ir->red_op == TD_MRED_AMIN)
        fprintf(f, "return isnan(a) || isnan(b) ? a + b : min(a, b); }\n");
    else
        fprintf(f, "return a + b; }\n");
    fprintf(f, "#define TD_RED_INIT %s\n",
            ir->red_op == TD_MRED_AMAX   ? "(-TD_INF)"
            : ir->red_op == TD_MRED_AMIN ? "(TD_INF)"
                                         : "0");
}
