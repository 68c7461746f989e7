"""OReO: online reorganization with a worst-case guarantee (Rong et al.).

The algorithm plane of online reorganization (pure: never imports pyspark):

* :mod:`.reorganizer`: D-UMTS counters and phases (Algorithms 1–4), the
  predictor γ, and Theorem IV.1's bound with its constants;
* :mod:`.baselines`: the exact offline optimum (dynamic programming), the
  best static state, and the online baselines Greedy and Regret;
* :mod:`.manager`: the layout manager (sliding window, ε-admission, pruning);
* :mod:`.candidates`: candidate layouts fitted on the window;
* :mod:`.costs`: ``c(s, q)`` from real or virtual file metadata;
* :mod:`.engine`: the loop a live table and the replay share.

Live tables use it through ``Table.online`` (:mod:`lakelayout.online_table`).
"""

from lakelayout.online.baselines import Greedy, Regret, Schedule, offline_optimum, static_best
from lakelayout.online.engine import OnlineConfig, OnlineEngine, Switch
from lakelayout.online.manager import AS_IS, Candidate, LayoutManager
from lakelayout.online.reorganizer import Reorganizer, Step, harmonic, worst_case_bound

__all__ = [
    "AS_IS",
    "Candidate",
    "Greedy",
    "LayoutManager",
    "OnlineConfig",
    "OnlineEngine",
    "Regret",
    "Reorganizer",
    "Schedule",
    "Step",
    "Switch",
    "harmonic",
    "offline_optimum",
    "static_best",
    "worst_case_bound",
]
