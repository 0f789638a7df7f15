"""Random numbers as torch's: the default generator is the C library's (td_manual_seed, td_rng_reserve), shared
with its nn.init and dropout, so trident.manual_seed() makes a whole run reproducible and every call draws fresh
numbers. A trident.Generator is a (seed, offset) pair of its own on the same Philox4x32-10 stream rule."""
from . import _C


class Generator:
    """An independent random stream: Generator().manual_seed(0), then randn(..., generator=g)."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed, self._offset = 67280421310721, 0

    def manual_seed(self, seed):
        self._seed, self._offset = int(seed) & (2**64 - 1), 0
        return self

    def seed(self):
        import os

        return self.manual_seed(int.from_bytes(os.urandom(8), "little"))._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return (self._seed, self._offset)

    def set_state(self, state):
        self._seed, self._offset = state
        return self

    def _reserve(self, n):
        r = (self._seed, self._offset)
        self._offset += (n + 3) // 4  # four 32-bit words per Philox counter, as td_rng_reserve
        return r


class _DefaultGenerator(Generator):
    """The C library's default generator (what manual_seed seeds)."""

    def __init__(self):
        self.device = "cpu"

    def manual_seed(self, seed):
        _C.manual_seed(int(seed) & (2**64 - 1))
        return self

    def initial_seed(self):
        return _C.rng_state()[0]

    def get_state(self):
        return _C.rng_state()

    def set_state(self, state):
        _C.rng_set_state(*state)
        return self

    def _reserve(self, n):
        return _C.rng_reserve(n)


default_generator = _DefaultGenerator()


def manual_seed(seed):
    """Seed the default generator (Trident's ops, nn.init and dropout all draw from it); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def reserve(generator, n):
    """(seed, offset) for n fresh values of generator (None: the default one)."""
    return (generator or default_generator)._reserve(n)


def rand(cfn, shape, generator, dtype, device):
    n = 1
    for s in shape:
        n *= s
    seed, offset = reserve(generator, n)
    return cfn(shape, seed, offset, dtype, device)


def randint(low, high, size, generator, dtype, device):
    """low + floor((high - low) * U[0, 1)) as int64 (from float64 uniforms)."""
    from ._tensor import Tensor, _dtype_of, int64, float64

    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing argument 'size'")
    if high <= low:
        raise ValueError(f"randint(): high ({high}) must be greater than low ({low})")
    u = Tensor(rand(_C.rand, tuple(size), generator, float64, "cpu" if device is None else str(device)))
    v = (u * (high - low)).to(dtype=int64) + low
    return v if dtype is None else v.to(dtype=_dtype_of(dtype))
