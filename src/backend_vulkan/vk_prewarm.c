/*
** Pipeline pre-warm for a fast start: TRIDENT_VULKAN_PREWARM=<name> (trident
** train sets the model's name, the bench's W2 cold start "w2").
**
** Each cache save (vk_pipeline.c, at host waits after new pipelines) writes
** every pipeline the process has made to
**     <cache dir>/vulkan-<vendor>-<device>-prewarm-<name>.txt
** one "<variant> <spec constants...>" line each. When the next process with
** that name creates the device, it queues those pipelines to the compile
** threads (vk_compile.c) and goes on: they are made while the program builds
** its model, and a dispatch that needs one still being made waits for it only
** when its batch is submitted. Variants that would not run there now (a
** feature mask, a denied variant, another cooperative-matrix path) are
** skipped. Only the variants a model used are made; the rest stay lazy.
** Without the variable nothing is listed or pre-warmed; pipelines are still
** made on the compile threads as dispatches first need them.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk.h"

static bool list_path(const vk_dev *d, char *path, size_t n) {
    const char *name = getenv("TRIDENT_VULKAN_PREWARM");
    char dir[3072];
    if (!name || !*name || strchr(name, '/') || strlen(name) > 64 || !vk_cache_dir(dir, sizeof dir)) return false;
    snprintf(path, n, "%s/vulkan-%04x-%04x-prewarm-%s.txt", dir, d->props.vendorID, d->props.deviceID, name);
    return true;
}

void vk_prewarm_save(vk_dev *d) {
    char path[4096], tmp[4200];
    if (!list_path(d, path, sizeof path)) return;
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL;
    for (int s = 0; ok && s < VK_SHADER_COUNT; s++)
        for (const vk_pipeline *p = d->pipelines[s]; ok && p; p = p->next) {
            ok = fprintf(f, "%s", vk_shader_table[s].name) > 0;
            for (int i = 0; ok && i < p->n_spec; i++) ok = fprintf(f, " %u", p->spec[i]) > 0;
            ok = ok && fputc('\n', f) != EOF;
        }
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Whether variant v is what runs on d now (its base picks it; the chosen cooperative-matrix path; the bf16
** retyped GEMM where the device has its features). */
static bool runs_now(const vk_dev *d, int v) {
    const char *name = vk_shader_table[v].name;
    if (vk_shader_table[v].retype == VK_RETYPE_BF16) return d->coopmat_state > 0 && d->caps.coopmat_bf16_native;
    if (!strncmp(name, "matmul_coopmat", 14))
        return d->coopmat_state > 0 && (strstr(name, "_khr_") != NULL) == (d->caps.coopmat == VK_COOPMAT_KHR);
    int base = v;
    for (int i = 0; i < VK_SHADER_COUNT; i++)
        if (vk_shader_table[i].generic == v) base = i;
    return vk_pipeline_pick(d, base) == v;
}

/* Queue the listed pipelines that run on d now to the compile threads. */
void vk_prewarm(vk_dev *d) {
    char path[4096], line[512];
    FILE *f = list_path(d, path, sizeof path) ? fopen(path, "r") : NULL;
    if (!f) return;
    int queued = 0;
    while (fgets(line, sizeof line, f)) {
        uint32_t spec[VK_MAX_SPEC];
        int n_spec = 0;
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        int shader = tok ? vk_variant_id(tok) : -1;
        while (shader >= 0 && (tok = strtok_r(NULL, " \n", &save)) && n_spec < VK_MAX_SPEC)
            spec[n_spec++] = (uint32_t)strtoul(tok, NULL, 10);
        if (shader < 0 || !runs_now(d, shader) || vk_pipeline_module(d, shader) != TD_OK) continue;
        const vk_pipeline *p = d->pipelines[shader];
        while (p && (p->n_spec != n_spec || memcmp(p->spec, spec, 4 * (size_t)n_spec))) p = p->next;
        vk_pipeline *q = p ? NULL : vk_pipeline_add(d, shader, spec, n_spec);
        if (q) {
            vk_compile_submit(d, q);
            queued++;
        }
    }
    fclose(f);
    td_clear_error();
    if (d->verbose)
        fprintf(stderr, "trident: vulkan:%d: pre-warm queued %d pipelines to %d compile threads\n", d->index, queued,
                d->compiler.max_threads);
}
