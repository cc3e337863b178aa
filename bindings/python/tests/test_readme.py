# SPDX-License-Identifier: Apache-2.0
"""The first Python block of bindings/python/README.md runs as it stands."""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def test_readme_example():
    with open(os.path.join(HERE, "..", "README.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "no python block in README.md"
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
