"""``python -m cnncuda.bench --profile out.png``: where a training step's time
goes, per layer, for each seed network on each engine of the run, as
tables (cnncuda.profile) and one stacked-bar plot with the engines side by
side; with --json, the rows too."""
import json
import os

from ..profile import plot_profiles, profile_network
from ..seeds import SEEDS, seed_network, synthetic_data

STEPS = 10


def run_profiles(plan, log, plot_path, json_path):
    """Profiles every model of the plan on every engine, at the plan's batch
    sizes (default: each seed's), on synthetic data of the seed's shape."""
    profiles = []
    for model in plan.models:
        spec = seed_network(model)
        for batch in plan.batches or [SEEDS[model]["batch_size"]]:
            x, y = synthetic_data(model, batch, seed=plan.seed)
            for device in plan.engines:
                p = profile_network(device, spec["layers"], spec["input_shape"], spec["loss"],
                                    spec["optimizer"], x, y, batch, STEPS, seed=plan.seed)
                p.model = model
                profiles.append(p)
                log("")
                log("== %s" % model)
                for line in str(p).splitlines():
                    log(line)
    if json_path:
        with open(json_path, "w") as f:
            json.dump([dict(p.to_dict(), model=p.model) for p in profiles], f, indent=1)
        log("profiles written to %s" % json_path)
    if plot_path:
        folder = os.path.dirname(os.path.abspath(plot_path))
        os.makedirs(folder, exist_ok=True)
        fig = plot_profiles(profiles)
        fig.axes[1].set_xticklabels(["%s\n%s\nbatch %d" % (p.model, p.device, p.batch_size)
                                     for p in profiles], fontsize=7)
        fig.savefig(plot_path, dpi=120)
        log("plot written to %s" % plot_path)
    return profiles
