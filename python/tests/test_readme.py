"""The README's Python examples (the ```python blocks of "Trident kernel inside a PyTorch model") run as written,
and train."""
import os
import re

import torch

README = os.environ.get("TRIDENT_README") or os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_examples(capsys):
    text = open(README).read()
    section = text[text.index("## Trident kernel inside a PyTorch model"):]
    section = section[:section.index("\n## ")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2
    for code in blocks:
        torch.manual_seed(0)
        scope = {}
        exec(compile(code, "README.md", "exec"), scope)
        out = capsys.readouterr().out
        losses = [float(v) for v in re.findall(r"loss (\S+)", out)]
        assert len(losses) >= 2 and losses[-1] < 0.5 * losses[0], out
