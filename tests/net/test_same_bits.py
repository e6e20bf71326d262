"""Every engine gives the bits recorded in tests/net/same_bits.json for fixed-seed
runs of every seed network (tests/net/same_bits.py says what a run is): a change
to how the core is organised, or a fusion added, changes no bit. The GPU
engines compare where the reference has an entry for this GPU model and network;
one without is a skip that names the command that records it."""
import pytest

import same_bits
from conftest import engine_params
from cnncuda.seeds import SEEDS

REFERENCE = same_bits.load()


@pytest.mark.parametrize("graphs", ["1", "0"])
@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize("engine", engine_params(("cpu", "omp", "cuda", "cudnn")))
def test_the_recorded_bits(engine, name, graphs, monkeypatch):
    if engine in ("cpu", "omp") and graphs == "0":
        pytest.skip("the host engines record no steps")
    engine = "omp:2" if engine == "omp" else engine
    monkeypatch.setenv("CNNCUDA_GRAPHS", graphs)
    key = same_bits.key(engine)
    if name not in REFERENCE.get(key, {}):
        pytest.skip("no bits recorded for %s on %s: python tests/net/same_bits.py record %s"
                    % (name, key, engine))
    assert same_bits.run(engine, name) == REFERENCE[key][name]
