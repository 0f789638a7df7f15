"""torch.optim.lr_scheduler's StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, LambdaLR and
OneCycleLR (their closed forms): step() (once per epoch; OneCycleLR once per batch) sets each group's lr from its
initial_lr."""
import math


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self):
        self.last_epoch += 1
        self._last_lr = [self._lr(base) for base in self.base_lrs]
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state):
        self.__dict__.update(state)


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, base):
        return base * self.gamma ** (self.last_epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def _lr(self, base):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def _lr(self, base):
        t = min(self.last_epoch, self.total_iters) / self.total_iters
        return base * (self.start_factor + (self.end_factor - self.start_factor) * t)


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, base):
        return base * self.gamma ** sum(1 for m in self.milestones if m <= self.last_epoch)


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr(self, base):
        return base * self.gamma ** self.last_epoch


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch) (one function, or one per param group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def step(self):
        self.last_epoch += 1
        self._last_lr = [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class OneCycleLR(LRScheduler):
    """torch's OneCycleLR (cos annealing, two phases, three_phase=False; momentum is not cycled): from
    max_lr/div_factor up to max_lr over pct_start of the steps, then down to max_lr/(div_factor*final_div_factor)."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", div_factor=25.0, final_div_factor=1e4, last_epoch=-1, **unused):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', not {anneal_strategy!r}")
        n = len(optimizer.param_groups)
        self.max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * n
        for g, m in zip(optimizer.param_groups, self.max_lrs):
            g["initial_lr"] = m / div_factor
        self.total_steps, self.anneal = total_steps, anneal_strategy
        self.up = float(pct_start * total_steps) - 1
        self.final_div = final_div_factor
        super().__init__(optimizer, last_epoch)

    def _interp(self, start, end, pct):
        if self.anneal == "linear":
            return start + (end - start) * pct
        return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)

    def step(self):
        self.last_epoch += 1
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {t} times with total_steps {self.total_steps}")
        if t <= self.up:
            self._last_lr = [self._interp(b, m, t / self.up) for b, m in zip(self.base_lrs, self.max_lrs)]
        else:
            pct = (t - self.up) / (self.total_steps - 1 - self.up)
            self._last_lr = [self._interp(m, b / self.final_div, pct) for b, m in zip(self.base_lrs, self.max_lrs)]
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr
