"""Fuzzing the communicator's binding (hypothesis): random ranks, world sizes,
addresses, ports, timeouts and argument types either make a Comm or raise a
clean exception (TypeError, ValueError, OverflowError for a Python int past
C's int, CommError for a port that cannot be listened on); a Comm that is
made can be aborted any number of times and freed, and never hangs (nothing
here connects, which is what would wait)."""
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import cnncuda  # noqa: E402
from cnncuda import _C  # noqa: E402
from fuzz_strategies import FUZZ, hang_guard  # noqa: E402,F401

INTS = st.one_of(st.integers(-3, 70000), st.integers(-2**70, 2**70), st.none(), st.text(max_size=3),
                 st.floats(allow_nan=True))
ADDRS = st.one_of(st.sampled_from(["127.0.0.1", "localhost", "", "no-such-host.invalid",
                                   "x" * 300, "::1", "0.0.0.0"]), st.integers(), st.none())
CLEAN = (TypeError, ValueError, OverflowError, cnncuda.CommError)


@settings(max_examples=300, **FUZZ)
@given(rank=INTS, world=INTS, addr=ADDRS, port=INTS,
       timeout=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5),
                         st.none()),
       aborts=st.integers(0, 3))
def test_comm_arguments(rank, world, addr, port, timeout, aborts):
    try:
        comm = _C.Comm(rank, world, addr, port, timeout)
    except CLEAN:
        return
    assert 0 <= comm.rank < comm.world and comm.kind == "host"
    assert 0 <= comm.port <= 65535
    for _ in range(aborts):
        comm.abort("fuzz")
    if comm.world == 1:                    # a group of one needs nobody
        if aborts:
            with pytest.raises(cnncuda.CommError, match="fuzz"):
                comm.connect()
        else:
            comm.connect()


@pytest.mark.parametrize("aborts", [0, 2])
def test_a_group_of_one(aborts):
    test_comm_arguments.hypothesis.inner_test(0, 1, "127.0.0.1", 0, 1.0, aborts)
