"""Optimizer (param groups, state, state_dict, zero_grad) and SGD, Adam, AdamW as torch's."""
import copy

from .. import _C
from .._tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}  # id(param) -> dict of its state
        self.param_groups = []
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        for g in params if isinstance(params[0], dict) else [{"params": params}]:
            self.add_param_group(g)

    def add_param_group(self, group):
        group = dict(group)
        group["params"] = [group["params"]] if isinstance(group["params"], Tensor) else list(group["params"])
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        group.setdefault("initial_lr", group["lr"])
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                _C.zero_grad(p._h)

    def _params_with_grad(self, group):
        for p in group["params"]:
            g = _C.grad_of(p._h)
            if g is not None:
                yield p, Tensor(g).contiguous()

    def state_dict(self):
        """torch's layout: {"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}."""
        index, groups = {}, []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {index[k]: {n: (v.clone() if isinstance(v, Tensor) else v) for n, v in s.items()}
                 for k, s in self.state.items() if k in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        params = [p for g in self.param_groups for p in g["params"]]
        for g, saved in zip(self.param_groups, state_dict["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {id(params[i]): {n: (v.clone() if isinstance(v, Tensor) else copy.copy(v)) for n, v in s.items()}
                      for i, s in state_dict["state"].items()}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with _NoGrad():
            for group in self.param_groups:
                for p, g in self._params_with_grad(group):
                    self._update(p, g, self.state.setdefault(id(p), {}), group)
        return loss


class _NoGrad:
    def __enter__(self):
        _C.no_grad_begin()

    def __exit__(self, *exc):
        _C.no_grad_end()


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _update(self, p, g, state, group):
        buf = None
        first = False
        if group["momentum"] != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = Tensor(_C.zeros_like(p._h))
                first = True
        _C.sgd_update(p, g, buf, group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
                      group["nesterov"], first, group["maximize"])


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["exp_avg"] = Tensor(_C.zeros_like(p._h))
            state["exp_avg_sq"] = Tensor(_C.zeros_like(p._h))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = Tensor(_C.zeros_like(p._h))
        state["step"] += 1
        b1, b2 = group["betas"]
        _C.adam_update(p, g, state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq"), group["lr"], b1, b2,
                       group["eps"], group["weight_decay"], state["step"], self._decoupled, group["amsgrad"],
                       group["maximize"])


class AdamW(Adam):
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    def _update(self, p, g, state, group):
        if not state:
            state["step"] = 0
            state["square_avg"] = Tensor(_C.zeros_like(p._h))
            if group["momentum"] > 0:
                state["momentum_buffer"] = Tensor(_C.zeros_like(p._h))
            if group["centered"]:
                state["grad_avg"] = Tensor(_C.zeros_like(p._h))
        state["step"] += 1
        _C.rmsprop_update(p, g, state["square_avg"], state.get("momentum_buffer"), state.get("grad_avg"), group["lr"],
                          group["alpha"], group["eps"], group["weight_decay"], group["momentum"], group["centered"],
                          group["maximize"])
