"""The README's "Trident kernel inside a PyTorch model" example runs as written, and trains."""
import os
import re

import torch

README = os.environ.get("TRIDENT_README") or os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_example(capsys):
    text = open(README).read()
    section = text[text.index("## Trident kernel inside a PyTorch model"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    torch.manual_seed(0)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"loss (\S+)", out)]
    assert len(losses) >= 2 and losses[-1] < 0.5 * losses[0], out
