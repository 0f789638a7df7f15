"""trident.nn's RNN, LSTM and GRU (and their Cell forms) as views of the C library's recurrent modules (td_rnn_new,
td_lstm_new, td_gru_new, ...): torch's constructors, parameter names (weight_ih_l0, weight_hh_l0, bias_ih_l0,
bias_hh_l0, ..._reverse), initialisation U(-1/sqrt(H), 1/sqrt(H)) and call forms: rnn(x, h0) -> (output, h_n),
lstm(x, (h0, c0)) -> (output, (h_n, c_n)); cell(x, h) -> h', lstm_cell(x, (h, c)) -> (h', c')."""
from .. import _C
from .._tensor import Tensor
from ._cview import CView


def _names(num_layers, bidirectional, bias):
    out = []
    for layer in range(num_layers):
        for sfx in ("", "_reverse") if bidirectional else ("",):
            out += [f"weight_ih_l{layer}{sfx}", f"weight_hh_l{layer}{sfx}"]
            if bias:
                out += [f"bias_ih_l{layer}{sfx}", f"bias_hh_l{layer}{sfx}"]
    return tuple(out)


def _opt(h):
    return None if h is None else Tensor(h)


class _RNNBase(CView):
    _lstm = False

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, dropout, bidirectional
        self._bind(self._new(), _names(num_layers, bidirectional, bias), device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if not self._c_live():
            raise RuntimeError(f"{type(self).__name__}: a parameter was replaced; assign into it instead "
                               "(with trident.no_grad(): rnn.weight_hh_l0.copy_(w))")
        h0, c0 = hx if self._lstm and hx is not None else (hx, None)
        if self._c_training is not self.training:
            _C.module_train(self._cm, self.training)
            object.__setattr__(self, "_c_training", self.training)
        y, h_n, c_n = _C.rnn_forward(self._cm, input, h0, c0)
        return (Tensor(y), (Tensor(h_n), Tensor(c_n)) if self._lstm else Tensor(h_n))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for k, d in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, k) != d:
                s += f", {k}={getattr(self, k)}"
        return s


class RNN(_RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', not {nonlinearity!r}")
        object.__setattr__(self, "nonlinearity", nonlinearity)  # _new() reads it, before Module.__init__
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype)

    def _new(self):
        return _C.rnn_new(self.input_size, self.hidden_size, self.num_layers, int(self.nonlinearity == "relu"),
                          self.bias, self.batch_first, self.dropout, self.bidirectional)


class LSTM(_RNNBase):
    _lstm = True

    def _new(self):
        return _C.lstm_new(self.input_size, self.hidden_size, self.num_layers, self.bias, self.batch_first,
                           self.dropout, self.bidirectional)


class GRU(_RNNBase):
    def _new(self):
        return _C.gru_new(self.input_size, self.hidden_size, self.num_layers, self.bias, self.batch_first,
                          self.dropout, self.bidirectional)


class _CellBase(CView):
    _lstm = False

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if bias else ())
        self._bind(self._new(), names, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if not self._c_live():
            raise RuntimeError(f"{type(self).__name__}: a parameter was replaced; assign into it instead")
        h, c = hx if self._lstm and hx is not None else (hx, None)
        h2, c2 = _C.rnn_cell_forward(self._cm, input, h, c)
        return (Tensor(h2), _opt(c2)) if self._lstm else Tensor(h2)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', not {nonlinearity!r}")
        object.__setattr__(self, "nonlinearity", nonlinearity)  # _new() reads it, before Module.__init__
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def _new(self):
        return _C.rnn_cell_new(self.input_size, self.hidden_size, self.bias, int(self.nonlinearity == "relu"))


class LSTMCell(_CellBase):
    _lstm = True

    def _new(self):
        return _C.lstm_cell_new(self.input_size, self.hidden_size, self.bias)


class GRUCell(_CellBase):
    def _new(self):
        return _C.gru_cell_new(self.input_size, self.hidden_size, self.bias)
