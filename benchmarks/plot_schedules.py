"""docs/schedules.png: each LR schedule (run `python benchmarks/plot_schedules.py`)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from mutransfer.optim import lr_factor

fig, axes = plt.subplots(1, 2, figsize=(8, 2.8), dpi=80)
total, warmup = 1000, 50
for shape in ("linear", "cosine", "sqrt"):
    axes[0].plot([lr_factor(i, total, warmup, "wsd", 0.0, 0.2, shape) for i in range(total)],
                 label=f"wsd, {shape} cooldown")
axes[0].plot([lr_factor(i, total, warmup, "cosine", 0.0) for i in range(total)], "k--", lw=1,
             label="cosine")
axes[0].set(xlabel="step", ylabel="LR / peak LR", title="1000 steps, warmup 50, cooldown 0.2")
axes[0].legend(fontsize=7)
for steps in (250, 500, 1000):
    axes[1].plot([lr_factor(i, steps, warmup, "wsd", 0.0, 0.2, "sqrt") for i in range(steps)],
                 label=f"{steps} steps")
axes[1].set(xlabel="step", title="one trunk, cooldown branches (sqrt)")
axes[1].legend(fontsize=7)
fig.tight_layout()
fig.savefig("docs/schedules.png")
