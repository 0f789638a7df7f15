/*
** Grad modes: a per-thread stack of scopes. no_grad and enable_grad set
** whether ops are recorded; inference also stops recording, and an
** enable_grad nested inside it does not turn recording back on, so results
** made inside inference can never join a graph. The state lives in core: view
** ops, autocast and DLPack read it, and src/autograd records by it.
*/
#include "internal.h"
#include "trident/autograd.h"

enum { MODE_ON, MODE_OFF, MODE_INFERENCE };
#define MODE_STACK_MAX 256

static _Thread_local bool stack[MODE_STACK_MAX]; /* grad_on to restore at each scope's end */
static _Thread_local int depth;                  /* may exceed MODE_STACK_MAX: the excess is not stored */
static _Thread_local bool grad_on = true;        /* the innermost no_grad/enable_grad setting */
static _Thread_local int inference_depth;

static void push(int mode) {
    if (depth < MODE_STACK_MAX)
        stack[depth] = grad_on;
    else
        TD_ERR(TD_ERR_MISUSE, "grad mode scopes nested deeper than %d", MODE_STACK_MAX);
    depth++;
    if (mode == MODE_INFERENCE) inference_depth++;
    grad_on = mode == MODE_ON;
}

static void pop(bool inference, const char *fn) {
    if (depth == 0) {
        TD_ERR(TD_ERR_MISUSE, "%s: no grad-mode scope is open", fn);
        return;
    }
    depth--;
    if (inference && inference_depth > 0) inference_depth--;
    if (depth < MODE_STACK_MAX) grad_on = stack[depth];
}

void td_no_grad_begin(void) { push(MODE_OFF); }
void td_no_grad_end(void) { pop(false, "td_no_grad_end"); }
void td_enable_grad_begin(void) { push(MODE_ON); }
void td_enable_grad_end(void) { pop(false, "td_enable_grad_end"); }
void td_inference_begin(void) { push(MODE_INFERENCE); }
void td_inference_end(void) { pop(true, "td_inference_end"); }

bool td_grad_enabled(void) { return grad_on && inference_depth == 0; }
