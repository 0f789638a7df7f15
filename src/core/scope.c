/*
** Autorelease scopes: td_scope_end() releases the references that
** CONSTRUCTORs created since the matching td_scope_begin(), except those
** taken out with td_keep(). One stack of scopes per thread.
**
** The stack and each level's item array outlive the scopes that use them
** (an op in its own scope then costs no malloc); a thread's are freed when it
** exits, and an item array that grew past KEEP_ITEMS is freed at its scope's end.
*/
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

typedef struct scope {
    td_tensor **items;
    size_t n, cap;
} scope;

enum { KEEP_ITEMS = 1024 }; /* item arrays up to this capacity are kept for the next scope at their level */

static _Thread_local scope *stack; /* stack_cap levels; those past depth hold kept item arrays, n = 0 */
static _Thread_local size_t depth, stack_cap;
static _Thread_local size_t lost_scopes; /* scopes opened while out of memory */

static pthread_key_t exit_key; /* its value: the exiting thread's stack, freed by free_stack */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

/* At a thread's exit (the key's destructor runs on that thread, its _Thread_locals still there). */
static void free_stack(void *p) {
    scope *s = p;
    for (size_t i = 0; i < stack_cap; i++) free(s[i].items);
    free(s);
    stack = NULL;
    depth = stack_cap = 0;
}

static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, free_stack) == 0; }

void td_scope_begin(void) {
    if (depth == stack_cap) {
        size_t cap = stack_cap ? stack_cap * 2 : 8;
        pthread_once(&exit_once, make_exit_key);
        scope *s = realloc(stack, cap * sizeof *s);
        if (!s) { /* the scope still opens, so that td_scope_end() pairs with it */
            TD_ERR(TD_ERR_OOM, "td_scope_begin: out of host memory");
            lost_scopes++;
            return;
        }
        for (size_t i = stack_cap; i < cap; i++) s[i] = (scope){0};
        stack = s;
        stack_cap = cap;
        /* fails only out of memory on the thread's first set (no older value to free): the stack then stays */
        if (exit_key_ok) (void)pthread_setspecific(exit_key, s);
    }
    stack[depth++].n = 0;
}

void td_scope_end(void) {
    if (lost_scopes) {
        lost_scopes--;
        return;
    }
    if (depth == 0) {
        TD_ERR(TD_ERR_MISUSE, "td_scope_end: no scope is open");
        return;
    }
    scope done = stack[--depth]; /* taken out: a release may open and close scopes at this level */
    stack[depth] = (scope){0};
    for (size_t i = done.n; i-- > 0;) td_release(done.items[i]);
    if (!stack[depth].items && done.cap <= KEEP_ITEMS)
        stack[depth] = (scope){.items = done.items, .cap = done.cap};
    else
        free(done.items);
}

td_tensor *td__scope_add(td_tensor *t) {
    if (!t || depth == 0) return t;
    scope *s = &stack[depth - 1];
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        td_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items) {
            td_release(t);
            TD_FAIL_NULL(TD_ERR_OOM, "out of host memory registering a tensor with its scope");
        }
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return t;
}

td_tensor *td__scope_end_keep(td_tensor *t) {
    td_keep(t);
    td_scope_end();
    return td__scope_add(t);
}

td_tensor *td_keep(td_tensor *t) {
    if (!t) return NULL;
    for (size_t d = depth; d-- > 0;) {
        scope *s = &stack[d];
        for (size_t i = s->n; i-- > 0;)
            if (s->items[i] == t) {
                s->items[i] = s->items[--s->n];
                return t;
            }
    }
    return t;
}
