"""Delta Lake's own OPTIMIZE ZORDER BY and liquid clustering as peers in the replay.

Their replay (beside lakelayout's policies, at equal file counts) is in
tests/evaluation/test_file_counts.py, which shares one replay between its tests.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelayout.errors import InvalidOption
from lakelayout.evaluation.delta_oss import max_file_size_for
from lakelayout.evaluation.policies import POLICIES, make_policies


@given(files=st.integers(1, 2_000), extra=st.integers(0, 10**9))
def test_max_file_size_makes_delta_cut_exactly_that_many_files(files: int, extra: int) -> None:
    nbytes = files * (files + 1) + extra
    assert max(1, nbytes // max_file_size_for(nbytes, files)) == files


def test_max_file_size_rejects_empty_input() -> None:
    with pytest.raises(InvalidOption, match="files >= 1, got 10, 0"):
        max_file_size_for(10, 0)


def test_peers_are_registered_and_need_the_connector() -> None:
    peers = make_policies(["delta-zorder", "delta-liquid"])
    assert [p.name for p in peers] == ["delta-zorder", "delta-liquid"]
    assert all(p.needs_delta_connector for p in peers)
    assert not any(POLICIES[n]().needs_delta_connector for n in ("none", "liquid", "hilbert"))
