"""Bad input gets a one-line Python exception that speaks Python: the layer or function and its Python parameter
names (torch's), never a C function (td_*) or a C parameter name, and the interpreter survives."""
import pytest

import trident as t
import trident.nn as nn

CASES = [
    (lambda: t.ones(2, 3) @ t.ones(2, 3), t.TridentError, r"^matmul: shapes \[2,3\] and \[2,3\] do not align"),
    (lambda: t.ones(2, 3).sum(dim="a"), TypeError, r"^sum\(\): argument 'dim' must be an int"),
    (lambda: t.ones(2, 3).to(dtype="float99"), TypeError, r"unknown dtype 'float99'"),
    (lambda: nn.Linear(3, 2)(t.ones(2, 4)), t.TridentError, r"^Linear: expected input \[\.\.\., 3\]"),
    (lambda: nn.Conv2d(3, 2, 3)(t.ones(1, 2, 5, 5)), t.TridentError, r"^Conv2d: expected 3 input channels"),
    (lambda: nn.BatchNorm2d(3)(t.ones(2, 4, 3, 3)), t.TridentError, r"^BatchNorm2d: expected 3 channels"),
    (lambda: nn.LayerNorm(5)(t.ones(2, 4)), t.TridentError, r"^LayerNorm: .*normalized shape \[5\]"),
    (lambda: nn.Embedding(5, 2)(t.tensor([7])), t.TridentError, r"index 7 .* out of range \[0, 5\)"),
    (lambda: nn.Dropout(1.5), ValueError, r"between 0 and 1, but got 1.5"),
    (lambda: nn.Linear(2.5, 3), TypeError, r"argument 'in_features' must be an int"),
    (lambda: t.cat([t.ones(2), t.ones(2, 2)]), t.TridentError, r"^cat: tensors\[1\] .* tensors\[0\]"),
    (lambda: t.ones(3).index_select(0, t.ones(2, 2, dtype=t.int64)), t.TridentError, r"index must be 1-D"),
    (lambda: t.nn.functional.cross_entropy(t.ones(2, 3), t.tensor([0, 5])), t.TridentError, r"target 5"),
    (lambda: t.ones(2, 3)[5], IndexError, r"index 5 is out of bounds for dimension 0 with size 2"),
    (lambda: t.ones(3).reshape(4), t.TridentError, r"^reshape: shape \[4\] is invalid"),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_message_speaks_python(k):
    fn, exc, pattern = CASES[k]
    with pytest.raises(exc, match=pattern) as info:
        fn()
    msg = str(info.value)
    assert "td_" not in msg and "\n" not in msg and "xs[" not in msg, msg
