"""trident.optim: torch.optim's SGD, Adam, AdamW and RMSprop over the C library's fused updates
(td_sgd_update, td_adam_update, td_rmsprop_update: torch's formulas, one op per parameter), with param groups
and state_dict; lr_scheduler."""
from . import lr_scheduler  # noqa: F401
from .optimizer import SGD, Adam, AdamW, Optimizer, RMSprop  # noqa: F401
