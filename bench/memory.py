"""Each model's declared working memory beside the peak measured when it runs.

Run: ``python bench/memory.py`` (about two minutes on one core; a few hundred MB of memory
per configuration, one at a time).

For the configurations of tests/models/test_memory.py (one or two per family and action,
sized so that the formula's dominant terms dominate) this runs each in a fresh process
(tests/memory_probe.py: a warm-up configuration, the peak resident memory reset, the
configuration, the peak read back) and prints the model's declared working memory plus its
declared outputs (``working_bytes`` and ``output_bytes`` of
:meth:`richlazy_cli.models.base.Model.footprint`), the measured peak and their ratio. The
engine refuses a run whose declared memory exceeds the memory available
(engine/footprint.py), so a ratio above 1 means the declaration is short. The load average
is printed first and last.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from richlazy_cli.models.base import get_model
    from tests.memory_probe import measure
    from tests.models.test_memory import MEASURED

    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'model':<14}{'action':<7}{'configuration':<58}{'declared':>10}{'measured':>10}"
          f"{'ratio':>7}")
    for name, action, params in MEASURED:
        model = get_model(name)
        fp = model.footprint(action, model.resolve(action, params))
        declared = float(fp.working_bytes or 0.0) + float(fp.output_bytes or 0.0)
        measured = measure(name, action, params)["measured"]
        shown = ", ".join(f"{k}={v}" for k, v in params.items() if not isinstance(v, list))
        print(f"{name:<14}{action:<7}{shown[:57]:<58}{declared / 1e6:>8.0f}MB"
              f"{measured / 1e6:>8.0f}MB{measured / declared:>7.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
