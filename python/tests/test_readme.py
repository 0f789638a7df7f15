"""The READMEs' Python examples run as written, and train: the ```python blocks of the repository README's "Trident
kernel inside a PyTorch model", and every ```python block of python/README.md (the tour for PyTorch users, run in
order in one namespace, as a reader would paste them)."""
import os
import re

import torch

README = os.environ.get("TRIDENT_README") or os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
PY_README = os.path.join(os.path.dirname(README), "python", "README.md")


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


def test_python_readme_tour(capsys):
    blocks = re.findall(r"```python\n(.*?)```", open(PY_README).read(), re.S)
    assert len(blocks) >= 4
    scope = {}
    for k, code in enumerate(blocks):
        exec(compile(code, f"python/README.md block {k + 1}", "exec"), scope)
    out = capsys.readouterr().out
    acc = [float(v) for v in re.findall(r"accuracy (\S+)", out)]
    assert acc and acc[0] > 0.85, out
    epochs = [float(v) for v in re.findall(r"epoch \d+ loss (\S+)", out)]
    assert len(epochs) == 10 and epochs[-1] < 0.6 * epochs[0], out
    steps = [float(v) for v in re.findall(r"step \d+ loss (\S+)", out)]
    assert len(steps) == 3 and steps[-1] < 0.5 * steps[0], out
    assert "['0.weight', '0.bias', '3.weight', '3.bias']" in out and "['0.0.weight', '0.0.bias', '0.1.weight']" in out
