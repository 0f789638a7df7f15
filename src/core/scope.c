/*
** Autorelease scopes: td_scope_end() releases the references that
** CONSTRUCTORs created since the matching td_scope_begin(), except those
** taken out with td_keep(). One stack of scopes per thread.
*/
#include <stdlib.h>

#include "internal.h"

typedef struct scope {
    td_tensor **items;
    size_t n, cap;
} scope;

static _Thread_local scope *stack;
static _Thread_local size_t depth, stack_cap;
static _Thread_local size_t lost_scopes; /* scopes opened while out of memory */

void td_scope_begin(void) {
    if (depth == stack_cap) {
        size_t cap = stack_cap ? stack_cap * 2 : 8;
        scope *s = realloc(stack, cap * sizeof *s);
        if (!s) { /* the scope still opens, so that td_scope_end() pairs with it */
            TD_ERR(TD_ERR_OOM, "td_scope_begin: out of host memory");
            lost_scopes++;
            return;
        }
        stack = s;
        stack_cap = cap;
    }
    stack[depth++] = (scope){0};
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
    scope *s = &stack[--depth];
    for (size_t i = s->n; i-- > 0;) td_release(s->items[i]);
    free(s->items);
    if (depth == 0) { /* the outermost scope closed: free the stack, so that an exiting thread leaks none */
        free(stack);
        stack = NULL;
        stack_cap = 0;
    }
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
